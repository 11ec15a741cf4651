//! The spans of a batch and of each of its calls (DESIGN §9), as the core's own spans
//! (`tool::trace::CoreSpan`): `batch`, and `execute_tool {tool}` with OpenTelemetry's GenAI
//! attributes. Exported only when traces are on (`telemetry::traces`); otherwise they are
//! inert and nothing here formats anything.
//!
//! Decisions: `gen_ai.tool.type` is `function` for a built-in tool and `extension` for one
//! from outside (a bridged MCP server's: an external system the agent reaches through
//! toold), and absent for an unknown name. `error.type` is the result's error kind
//! (`permission_denied`, `timeout`, …, the same word the result and the metrics carry) and
//! sets the span's status to error with the result's first line as its description. Content
//! (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) is recorded only with a content
//! limit (`[telemetry] capture_content`), cut to it.

use super::pipeline::CallOutcome;
use crate::registry::{RegisteredTool, ToolSource, UnknownTool};
use crate::tool::trace::{CoreSpan, truncated};
use crate::tool::{CallInput, ToolCall};

/// The span a batch's calls run in (under the span the batch is started in).
pub(crate) fn batch_span(session_id: &str, batch_id: &str) -> CoreSpan {
    CoreSpan::start_here(
        || "batch".into(),
        || {
            vec![
                ("toold.session.id", session_id.to_owned().into()),
                ("toold.batch.id", batch_id.to_owned().into()),
            ]
        },
    )
}

/// Records a finished batch's counts on its span.
pub(crate) fn record_batch(span: &mut CoreSpan, calls: usize, errors: usize) {
    span.set("toold.batch.calls", count(calls));
    span.set("toold.batch.errors", count(errors));
}

fn count(n: usize) -> i64 {
    i64::try_from(n).unwrap_or(i64::MAX)
}

/// The `execute_tool {tool}` span of one call (under the batch's, the span it is made in).
pub(crate) fn call_span(
    call: &ToolCall,
    tool: &Result<std::sync::Arc<RegisteredTool>, UnknownTool>,
    session_id: &str,
    batch_id: &str,
    content_limit: Option<usize>,
) -> CoreSpan {
    CoreSpan::start_here(
        || format!("execute_tool {}", call.name).into(),
        || {
            let mut attributes = vec![
                ("gen_ai.operation.name", "execute_tool".into()),
                ("gen_ai.tool.name", call.name.clone().into()),
                ("gen_ai.tool.call.id", call.id.clone().into()),
                ("toold.session.id", session_id.to_owned().into()),
                ("toold.batch.id", batch_id.to_owned().into()),
            ];
            match tool {
                Ok(tool) if tool.source == ToolSource::BuiltIn => {
                    attributes.push(("gen_ai.tool.type", "function".into()));
                }
                Ok(_) => attributes.push(("gen_ai.tool.type", "extension".into())),
                Err(_) => {}
            }
            if let Some(limit) = content_limit {
                let arguments = match &call.input {
                    CallInput::Json(input) => input.to_string(),
                    CallInput::Malformed { raw, .. } => raw.to_string(),
                };
                attributes.push((
                    "gen_ai.tool.call.arguments",
                    truncated(&arguments, limit).into(),
                ));
            }
            attributes
        },
    )
}

/// Records what a call ended with on its span.
pub(crate) fn record_outcome(
    span: &mut CoreSpan,
    outcome: &CallOutcome,
    content_limit: Option<usize>,
) {
    if !span.is_recording() {
        return;
    }
    if let Some(decision) = &outcome.decision {
        span.set("toold.decided_by", decision.decided_by().label());
    }
    let result = &outcome.result;
    if result.is_error {
        let kind = result.error_kind.map_or("error", |kind| kind.as_str());
        span.set("error.type", kind);
        let first_line = result.output.lines().next().unwrap_or(kind);
        span.fail(truncated(first_line, 256));
    }
    if let Some(limit) = content_limit {
        span.set("gen_ai.tool.call.result", truncated(&result.output, limit));
    }
}
