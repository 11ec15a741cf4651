//! Audit phase (outermost): times the call and writes its audit row before the result is
//! returned, whichever phase produced the result; or, for a batch answered whole, holds the
//! row for the batch to write with the others before it answers (`HeldAudit`). A cancelled
//! call's row says who stopped it (`cancelled_by`); every row keeps the trace the call ran in
//! (`trace_id`, `tool::trace::current`) and whose request asked for the
//! batch (`principal`, the batch's actor). Each row says where the call ran (`isolation`,
//! DESIGN §12): an environment session's tier for every call, since every tool works in the
//! environment; in a plain session the sandbox a bash call reports in its `sandbox` metadata
//! (`bwrap`, `landlock`, or `none` for an unsandboxed call), read from the result rather than
//! asked of the shell so that it is the sandbox that call took, not the daemon's default;
//! and nothing for a plain session's other tools, which run in the daemon itself.

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::{CallOutcome, CallRequest, CallSignals, Next, Phase, run_next};
use crate::dispatch::ports::{AuditRecord, AuditSink};
use crate::tool::trace;
use crate::tool::{ErrorKind, ToolResult};

pub struct Audit {
    sink: Arc<dyn AuditSink>,
}

impl Audit {
    pub fn new(sink: Arc<dyn AuditSink>) -> Audit {
        Audit { sink }
    }
}

impl Phase for Audit {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        let started_at = SystemTime::now();
        let clock = Instant::now();
        let session_id = request.ctx.session_id.to_string();
        let batch_id = request.batch_id.to_string();
        let index = request.index;
        let tool = request.tool.as_ref().ok().map(|t| t.name().to_owned());
        let held = request.held_audit.clone();
        let signals = request.signals.clone();
        let tier = request
            .ctx
            .session
            .environment()
            .map(|environment| environment.isolation);

        let mut outcome = run_next(next, request).await;
        outcome.result.duration_ms = clock.elapsed().as_secs_f64() * 1000.0;
        // In the call's span (the executor runs the pipeline in it).
        let trace_id = trace::current().map(|context| context.trace_id_hex());
        outcome.trace_id = trace_id.as_deref().map(Arc::from);

        // Nothing after this phase reads the final input: the row takes it.
        let input = outcome.final_input.take().unwrap_or_default();
        let result = &outcome.result;
        let record = AuditRecord {
            session_id,
            batch_id,
            call_id: result.id.clone(),
            index,
            requested_name: result.name.clone(),
            tool,
            input,
            decision: outcome.decision.clone(),
            is_error: result.is_error,
            error_kind: result.error_kind,
            output_chars: result.output.chars().count() as u64,
            offloaded: result.offloaded.clone(),
            started_at,
            duration_ms: result.duration_ms,
            cancelled_by: cancelled_by(result, &signals),
            trace_id,
            principal: signals.interrupt.actor().map(|actor| actor.to_string()),
            isolation: isolation(tier, result),
        };
        if let Some(held) = held {
            // The batch writes it, with its siblings', before any result is returned.
            held.hold(record);
        } else if let Err(err) = self.sink.record(record).await {
            // The call has already happened; withholding its result would not undo it. The
            // failure is logged loudly and the result still returned.
            tracing::error!(call_id = %result.id, error = %err, "audit row not written");
        }
        outcome
    }
}

/// Where the call ran: the environment's tier, else the sandbox the shell says it ran in.
fn isolation(tier: Option<&'static str>, result: &ToolResult) -> Option<String> {
    match tier {
        Some(tier) => Some(tier.to_owned()),
        None => result
            .metadata
            .get("sandbox")
            .and_then(|sandbox| sandbox.as_str())
            .map(str::to_owned),
    }
}

/// Who stopped a cancelled call, from the signals that stop calls: the session's close, the
/// batch's own canceller (set before its interrupt fires), or the session's interrupt.
fn cancelled_by(result: &ToolResult, signals: &CallSignals) -> Option<String> {
    if result.error_kind != Some(ErrorKind::Cancelled) {
        return None;
    }
    if signals.close.is_cancelled() {
        return Some("session_close".to_owned());
    }
    if let Some(by) = signals.interrupt.cancelled_by() {
        return Some(by.to_owned());
    }
    signals
        .interrupt
        .is_cancelled()
        .then(|| "session_interrupt".to_owned())
}
