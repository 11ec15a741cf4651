//! Execute (innermost): runs the tool under its timeout, the session interrupt and the
//! group's abort signal, and turns whatever happens into exactly one outcome.
//!
//! The tool runs inside the session's call gate (`session::gate`): shared for a call the
//! executor admitted as concurrency-safe, exclusive otherwise, entered here (after the
//! permission decision and the pre-tool hooks, so a call waiting for an approval holds
//! nothing) and left when the tool returns. A stop signal that fires while the call waits
//! for its turn stops it there; the timeout counts from when it runs.
//!
//! When a call must stop, its context's cancellation token fires first and the tool gets a
//! short grace period to return what it has (a shell's partial output); only then is its
//! future dropped. A panic inside the tool is caught and becomes an `execution` error.

use std::convert::Infallible;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::task::{Context, Poll};
use std::time::Duration;

use futures::FutureExt;
use futures::future::BoxFuture;
use tower::Service;

use super::{CallOutcome, CallRequest, SpilledResult};
use crate::dispatch::DispatchSettings;
use crate::session::GateAccess;
use crate::tool::{
    EnvironmentView, ErrorKind, InterruptBehavior, SessionView, SpilledOutput, ToolError,
    ToolOutput, ToolResult,
};

#[derive(Clone)]
pub struct Execute {
    default_timeout: Duration,
    cancel_grace: Duration,
    /// The session gate's cap on calls running together.
    max_concurrency: usize,
}

impl Execute {
    pub fn new(settings: &DispatchSettings) -> Execute {
        Execute {
            default_timeout: settings.call_timeout,
            cancel_grace: settings.cancel_grace,
            max_concurrency: settings.max_concurrency,
        }
    }
}

/// Why a running call was stopped.
#[derive(Clone, Copy)]
enum Stop {
    Timeout(Duration),
    Cancelled,
    Aborted,
    Closed,
}

type Finished = Result<Result<ToolOutput, ToolError>, String>;

impl Service<Box<CallRequest>> for Execute {
    type Response = Box<CallOutcome>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Box<CallOutcome>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Box<CallRequest>) -> Self::Future {
        let this = self.clone();
        Box::pin(async move { Ok(this.execute(request).await) })
    }
}

impl Execute {
    async fn execute(self, mut request: Box<CallRequest>) -> Box<CallOutcome> {
        let Ok(tool) = request.tool.clone() else {
            // The lookup phase refuses unknown tools before they get here.
            return CallOutcome::refused(&request, ErrorKind::UnknownTool, "unknown tool");
        };
        let spec = tool.spec();
        let timeout = spec.timeout.unwrap_or(self.default_timeout);
        let cancel_on_interrupt = spec.interrupt_behavior == InterruptBehavior::Cancel;
        // This phase holds the request last: its input becomes the outcome's final input,
        // and the tool gets the one copy.
        let input = request.take_input();
        let ctx = request.ctx.clone();
        let signals = request.signals.clone();
        // A stop that came while the call was still in permission or hooks: never start it.
        let stopped_already = if signals.close.is_cancelled() {
            Some(Stop::Closed)
        } else if signals.abort.is_cancelled() {
            Some(Stop::Aborted)
        } else if cancel_on_interrupt && signals.interrupt.is_cancelled() {
            Some(Stop::Cancelled)
        } else {
            None
        };
        if let Some(stop) = stopped_already {
            return finish(&request, input, Err(String::new()), Some(stop));
        }
        let access = GateAccess::for_call(request.admitted_safe);
        let gate = request.session.call_gate(self.max_concurrency);
        let entered = tokio::select! {
            biased;
            () = signals.close.cancelled() => Err(Stop::Closed),
            () = signals.abort.cancelled() => Err(Stop::Aborted),
            () = signals.interrupt.cancelled(), if cancel_on_interrupt => Err(Stop::Cancelled),
            pass = gate.enter(access) => Ok(pass),
        };
        // Held until the tool returned (or was stopped and given its grace).
        let _inside = match entered {
            Ok(pass) => pass,
            Err(stop) => return finish(&request, input, Err(String::new()), Some(stop)),
        };

        let running = AssertUnwindSafe(tool.tool.execute(input.clone(), &ctx))
            .catch_unwind()
            .map(|finished| finished.map_err(panic_message));
        tokio::pin!(running);
        let stop = tokio::select! {
            // A call that finished wins over a stop that fired in the same poll.
            biased;
            finished = &mut running => {
                return finish(&request, input, finished, None);
            }
            // Closing also interrupts; the close is the reason to report.
            () = signals.close.cancelled() => Stop::Closed,
            () = tokio::time::sleep(timeout) => Stop::Timeout(timeout),
            () = signals.interrupt.cancelled(), if cancel_on_interrupt => Stop::Cancelled,
            () = signals.abort.cancelled() => Stop::Aborted,
        };
        ctx.cancellation.cancel();
        let partial = tokio::time::timeout(self.cancel_grace, &mut running)
            .await
            .ok();
        finish(
            &request,
            input,
            partial.unwrap_or(Err(String::new())),
            Some(stop),
        )
    }
}

fn panic_message(payload: Box<dyn std::any::Any + Send>) -> String {
    let text = payload
        .downcast_ref::<&str>()
        .map(|s| (*s).to_owned())
        .or_else(|| payload.downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "unknown panic".into());
    format!("the tool panicked: {text}")
}

fn stop_message(stop: Stop, tool: &str, cancelled_by: Option<&str>) -> (ErrorKind, String) {
    match stop {
        Stop::Timeout(limit) => (
            ErrorKind::Timeout,
            format!("\"{tool}\" did not finish within {} ms", limit.as_millis()),
        ),
        Stop::Cancelled => (
            ErrorKind::Cancelled,
            match cancelled_by {
                Some(by) => format!("\"{tool}\" was cancelled by its caller ({by})"),
                None => format!("\"{tool}\" was cancelled by an interrupt"),
            },
        ),
        Stop::Closed => (
            ErrorKind::Cancelled,
            format!("\"{tool}\" was cancelled because its session was closed"),
        ),
        Stop::Aborted => (
            ErrorKind::Aborted,
            format!("\"{tool}\" was aborted because a sibling call in its parallel group failed"),
        ),
    }
}

/// Turns what the tool returned (or did not) into the call's outcome.
fn finish(
    request: &CallRequest,
    input: serde_json::Value,
    finished: Finished,
    stop: Option<Stop>,
) -> Box<CallOutcome> {
    let finished = match request.session.environment() {
        Some(environment) => in_environment_terms(finished, environment),
        None => finished,
    };
    let mut result = ToolResult::refused(&request.call, ErrorKind::Execution, "");
    let mut context_updates = Vec::new();
    let mut spill = None;
    let name = request.call.name.as_str();
    match (stop, finished) {
        (None, Ok(Ok(mut output))) => {
            let kind = output.error_kind.unwrap_or(ErrorKind::Execution);
            result.is_error = output.is_error;
            result.error_kind = output.is_error.then_some(kind);
            result.output = if output.is_error {
                kind.format_output(&output.text)
            } else {
                std::mem::take(&mut output.text)
            };
            let tool_text = if output.is_error {
                &output.text
            } else {
                &result.output
            };
            spill = spilled(&result.output, tool_text, output.spill.take());
            result.structured = output.structured;
            result.metadata = output.metadata;
            context_updates = output.context_updates;
        }
        (None, Ok(Err(err))) => {
            result.error_kind = Some(err.kind());
            result.output = err.kind().format_output(err.message());
        }
        (None, Err(panic)) => result.output = ErrorKind::Execution.format_output(&panic),
        (Some(stop), partial) => {
            let cancelled_by = request.signals.interrupt.cancelled_by();
            let (kind, mut message) = stop_message(stop, name, cancelled_by);
            if let Ok(Ok(mut output)) = partial {
                if !output.text.is_empty() {
                    message.push_str("\n\npartial output:\n");
                    message.push_str(&output.text);
                }
                if let Some(file) = output.spill.take() {
                    spill = spilled(&kind.format_output(&message), &output.text, Some(file));
                }
                result.metadata = output.metadata;
                // A stopped call may still have changed state (a `cd` before the timeout).
                context_updates = output.context_updates;
            }
            result.error_kind = Some(kind);
            result.output = kind.format_output(&message);
        }
    }
    // What the tool learned running (an upload's bytes and entries) joins the recorded input.
    let mut input = input;
    if let (Some(serde_json::Value::Object(learned)), serde_json::Value::Object(fields)) =
        (result.metadata.get("audit"), &mut input)
    {
        fields.extend(learned.clone());
    }
    Box::new(CallOutcome {
        result,
        executed: true,
        decision: None,
        final_input: Some(input),
        context_updates,
        additional_context: Vec::new(),
        spill,
        trace_id: None,
    })
}

/// What a tool of an environment session answered, with the host's path of the environment's
/// root written as the environment sees it (DESIGN §12: paths are the environment's), in its
/// text, its error and the strings of its structured content and metadata. A spilled
/// output's file is left as written: the tools whose output grows that large (the searches,
/// `bash`) already speak the environment's paths.
fn in_environment_terms(finished: Finished, environment: &EnvironmentView) -> Finished {
    let inside = |text| environment.into_inside_paths(text);
    finished.map(|answered| match answered {
        Ok(mut output) => {
            output.text = inside(std::mem::take(&mut output.text));
            if let Some(structured) = &mut output.structured {
                environment.inside_paths_of(structured);
            }
            output
                .metadata
                .values_mut()
                .for_each(|value| environment.inside_paths_of(value));
            Ok(output)
        }
        Err(err) => Err(err.map_message(inside)),
    })
}

/// The spilled form of a result whose text ends with the tool's text: what comes
/// before that text, then the tool's file.
fn spilled(
    result_text: &str,
    tool_text: &str,
    spill: Option<Arc<SpilledOutput>>,
) -> Option<SpilledResult> {
    let output = spill?;
    let lead = result_text.strip_suffix(tool_text)?;
    Some(SpilledResult {
        lead: lead.to_owned(),
        output,
    })
}
