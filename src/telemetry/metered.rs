//! Wrappers that record metrics at the ports where the facts are known, so the core (dispatch,
//! permission, hooks) stays free of any metrics crate: the server wires these around the
//! store's audit sink, each configured hook and the approvals the policy waits on.
//!
//! - [`MeteredAudit`]: every call leaves exactly one audit row, whatever happened to it, so the
//!   row is where a call's duration (`toold_tool_call_duration_seconds{tool}`), its permission
//!   decision (`toold_permission_decisions_total{decision,decided_by}`) and its offloaded size
//!   (`toold_offloaded_bytes_total`) are counted. The offload records characters, not bytes;
//!   the counter adds the characters offloaded (equal to bytes for ASCII output) rather than
//!   reading the stored text again.
//! - [`MeteredHook`]: one `toold_hook_runs_total{event,outcome}` per hook that ran (its
//!   matcher matched): pre hooks by verdict (`continue`, `ask`, `deny`), post hooks `ok` or
//!   `context` (it added context for the model).
//! - [`MeteredApprovals`]: `toold_approvals_pending` counts the approval waits in progress.
//!
//! Labels are static strings or tool names (the catalogue is bounded); never session, batch,
//! call or approval ids.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;

use super::{
    APPROVALS_PENDING, HOOK_RUNS, OFFLOADED_BYTES, PERMISSION_DECISIONS, TOOL_CALL_DURATION,
};
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::hooks::{
    HookEvent, HookEventName, PostToolUseOutcome, PreToolUseOutcome, PreToolVerdict, ToolHook,
};
use crate::permission::approvals::{ApprovalAsk, WaitOutcome};
use crate::permission::{ApprovalWait, DecidedBy, PermissionDecision};

/// An audit sink that counts each row before handing it on.
pub struct MeteredAudit {
    inner: Arc<dyn AuditSink>,
}

impl MeteredAudit {
    pub fn wrap(inner: Arc<dyn AuditSink>) -> Arc<dyn AuditSink> {
        Arc::new(MeteredAudit { inner })
    }
}

fn record_row(record: &AuditRecord) {
    let tool = record.tool.clone().unwrap_or_else(|| "unknown".to_owned());
    if let Some(decision) = &record.decision {
        let (label, by) = match decision {
            PermissionDecision::Allow { decided_by } => ("allow", decided_by),
            PermissionDecision::Deny { decided_by, .. } => ("deny", decided_by),
        };
        metrics::counter!(PERMISSION_DECISIONS, "decision" => label, "decided_by" => decided_by_label(by))
            .increment(1);
    }
    if let Some(offloaded) = &record.offloaded {
        metrics::counter!(OFFLOADED_BYTES).increment(offloaded.total_chars);
    }
    metrics::histogram!(TOOL_CALL_DURATION, "tool" => tool).record(record.duration_ms / 1000.0);
}

/// Who decided, as a bounded label: the kind, never the rule text, hook command or approver.
pub fn decided_by_label(by: &DecidedBy) -> &'static str {
    by.label()
}

#[async_trait]
impl AuditSink for MeteredAudit {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError> {
        record_row(&record);
        self.inner.record(record).await
    }

    async fn record_many(&self, records: Vec<AuditRecord>) -> Result<(), SinkError> {
        records.iter().for_each(record_row);
        self.inner.record_many(records).await
    }
}

/// A hook that counts its runs.
pub struct MeteredHook {
    inner: Arc<dyn ToolHook>,
}

impl MeteredHook {
    pub fn wrap(inner: Arc<dyn ToolHook>) -> Arc<dyn ToolHook> {
        Arc::new(MeteredHook { inner })
    }
}

fn event_label(name: HookEventName) -> &'static str {
    match name {
        HookEventName::PreToolUse => "PreToolUse",
        HookEventName::PostToolUse => "PostToolUse",
        HookEventName::PostToolUseFailure => "PostToolUseFailure",
    }
}

#[async_trait]
impl ToolHook for MeteredHook {
    fn name(&self) -> &str {
        self.inner.name()
    }

    fn matches(&self, tool_name: &str) -> bool {
        self.inner.matches(tool_name)
    }

    async fn pre_tool_use(&self, event: &HookEvent) -> PreToolUseOutcome {
        let outcome = self.inner.pre_tool_use(event).await;
        let label = match outcome.verdict {
            PreToolVerdict::Continue => "continue",
            PreToolVerdict::Ask { .. } => "ask",
            PreToolVerdict::Deny { .. } => "deny",
        };
        metrics::counter!(HOOK_RUNS, "event" => event_label(event.hook_event_name), "outcome" => label)
            .increment(1);
        outcome
    }

    async fn post_tool_use(&self, event: &HookEvent) -> PostToolUseOutcome {
        let outcome = self.inner.post_tool_use(event).await;
        let label = match outcome.additional_context {
            Some(_) => "context",
            None => "ok",
        };
        metrics::counter!(HOOK_RUNS, "event" => event_label(event.hook_event_name), "outcome" => label)
            .increment(1);
        outcome
    }
}

/// The approvals the policy waits on, counted while each wait lasts.
pub struct MeteredApprovals {
    inner: Arc<dyn ApprovalWait>,
}

impl MeteredApprovals {
    pub fn wrap(inner: Arc<dyn ApprovalWait>) -> Arc<dyn ApprovalWait> {
        Arc::new(MeteredApprovals { inner })
    }
}

/// Takes one off the gauge when the wait ends, however it ends (a dropped future too).
struct PendingGuard;

impl Drop for PendingGuard {
    fn drop(&mut self) {
        metrics::gauge!(APPROVALS_PENDING).decrement(1.0);
    }
}

#[async_trait]
impl ApprovalWait for MeteredApprovals {
    async fn wait_for(
        &self,
        ask: &ApprovalAsk<'_>,
        timeout: Duration,
        cancelled: BoxFuture<'_, ()>,
    ) -> (String, WaitOutcome) {
        metrics::gauge!(APPROVALS_PENDING).increment(1.0);
        let _pending = PendingGuard;
        self.inner.wait_for(ask, timeout, cancelled).await
    }
}
