//! Hook phase: pre-tool hooks before execution, post-tool hooks after it.
//!
//! A hook's deny, or its ask that no approver grants, blocks the call (kind `hook_blocked`),
//! and the call's decision is then a deny decided by that hook: published as
//! `permission:decision` and in the audit row, as a rule's deny is.
//! An updated input must pass the schema and the tool's own validation again, must not turn a
//! call admitted to a parallel group into one that is unsafe there, and is re-checked by the
//! permission policy, so a hook can narrow what a call may do but never widen it. Additional
//! context from either side travels in the outcome; the offload phase appends it after the
//! preview is made, so the model always sees it.

use std::sync::Arc;

use serde_json::{Value, json};

use super::permission::publish_decision;
use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::event::EventBus;
use crate::hooks::{HookChain, HookEvent, HookEventName, PreChainOutcome};
use crate::permission::{DecidedBy, PermissionDecision, PermissionPolicy, PermissionRequest};
use crate::registry::RegisteredTool;
use crate::tool::{CallInput, ErrorKind};

pub struct Hooks {
    chain: HookChain,
    policy: Arc<dyn PermissionPolicy>,
    events: EventBus,
}

/// What the pre-tool hooks leave for the rest of the call.
struct Proceed {
    additional_context: Vec<String>,
    /// The permission decision taken again after a hook changed the input or asked.
    decision: Option<PermissionDecision>,
}

impl Hooks {
    pub fn new(chain: HookChain, policy: Arc<dyn PermissionPolicy>, events: EventBus) -> Hooks {
        Hooks {
            chain,
            policy,
            events,
        }
    }

    fn event(request: &CallRequest, tool: &str, name: HookEventName) -> HookEvent {
        HookEvent {
            session_id: request.ctx.session_id.to_string(),
            cwd: request.ctx.working_directory.to_path_buf(),
            permission_mode: request.ctx.session.permission_mode(),
            hook_event_name: name,
            tool_name: tool.to_owned(),
            tool_input: request.input().clone(),
            tool_use_id: request.call.id.clone(),
            tool_response: None,
        }
    }

    /// Runs the pre-tool chain and everything an updated input must pass again.
    async fn pre(
        &self,
        request: &mut CallRequest,
        tool: &RegisteredTool,
    ) -> Result<Proceed, Box<CallOutcome>> {
        let event = Self::event(request, tool.name(), HookEventName::PreToolUse);
        let validate = |input: &Value| tool.validate_input(input);
        let (input, input_updated, additional_context, asked_by) =
            match self.chain.run_pre(event, &validate).await {
                PreChainOutcome::Blocked { hook, reason } => {
                    let message = format!("hook \"{hook}\" blocked the call: {reason}");
                    return Err(self.blocked(request, tool.name(), hook, message));
                }
                PreChainOutcome::Proceed {
                    input,
                    input_updated,
                    additional_context,
                    asked_by,
                } => (input, input_updated, additional_context, asked_by),
            };
        if input_updated {
            self.check_updated_input(request, tool, &input).await?;
            request.call.input = CallInput::Json(input);
        }
        let mut decision = None;
        if input_updated || asked_by.is_some() {
            let rechecked = self.recheck(request, tool, asked_by.as_deref()).await;
            if let PermissionDecision::Deny { reason, .. } = &rechecked {
                let kind = match asked_by {
                    Some(_) => ErrorKind::HookBlocked,
                    None => ErrorKind::PermissionDenied,
                };
                let mut outcome = CallOutcome::refused(request, kind, reason);
                outcome.decision = Some(rechecked);
                return Err(outcome);
            }
            decision = Some(rechecked);
        }
        Ok(Proceed {
            additional_context,
            decision,
        })
    }

    /// A call a hook refused: a deny decided by that hook, published and audited as any
    /// other decision (the permission phase's allow, taken before the hooks ran, is replaced).
    fn blocked(
        &self,
        request: &CallRequest,
        tool: &str,
        hook: String,
        message: String,
    ) -> Box<CallOutcome> {
        let mut outcome = CallOutcome::refused(request, ErrorKind::HookBlocked, &message);
        let decision = PermissionDecision::Deny {
            decided_by: DecidedBy::Hook { hook },
            reason: message,
        };
        publish_decision(&self.events, request, tool, &decision);
        outcome.decision = Some(decision);
        outcome
    }

    /// The tool's own validation, and the parallel group's safety, for a hook's new input.
    async fn check_updated_input(
        &self,
        request: &CallRequest,
        tool: &RegisteredTool,
        input: &Value,
    ) -> Result<(), Box<CallOutcome>> {
        if let Err(err) = tool.tool.validate_input(input, &request.ctx).await {
            let message = format!("a hook's updated input is refused: {}", err.message());
            return Err(CallOutcome::refused(
                request,
                ErrorKind::HookBlocked,
                &message,
            ));
        }
        if request.admitted_safe
            && !tool
                .spec()
                .is_concurrency_safe(input, &*request.ctx.session)
        {
            let message = "a hook's updated input is not safe to run in parallel, and the call was admitted to a parallel group";
            return Err(CallOutcome::refused(
                request,
                ErrorKind::HookBlocked,
                message,
            ));
        }
        Ok(())
    }

    /// Asks the policy about the call as the hooks left it; on allow, the call is authorised
    /// at what the updated input requires.
    async fn recheck(
        &self,
        request: &mut CallRequest,
        tool: &RegisteredTool,
        asked_by: Option<&str>,
    ) -> PermissionDecision {
        let required = tool
            .spec()
            .required_permission(request.input(), &request.ctx);
        let decision = self
            .policy
            .decide(&PermissionRequest {
                session_id: &request.ctx.session_id,
                session: &*request.session,
                batch_id: &request.batch_id,
                actor: request.signals.interrupt.actor().map(|actor| &**actor),
                call_id: &request.call.id,
                tool: tool.name(),
                input: request.input(),
                required,
                mode: request.session.permission_mode(),
                interactive: request.ctx.interactive,
                hook_asked: asked_by,
            })
            .await;
        publish_decision(&self.events, request, tool.name(), &decision);
        if decision.is_allow() {
            request.ctx.authorized = required;
        }
        decision
    }

    /// Runs the post-tool chain on an executed call's result.
    async fn post(&self, mut event: HookEvent, outcome: &CallOutcome) -> Vec<String> {
        if outcome.result.is_error {
            event.hook_event_name = HookEventName::PostToolUseFailure;
        }
        event.tool_response = Some(json!({
            "output": outcome.result.output,
            "is_error": outcome.result.is_error,
        }));
        self.chain.run_post(event).await
    }
}

impl Phase for Hooks {
    async fn run<S: Next>(
        self: Arc<Self>,
        mut request: Box<CallRequest>,
        next: S,
    ) -> Box<CallOutcome> {
        let Ok(tool) = request.tool.clone() else {
            return run_next(next, request).await;
        };
        if self.chain.is_empty() {
            return run_next(next, request).await;
        }
        let proceed = match self.pre(&mut request, &tool).await {
            Ok(proceed) => proceed,
            Err(refused) => return refused,
        };
        let post_event = Self::event(&request, tool.name(), HookEventName::PostToolUse);
        let mut outcome = run_next(next, request).await;
        outcome.additional_context = proceed.additional_context;
        if outcome.executed {
            let post_context = self.post(post_event, &outcome).await;
            outcome.additional_context.extend(post_context);
        }
        if proceed.decision.is_some() {
            outcome.decision = proceed.decision;
        }
        outcome
    }
}
