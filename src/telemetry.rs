//! Metrics: the names toold reports, the functions that record them, and the Prometheus
//! recorder they land in (rendered by the HTTP door's `/metrics`).
//!
//! Only this module names the exporter. The service and the door record through the
//! functions below (the `metrics` facade), from results they already have; the core
//! (dispatch, tools, …) records nothing, so it stays free of any metrics crate.
//!
//! The recorder is process-global (the `metrics` facade has one slot), installed on first use;
//! several daemons or routers in one test process share it.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::tool::ToolResult;

/// HTTP requests, by matched route, method and status.
pub const HTTP_REQUESTS: &str = "toold_http_requests_total";
/// gRPC requests, by method (`/package.Service/Method`, `unknown` for one not served) and
/// the status the response head carries (`OK` when it carries none: answered, the status
/// following in the trailers).
pub const GRPC_REQUESTS: &str = "toold_grpc_requests_total";
/// Tool calls, by tool and outcome (`ok` or the error kind).
pub const TOOL_CALLS: &str = "toold_tool_calls_total";
/// Wall time of a batch from being recorded to being completed, in seconds.
pub const BATCH_DURATION: &str = "toold_batch_duration_seconds";

/// Histogram buckets for batch durations: a millisecond to the shell's ten-minute maximum.
const BATCH_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 600.0,
];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// Installs the Prometheus recorder (once per process) and returns its handle; `None` when
/// another recorder was installed first, in which case `/metrics` has nothing to render.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    RECORDER.get_or_init(install).as_ref()
}

fn install() -> Option<PrometheusHandle> {
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(BATCH_DURATION.to_owned()), BATCH_BUCKETS)
        .map_err(|err| tracing::warn!(error = %err, "metrics buckets refused"))
        .ok()?;
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    match metrics::set_global_recorder(recorder) {
        Ok(()) => Some(handle),
        Err(err) => {
            tracing::warn!(error = %err, "a metrics recorder was already installed");
            None
        }
    }
}

/// The metrics in Prometheus text format (empty when no recorder of ours is installed).
pub fn render() -> String {
    prometheus()
        .map(PrometheusHandle::render)
        .unwrap_or_default()
}

/// One HTTP request answered. `route` is the matched route template (`/v1/sessions/{id}`),
/// never the raw path, so ids do not explode the label space.
pub fn record_http_request(route: &str, method: &str, status: u16) {
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.to_owned(),
        "method" => method.to_owned(),
        "status" => status.to_string()
    )
    .increment(1);
}

/// One gRPC request answered (see [`GRPC_REQUESTS`] for the labels).
pub fn record_grpc_request(method: String, code: &'static str) {
    metrics::counter!(GRPC_REQUESTS, "method" => method, "code" => code).increment(1);
}

/// A finished batch: one count per call by tool and outcome, and the batch's duration.
pub fn record_batch(results: &[ToolResult], duration: Duration) {
    // Counted per (tool, outcome) first: a batch of a hundred reads is one registry lookup.
    let mut counts: Vec<(&str, &'static str, u64)> = Vec::new();
    for result in results {
        let outcome = match result.error_kind {
            Some(kind) => kind.as_str(),
            None if result.is_error => "error",
            None => "ok",
        };
        match counts
            .iter_mut()
            .find(|(tool, seen, _)| *tool == result.name && *seen == outcome)
        {
            Some((_, _, count)) => *count += 1,
            None => counts.push((&result.name, outcome, 1)),
        }
    }
    for (tool, outcome, count) in counts {
        metrics::counter!(TOOL_CALLS, "tool" => tool.to_owned(), "outcome" => outcome)
            .increment(count);
    }
    metrics::histogram!(BATCH_DURATION).record(duration.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_batch_shows_in_the_rendered_text() {
        assert!(prometheus().is_some());
        let ok = ToolResult {
            id: "c1".into(),
            name: "telemetry_probe".into(),
            is_error: false,
            output: String::new(),
            error_kind: None,
            duration_ms: 1.0,
            offloaded: None,
            structured: None,
            metadata: serde_json::Map::new(),
        };
        record_batch(&[ok], Duration::from_millis(3));
        let text = render();
        assert!(
            text.contains(r#"toold_tool_calls_total{tool="telemetry_probe",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("toold_batch_duration_seconds_bucket"),
            "{text}"
        );
    }
}
