//! Approvals as the doors see them: the pending list of a session (or of every session this
//! daemon runs, for the dashboard), and resolving one.
//!
//! The waiting side lives in the permission policy ([`crate::permission::RulePolicy`]): an
//! `ask` in an interactive session records an approval and waits. Resolving here settles it in
//! the store (exactly once) and hands the answer to the waiting call, whose permission phase
//! then publishes `permission:decision` and records the approver in the audit row. Every door
//! calls [`ToolService::resolve_approval`] with the approver it authenticated.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::access::Access;
use super::{ServiceError, ToolService};
use crate::event::{EventDraft, EventType};
use crate::permission::approvals::ResolveError;
use crate::permission::{Approver, Principal, Resolution};
use crate::store::ApprovalRecord;

/// A pending approval (`GET /v1/sessions/{id}/approvals`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub id: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    pub reason: String,
}

impl From<ApprovalRecord> for PendingApproval {
    fn from(record: ApprovalRecord) -> PendingApproval {
        PendingApproval {
            id: record.id,
            session_id: record.session_id,
            call_id: record.call_id,
            tool: record.tool,
            input: record.input,
            reason: record.reason,
        }
    }
}

/// `POST /v1/sessions/{id}/approvals/{approval_id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveApprovalRequest {
    /// `allow` or `deny`.
    pub decision: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Apply the answer to the same call (the same bash line, resolved path, host, or tool)
    /// for the rest of the session.
    #[serde(default)]
    pub remember: bool,
}

impl ToolService {
    /// The session's unresolved approvals, oldest first.
    pub async fn pending_approvals(
        &self,
        caller: &Principal,
        session_id: &str,
    ) -> Result<Vec<PendingApproval>, ServiceError> {
        self.authorize(caller, session_id, Access::Read).await?;
        self.ensure_session_known(session_id, super::Closed::Gone)
            .await?;
        let pending = self.store.pending_approvals(session_id).await?;
        Ok(pending.into_iter().map(PendingApproval::from).collect())
    }

    /// The unresolved approvals of every session this daemon runs (`GET /v1/approvals`),
    /// session by session in the order of [`ToolService::list_sessions`], oldest first within
    /// one. A session closed meanwhile is skipped. Sessions another daemon of a fleet runs are
    /// not included: their calls wait on that daemon. Only the sessions `caller` sees
    /// (an agent: its own).
    pub async fn every_pending_approval(
        &self,
        caller: &Principal,
    ) -> Result<Vec<PendingApproval>, ServiceError> {
        let mut every = Vec::new();
        for session in self.list_sessions(caller) {
            let pending = self.store.pending_approvals(&session.id).await?;
            every.extend(pending.into_iter().map(PendingApproval::from));
        }
        Ok(every)
    }

    /// Resolves a pending approval of the session as `approver` (who `caller` is, as the
    /// door recorded it): `not_found` if it is unknown, another session's, or already
    /// resolved; `conflict` if another resolution (or the timeout) settled it while this one
    /// was on its way.
    pub async fn resolve_approval(
        &self,
        caller: &Principal,
        session_id: &str,
        approval_id: &str,
        request: ResolveApprovalRequest,
        approver: Approver,
    ) -> Result<(), ServiceError> {
        self.authorize(caller, session_id, Access::Write).await?;
        let allow = match request.decision.as_str() {
            "allow" => true,
            "deny" => false,
            other => {
                return Err(ServiceError::invalid(format!(
                    "decision must be \"allow\" or \"deny\", got \"{other}\""
                )));
            }
        };
        self.ensure_session_known(session_id, super::Closed::Gone)
            .await?;
        let unknown = || {
            ServiceError::not_found(format!(
                "unknown approval \"{approval_id}\" (or it is already resolved)"
            ))
        };
        let pending = self.store.pending_approvals(session_id).await?;
        let approval = pending
            .into_iter()
            .find(|a| a.id == approval_id)
            .ok_or_else(unknown)?;
        let resolution = Resolution {
            allow,
            reason: request.reason.clone(),
            remember: request.remember,
            approver: approver.clone(),
        };
        let delivered = match self.approvals.resolve(approval_id, resolution).await {
            Ok(delivered) => delivered,
            Err(ResolveError::AlreadyResolved(_)) => {
                return Err(ServiceError::conflict(format!(
                    "approval \"{approval_id}\" was resolved by someone else first"
                )));
            }
            Err(ResolveError::Ledger(err)) => return Err(err.into()),
        };
        if !delivered {
            // No call waits (it ended meanwhile): the decision is still published.
            self.events.publish(
                EventDraft::new(EventType::PermissionDecision, session_id)
                    .actor(caller.name.clone())
                    .call(approval.call_id, approval.tool)
                    .data(json!({
                        "approval_id": approval_id,
                        "decision": request.decision,
                        "reason": request.reason,
                        "remember": request.remember,
                        "decided_by": approver.to_string(),
                    })),
            );
        }
        Ok(())
    }
}
