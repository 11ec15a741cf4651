//! Lookup phase: refuses a call the executor already refused before it could start, or whose
//! name resolved to no tool in the batch's pool: `unknown_tool` for a name no tool has (or a
//! deferred tool not loaded yet), `permission_denied` for a registered tool the session's mode
//! or a deny rule kept out of the pool, with that decision recorded for the audit row and
//! published as `permission:decision` like the permission phase's.

use std::sync::Arc;

use super::permission::publish_decision;
use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::event::EventBus;
use crate::permission::{DecidedBy, PermissionDecision, RuleSource};
use crate::registry::{DenySource, PoolExclusion};
use crate::tool::ErrorKind;

pub struct Lookup {
    events: EventBus,
}

impl Lookup {
    pub fn new(events: EventBus) -> Lookup {
        Lookup { events }
    }
}

impl Phase for Lookup {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        if let Some((kind, message)) = &request.refusal {
            return CallOutcome::refused(&request, *kind, message);
        }
        match &request.tool {
            Ok(_) => run_next(next, request).await,
            Err(unknown) => {
                let message = unknown.to_string();
                let Some(exclusion) = &unknown.excluded else {
                    return CallOutcome::refused(&request, ErrorKind::UnknownTool, &message);
                };
                let mut outcome =
                    CallOutcome::refused(&request, ErrorKind::PermissionDenied, &message);
                let decision = PermissionDecision::Deny {
                    decided_by: decided_by(exclusion),
                    reason: message,
                };
                publish_decision(&self.events, &request, &unknown.name, &decision);
                outcome.decision = Some(decision);
                outcome
            }
        }
    }
}

/// Who kept the tool out of the pool, as the audit row records deciders: the session's mode,
/// or a rule with its source (the session's tool filter counts as the session's rule, named
/// by its setting).
fn decided_by(exclusion: &PoolExclusion) -> DecidedBy {
    match exclusion {
        PoolExclusion::Mode {
            mode,
            tool_filter: false,
            ..
        } => DecidedBy::Mode { mode: *mode },
        PoolExclusion::Mode { mode, .. } => DecidedBy::Rule {
            rule: format!("tools.mode: {mode}"),
            source: RuleSource::Session,
        },
        PoolExclusion::Denied { rule, source, .. } => DecidedBy::Rule {
            rule: match source {
                DenySource::ToolFilter => format!("tools.deny: {rule}"),
                DenySource::SessionRule | DenySource::ServerRule => rule.clone(),
            },
            source: match source {
                DenySource::ServerRule => RuleSource::Server,
                DenySource::ToolFilter | DenySource::SessionRule => RuleSource::Session,
            },
        },
    }
}
