//! Permission modes and the decision a call needs before it runs.
//!
//! This module owns the ordered modes (`read_only` < `workspace_write` < `danger_full_access`),
//! the [`PermissionPolicy`] trait the dispatcher asks, and [`ModePolicy`], which compares the
//! session's mode with what the call requires. The rule grammar is in [`rules`], matching a
//! rule against a call in [`matcher`], waiting for a person in [`approvals`], and the policy
//! the daemon runs (deny → remembered → hook ask → ask → allow → mode) in [`policy`].

pub mod approvals;
pub mod matcher;
pub mod policy;
pub mod rules;
mod settings;

pub use approvals::{Approvals, Approver, Resolution};
pub use policy::RulePolicy;
pub use rules::{
    RememberedRule, Rule, RuleContext, RuleError, RuleKind, RuleSet, RuleSource, SessionRules,
    ToolNames,
};
pub use settings::PermissionSettings;

use std::fmt;
use std::str::FromStr;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::session::SessionState;

/// A permission mode, and what a call requires. Ordered: a mode grants every level below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionLevel {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl PermissionLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionLevel::ReadOnly => "read_only",
            PermissionLevel::WorkspaceWrite => "workspace_write",
            PermissionLevel::DangerFullAccess => "danger_full_access",
        }
    }
}

impl fmt::Display for PermissionLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown permission mode \"{0}\"; expected read_only, workspace_write or danger_full_access"
)]
pub struct UnknownPermissionMode(pub String);

impl FromStr for PermissionLevel {
    type Err = UnknownPermissionMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "read_only" => Ok(PermissionLevel::ReadOnly),
            "workspace_write" => Ok(PermissionLevel::WorkspaceWrite),
            "danger_full_access" => Ok(PermissionLevel::DangerFullAccess),
            other => Err(UnknownPermissionMode(other.to_owned())),
        }
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
}

/// What a policy is asked about one call.
#[derive(Clone, Debug)]
pub struct PermissionRequest<'a> {
    pub session_id: &'a str,
    /// The session: its workspace, rules and remembered answers.
    pub session: &'a SessionState,
    pub batch_id: &'a str,
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

    #[test]
    fn modes_are_ordered_and_parse() {
        assert!(PermissionLevel::ReadOnly < PermissionLevel::WorkspaceWrite);
        assert!(PermissionLevel::WorkspaceWrite < PermissionLevel::DangerFullAccess);
        for level in [
            PermissionLevel::ReadOnly,
            PermissionLevel::WorkspaceWrite,
            PermissionLevel::DangerFullAccess,
        ] {
            assert_eq!(level.as_str().parse::<PermissionLevel>(), Ok(level));
        }
        let err = "root".parse::<PermissionLevel>().unwrap_err();
        assert!(err.to_string().contains("\"root\""));
    }

    #[tokio::test]
    async fn mode_policy_compares_required_with_mode() {
        let input = serde_json::json!({});
        let session = SessionState::new(crate::session::SessionConfig::new("s", "/ws"));
        let mut request = PermissionRequest {
            session_id: "s",
            session: &session,
            batch_id: "b",
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
