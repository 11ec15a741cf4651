//! Audit phase (outermost): times the call and writes its audit row before the result is
//! returned, whichever phase produced the result; or, for a batch answered whole, holds the
//! row for the batch to write with the others before it answers (`HeldAudit`).

use std::sync::Arc;
use std::time::{Instant, SystemTime};

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::dispatch::ports::{AuditRecord, AuditSink};

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

        let mut outcome = run_next(next, request).await;
        outcome.result.duration_ms = clock.elapsed().as_secs_f64() * 1000.0;

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
