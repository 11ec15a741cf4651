//! Permission phase: a tool that needs a user cannot run in a non-interactive session; then
//! the policy decides from what the input requires, the rules and the session's mode (the
//! daemon's [`crate::permission::RulePolicy`] may wait here for an approval).

use std::sync::Arc;

use serde_json::json;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::event::{EventBus, EventDraft, EventType};
use crate::permission::{DecidedBy, PermissionDecision, PermissionPolicy, PermissionRequest};
use crate::tool::ErrorKind;

pub struct Permission {
    policy: Arc<dyn PermissionPolicy>,
    events: EventBus,
}

impl Permission {
    pub fn new(policy: Arc<dyn PermissionPolicy>, events: EventBus) -> Permission {
        Permission { policy, events }
    }
}

/// Publishes `permission:decision`. Decisions other than a plain mode allow are worth an event;
/// mode allows are in the audit row and would only double the event volume.
pub(super) fn publish_decision(
    events: &EventBus,
    request: &CallRequest,
    tool: &str,
    decision: &PermissionDecision,
) {
    let by_mode_allow = matches!(
        decision,
        PermissionDecision::Allow {
            decided_by: DecidedBy::Mode { .. }
        }
    );
    if by_mode_allow {
        return;
    }
    let draft = EventDraft::new(
        EventType::PermissionDecision,
        request.ctx.session_id.clone(),
    )
    .batch(request.batch_id.clone())
    .acted_by(request.signals.interrupt.actor().cloned())
    .call(request.ctx.call_id.clone(), tool)
    .data(json!(decision));
    events.publish(draft);
}

impl Phase for Permission {
    async fn run<S: Next>(
        self: Arc<Self>,
        mut request: Box<CallRequest>,
        next: S,
    ) -> Box<CallOutcome> {
        let Ok(tool) = request.tool.clone() else {
            return run_next(next, request).await;
        };
        let spec = tool.spec();
        if spec.requires_user_interaction && !request.ctx.interactive {
            let message = format!(
                "\"{}\" needs a user to interact with, and this session is not interactive",
                spec.name
            );
            return CallOutcome::refused(&request, ErrorKind::RequiresInteraction, &message);
        }
        let session = &request.session;
        let required = spec.required_permission(request.input(), &request.ctx);
        let decision = self
            .policy
            .decide(&PermissionRequest {
                session_id: &request.ctx.session_id,
                session: &**session,
                batch_id: &request.batch_id,
                actor: request.signals.interrupt.actor().map(|actor| &**actor),
                call_id: &request.call.id,
                tool: &spec.name,
                input: request.input(),
                required,
                mode: session.permission_mode(),
                interactive: request.ctx.interactive,
                hook_asked: None,
            })
            .await;
        publish_decision(&self.events, &request, &spec.name, &decision);
        match decision {
            PermissionDecision::Allow { .. } => {
                request.ctx.authorized = required;
                let mut outcome = run_next(next, request).await;
                outcome.decision.get_or_insert(decision);
                outcome
            }
            PermissionDecision::Deny { ref reason, .. } => {
                let mut outcome =
                    CallOutcome::refused(&request, ErrorKind::PermissionDenied, reason);
                outcome.decision = Some(decision);
                outcome
            }
        }
    }
}
