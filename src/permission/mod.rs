//! Permission decisions: what a call needs before it runs, and who decided.
//!
//! This module owns the [`PermissionPolicy`] trait the dispatcher asks, and [`ModePolicy`],
//! which compares the session's mode with what the call requires (the ordered modes,
//! [`PermissionLevel`], are the tool contract's and re-exported here). The rule grammar is in
//! [`rules`], matching a rule against a call in [`matcher`], waiting for a person in
//! [`approvals`], and the policy the daemon runs (deny → remembered → hook ask → ask → allow
//! → mode) in [`policy`].
//!
//! It sits below the session and the store and names neither: a policy sees the session
//! through [`PermissionSession`] and keeps approvals through [`ApprovalLedger`], both traits
//! defined here and implemented above (`tests/architecture.rs` holds the layering).

pub mod approvals;
pub mod matcher;
pub mod policy;
mod principal;
pub mod rules;
mod settings;
#[cfg(test)]
pub(crate) mod test_session;

pub use approvals::{ApprovalLedger, ApprovalWait, Approvals, Approver, NewApproval, Resolution};
pub use policy::RulePolicy;
pub use principal::{Principal, Role, digests_equal};
pub use rules::{
    RememberedRule, Rule, RuleContext, RuleError, RuleKind, RuleSet, RuleSource, SessionRules,
    ToolNames,
};
pub use settings::PermissionSettings;
// The levels are the tool contract's (a spec declares what a call needs); re-exported here
// because every permission decision speaks them.
pub use crate::tool::{PermissionLevel, UnknownPermissionMode};

use std::path::Path;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

/// What a permission check may know of, and do to, the session it judges a call for: its
/// workspace, its rules, the answers it remembers (and remembering one more), and the tokens
/// that end a wait for a person. `session::SessionState` implements it, so permission sits
/// below the session (which carries the rules) without naming it, and what a policy may
/// change in a session is exactly this list.
pub trait PermissionSession: std::fmt::Debug + Send + Sync {
    fn working_directory(&self) -> &Path;
    /// The server's and the session's permission rules.
    fn permission_rules(&self) -> &SessionRules;
    /// Rules remembered from approvals, oldest first.
    fn remembered_rules(&self) -> Vec<RememberedRule>;
    /// Remembers an approval's answer for the rest of the session (a repeat is kept once).
    fn remember_rule(&self, rule: RememberedRule);
    /// Fires when the session closes.
    fn close_token(&self) -> CancellationToken;
    /// Fires at the session's next interrupt.
    fn interrupt_token(&self) -> CancellationToken;
    /// Fires at the session's next interrupt, or when batch `batch_id` alone is cancelled
    /// (an MCP client cancelling its request); a session without per-batch interrupts has
    /// only the session's.
    fn batch_interrupt_token(&self, _batch_id: &str) -> CancellationToken {
        self.interrupt_token()
    }
}

/// Who made a permission decision; recorded in the audit row.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "by", rename_all = "snake_case")]
pub enum DecidedBy {
    /// The session's mode against the call's required level.
    Mode { mode: PermissionLevel },
    /// A configured rule (its text; several joined by ", " when the simple commands of a
    /// bash line were allowed by different rules) and where it came from.
    Rule { rule: String, source: RuleSource },
    /// A pre-tool hook.
    Hook { hook: String },
    /// A person resolving an approval: the door and token they used, and what asked.
    Approver {
        approver: String,
        token: Option<String>,
        approval_id: String,
        asked_by: Box<DecidedBy>,
    },
    /// Nobody resolved the approval in time.
    Timeout {
        approval_id: String,
        timeout_ms: u64,
        asked_by: Box<DecidedBy>,
    },
}

impl DecidedBy {
    /// Who decided, as one word: `mode`, `rule`, `hook`, `approver`, `timeout` (a metric
    /// label, a span attribute).
    pub fn label(&self) -> &'static str {
        match self {
            DecidedBy::Mode { .. } => "mode",
            DecidedBy::Rule { .. } => "rule",
            DecidedBy::Hook { .. } => "hook",
            DecidedBy::Approver { .. } => "approver",
            DecidedBy::Timeout { .. } => "timeout",
        }
    }
}

/// The outcome of a permission check.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "decision", rename_all = "snake_case")]
pub enum PermissionDecision {
    Allow {
        decided_by: DecidedBy,
    },
    Deny {
        decided_by: DecidedBy,
        reason: String,
    },
}

impl PermissionDecision {
    pub fn is_allow(&self) -> bool {
        matches!(self, PermissionDecision::Allow { .. })
    }

    pub fn decided_by(&self) -> &DecidedBy {
        match self {
            PermissionDecision::Allow { decided_by }
            | PermissionDecision::Deny { decided_by, .. } => decided_by,
        }
    }
}

/// What a policy is asked about one call.
#[derive(Clone, Debug)]
pub struct PermissionRequest<'a> {
    pub session_id: &'a str,
    /// The session: its workspace, rules and remembered answers.
    pub session: &'a dyn PermissionSession,
    pub batch_id: &'a str,
    /// Who asked for the batch (a principal's name), named on the events of an approval.
    pub actor: Option<&'a str>,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub input: &'a Value,
    pub required: PermissionLevel,
    pub mode: PermissionLevel,
    pub interactive: bool,
    /// Set when a pre-tool hook asked for confirmation: the policy must not allow the call
    /// on mode alone.
    pub hook_asked: Option<&'a str>,
}

/// Decides whether a call may run.
#[async_trait]
pub trait PermissionPolicy: Send + Sync + 'static {
    async fn decide(&self, request: &PermissionRequest<'_>) -> PermissionDecision;
}

/// The mode check alone: allow when the session's mode covers the call's required level.
#[derive(Clone, Copy, Debug, Default)]
pub struct ModePolicy;

#[async_trait]
impl PermissionPolicy for ModePolicy {
    async fn decide(&self, request: &PermissionRequest<'_>) -> PermissionDecision {
        let decided_by = DecidedBy::Mode { mode: request.mode };
        if let Some(hook) = request.hook_asked {
            // The mode alone has no approver, so an ask cannot be granted ([`RulePolicy`] asks).
            return PermissionDecision::Deny {
                decided_by: DecidedBy::Hook {
                    hook: hook.to_owned(),
                },
                reason: format!(
                    "a hook asked for confirmation of \"{}\" and no approver is available",
                    request.tool
                ),
            };
        }
        if request.required <= request.mode {
            PermissionDecision::Allow { decided_by }
        } else {
            PermissionDecision::Deny {
                decided_by,
                reason: format!(
                    "\"{}\" needs {} for this input; the session's mode is {}",
                    request.tool, request.required, request.mode
                ),
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn mode_policy_compares_required_with_mode() {
        let input = serde_json::json!({});
        let session = test_session::TestSession::new(
            "/ws",
            PermissionLevel::WorkspaceWrite,
            SessionRules::default(),
        );
        let mut request = PermissionRequest {
            session_id: "s",
            session: &session,
            batch_id: "b",
            actor: None,
            call_id: "c",
            tool: "write_file",
            input: &input,
            required: PermissionLevel::WorkspaceWrite,
            mode: PermissionLevel::ReadOnly,
            interactive: false,
            hook_asked: None,
        };
        let denied = ModePolicy.decide(&request).await;
        let PermissionDecision::Deny { reason, .. } = denied else {
            panic!("must deny")
        };
        assert!(
            reason.contains("workspace_write") && reason.contains("read_only"),
            "{reason}"
        );
        request.mode = PermissionLevel::WorkspaceWrite;
        assert!(ModePolicy.decide(&request).await.is_allow());
        request.hook_asked = Some("check");
        assert!(!ModePolicy.decide(&request).await.is_allow());
    }
}
