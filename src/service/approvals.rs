//! Approvals as the doors see them: the pending list of a session, and resolving one.
//!
//! Creating approvals (and waiting on them inside the pipeline) arrives with the permissions
//! issue; until then an approval exists only if something stored it, and resolving records the
//! decision in the store and publishes `permission:decision`.

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::{ServiceError, ToolService};
use crate::event::{EventDraft, EventType};

/// A pending approval (`GET /v1/sessions/{id}/approvals`).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PendingApproval {
    pub id: String,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    pub reason: String,
}

/// `POST /v1/sessions/{id}/approvals/{approval_id}`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResolveApprovalRequest {
    /// `allow` or `deny`.
    pub decision: String,
    #[serde(default)]
    pub reason: Option<String>,
    /// Remember the decision for the rest of the session (applied by the permissions issue).
    #[serde(default)]
    pub remember: bool,
}

impl ToolService {
    /// The session's unresolved approvals, oldest first.
    pub async fn pending_approvals(
        &self,
        session_id: &str,
    ) -> Result<Vec<PendingApproval>, ServiceError> {
        self.ensure_session_known(session_id).await?;
        let pending = self.store.pending_approvals(session_id).await?;
        Ok(pending
            .into_iter()
            .map(|a| PendingApproval {
                id: a.id,
                call_id: a.call_id,
                tool: a.tool,
                input: a.input,
                reason: a.reason,
            })
            .collect())
    }

    /// Resolves a pending approval of the session; `not_found` if it is unknown, another
    /// session's, or already resolved.
    pub async fn resolve_approval(
        &self,
        session_id: &str,
        approval_id: &str,
        request: ResolveApprovalRequest,
    ) -> Result<(), ServiceError> {
        if !matches!(request.decision.as_str(), "allow" | "deny") {
            return Err(ServiceError::invalid(format!(
                "decision must be \"allow\" or \"deny\", got \"{}\"",
                request.decision
            )));
        }
        let unknown = || ServiceError::not_found(format!("unknown approval \"{approval_id}\""));
        let pending = self.store.pending_approvals(session_id).await?;
        let approval = pending
            .into_iter()
            .find(|a| a.id == approval_id)
            .ok_or_else(unknown)?;
        if !self
            .store
            .resolve_approval(approval_id, &request.decision, "api")
            .await?
        {
            return Err(unknown());
        }
        self.events.publish(
            EventDraft::new(EventType::PermissionDecision, session_id)
                .call(approval.call_id, approval.tool)
                .data(json!({
                    "approval_id": approval_id,
                    "decision": request.decision,
                    "reason": request.reason,
                    "remember": request.remember,
                    "decided_by": "api",
                })),
        );
        Ok(())
    }
}
