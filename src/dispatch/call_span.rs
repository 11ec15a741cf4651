//! The spans of a batch and of each of its calls (DESIGN §9), as `tracing` spans of target
//! `tool::trace::TARGET`: `batch`, and `execute_tool {tool}` with OpenTelemetry's GenAI
//! attributes. Exported only when traces are on (`telemetry::traces`); otherwise each
//! `info_span!` is a disabled callsite and nothing here formats anything.
//!
//! Decisions: `gen_ai.tool.type` is `function` for a built-in tool and `extension` for one
//! from outside (a bridged MCP server's: an external system the agent reaches through
//! toold), and absent for an unknown name. `error.type` is the result's error kind
//! (`permission_denied`, `timeout`, …, the same word the result and the metrics carry) and
//! sets the span's status to error with the result's first line as its description. Content
//! (`gen_ai.tool.call.arguments`, `gen_ai.tool.call.result`) is recorded only with a content
//! limit (`[telemetry] capture_content`), cut to it.

use tracing::Span;
use tracing::field::Empty;

use super::pipeline::CallOutcome;
use crate::registry::{RegisteredTool, ToolSource, UnknownTool};
use crate::tool::trace::{self, truncated};
use crate::tool::{CallInput, ToolCall};

/// The span a batch's calls run in.
pub(crate) fn batch_span(session_id: &str, batch_id: &str) -> Span {
    tracing::info_span!(
        target: trace::TARGET,
        "batch",
        otel.name = "batch",
        toold.session.id = %session_id,
        toold.batch.id = %batch_id,
        toold.batch.calls = Empty,
        toold.batch.errors = Empty,
    )
}

/// Records a finished batch's counts on its span.
pub(crate) fn record_batch(span: &Span, calls: usize, errors: usize) {
    span.record("toold.batch.calls", calls);
    span.record("toold.batch.errors", errors);
}

/// The `execute_tool {tool}` span of one call.
pub(crate) fn call_span(
    call: &ToolCall,
    tool: &Result<std::sync::Arc<RegisteredTool>, UnknownTool>,
    session_id: &str,
    batch_id: &str,
    content_limit: Option<usize>,
) -> Span {
    let tool_type = match tool {
        Ok(tool) if tool.source == ToolSource::BuiltIn => Some("function"),
        Ok(_) => Some("extension"),
        Err(_) => None,
    };
    let span = tracing::info_span!(
        target: trace::TARGET,
        "execute_tool",
        otel.name = %format_args!("execute_tool {}", call.name),
        gen_ai.operation.name = "execute_tool",
        gen_ai.tool.name = %call.name,
        gen_ai.tool.call.id = %call.id,
        gen_ai.tool.type = tool_type,
        toold.session.id = %session_id,
        toold.batch.id = %batch_id,
        toold.decided_by = Empty,
        error.type = Empty,
        otel.status_description = Empty,
        gen_ai.tool.call.arguments = Empty,
        gen_ai.tool.call.result = Empty,
    );
    if let Some(limit) = content_limit.filter(|_| !span.is_disabled()) {
        let arguments = match &call.input {
            CallInput::Json(input) => input.to_string(),
            CallInput::Malformed { raw, .. } => raw.to_string(),
        };
        span.record(
            "gen_ai.tool.call.arguments",
            truncated(&arguments, limit).as_str(),
        );
    }
    span
}

/// Records what a call ended with on its span.
pub(crate) fn record_outcome(span: &Span, outcome: &CallOutcome, content_limit: Option<usize>) {
    if span.is_disabled() {
        return;
    }
    if let Some(decision) = &outcome.decision {
        span.record("toold.decided_by", decision.decided_by().label());
    }
    let result = &outcome.result;
    if result.is_error {
        let kind = result.error_kind.map_or("error", |kind| kind.as_str());
        span.record("error.type", kind);
        let first_line = result.output.lines().next().unwrap_or(kind);
        // Recording a description sets the status to error.
        span.record(
            "otel.status_description",
            truncated(first_line, 256).as_str(),
        );
    }
    if let Some(limit) = content_limit {
        span.record(
            "gen_ai.tool.call.result",
            truncated(&result.output, limit).as_str(),
        );
    }
}
