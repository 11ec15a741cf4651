//! Lookup phase: refuses a call the executor already refused before it could start, or whose
//! name resolved to no tool in the batch's pool: `unknown_tool` for a name no tool has (or a
//! deferred tool not loaded yet), `permission_denied` for a registered tool the session's mode
//! or a deny rule kept out of the pool, with that decision recorded for the audit row.

use std::sync::Arc;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::permission::{DecidedBy, PermissionDecision, RuleSource};
use crate::registry::PoolExclusion;
use crate::tool::ErrorKind;

pub struct Lookup;

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
                outcome.decision = Some(PermissionDecision::Deny {
                    decided_by: decided_by(exclusion),
                    reason: message,
                });
                outcome
            }
        }
    }
}

/// Who kept the tool out of the pool, as the audit row records deciders.
fn decided_by(exclusion: &PoolExclusion) -> DecidedBy {
    match exclusion {
        PoolExclusion::Mode { mode, .. } => DecidedBy::Mode { mode: *mode },
        PoolExclusion::DenyRule { rule, server, .. } => DecidedBy::Rule {
            rule: rule.clone(),
            source: if *server {
                RuleSource::Server
            } else {
                RuleSource::Session
            },
        },
    }
}
