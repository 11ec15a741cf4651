//! The data of the events a batch publishes for itself and its calls, rendered straight into
//! the events' JSON ([`EventData`]): several events a call, so no `Value` is built for them.
//! Fields are declared in sorted order, the order a `Value` map renders its keys in, so the
//! stored text is what it was when these were `json!` maps.

use serde::Serialize;

use crate::event::EventData;
use crate::tool::{CallInput, ErrorKind, OffloadedResult, Recorded, ToolResult};

/// Characters of a failed call's output its `tool:error` event carries.
const ERROR_OUTPUT_CHARS: usize = 1000;

/// `batch:end`.
pub(super) fn batch_end(calls: usize, errors: usize) -> EventData {
    #[derive(Serialize)]
    struct BatchEnd {
        calls: usize,
        errors: usize,
    }
    EventData::of(&BatchEnd { calls, errors })
}

/// `tool:queued`.
pub(super) fn queued(index: usize) -> EventData {
    #[derive(Serialize)]
    struct Queued {
        index: usize,
    }
    EventData::of(&Queued { index })
}

/// `tool:pre`: the input as the audit log records it ([`CallInput::to_record`]), not copied.
pub(super) fn pre(input: &CallInput) -> EventData {
    #[derive(Serialize)]
    struct Pre<'a> {
        input: Recorded<'a>,
    }
    EventData::of(&Pre {
        input: input.recorded(),
    })
}

/// `tool:post` (a result that is not an error) or `tool:error`, with the trace the call ran
/// in (`trace_id`, absent when there was none).
pub(super) fn outcome(result: &ToolResult, trace_id: Option<&str>) -> EventData {
    #[derive(Serialize)]
    struct Post<'a> {
        duration_ms: f64,
        offloaded: &'a Option<OffloadedResult>,
        output_chars: usize,
        #[serde(skip_serializing_if = "Option::is_none")]
        trace_id: Option<&'a str>,
    }
    #[derive(Serialize)]
    struct Error<'a> {
        duration_ms: f64,
        error_kind: Option<ErrorKind>,
        output: &'a str,
        #[serde(skip_serializing_if = "Option::is_none")]
        trace_id: Option<&'a str>,
    }
    if result.is_error {
        let cut = result
            .output
            .char_indices()
            .nth(ERROR_OUTPUT_CHARS)
            .map_or(result.output.len(), |(at, _)| at);
        EventData::of(&Error {
            duration_ms: result.duration_ms,
            error_kind: result.error_kind,
            output: &result.output[..cut],
            trace_id,
        })
    } else {
        EventData::of(&Post {
            duration_ms: result.duration_ms,
            offloaded: &result.offloaded,
            output_chars: result.output.chars().count(),
            trace_id,
        })
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    fn result(output: &str, is_error: bool) -> ToolResult {
        ToolResult {
            id: "c1".into(),
            name: "read_file".into(),
            is_error,
            output: output.into(),
            error_kind: is_error.then_some(ErrorKind::Execution),
            duration_ms: 2.25,
            offloaded: (!is_error).then(|| OffloadedResult {
                result_id: "res_1".into(),
                total_chars: 11,
            }),
            structured: None,
            metadata: serde_json::Map::new(),
        }
    }

    /// The text each renders is what the `json!` maps these replaced rendered.
    #[test]
    fn rendered_as_the_maps_were() {
        assert_eq!(
            batch_end(3, 1).json(),
            json!({"calls": 3, "errors": 1}).to_string()
        );
        assert_eq!(queued(7).json(), json!({"index": 7}).to_string());
        let input = CallInput::Json(json!({"file_path": "a \"b\".txt", "limit": 2}));
        assert_eq!(
            pre(&input).json(),
            json!({"input": input.to_record()}).to_string()
        );
        let malformed = CallInput::from_arguments("{\"file_path\": ");
        assert_eq!(
            pre(&malformed).json(),
            json!({"input": malformed.to_record()}).to_string()
        );
        let ok = result("héllo\nworld", false);
        assert_eq!(
            outcome(&ok, None).json(),
            json!({"duration_ms": 2.25, "output_chars": 11, "offloaded": ok.offloaded}).to_string()
        );
        let traced = outcome(&ok, Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(
            traced.value()["trace_id"],
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }

    #[test]
    fn an_error_carries_its_first_thousand_characters() {
        let long: String = "é".repeat(1500);
        let failed = result(&long, true);
        let expected = json!({
            "error_kind": failed.error_kind,
            "output": failed.output.chars().take(1000).collect::<String>(),
            "duration_ms": failed.duration_ms,
        });
        assert_eq!(outcome(&failed, None).json(), expected.to_string());
        let short = result("no such file", true);
        assert_eq!(outcome(&short, None).value()["output"], "no such file");
        let traced = outcome(&short, Some("4bf92f3577b34da6a3ce929d0e0e4736"));
        assert_eq!(
            traced.value()["trace_id"],
            "4bf92f3577b34da6a3ce929d0e0e4736"
        );
    }
}
