//! Hook phase: pre-tool hooks before execution, post-tool hooks after it.
//!
//! A hook's deny, or its ask that no approver grants, blocks the call (kind `hook_blocked`).
//! An updated input must pass the schema again and is re-checked by the permission policy, so
//! a hook can narrow what a call may do but never widen it. Additional context from either
//! side is appended to the output the model sees.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::hooks::{HookChain, HookEvent, HookEventName, PreChainOutcome};
use crate::permission::{PermissionDecision, PermissionPolicy, PermissionRequest};
use crate::registry::RegisteredTool;
use crate::tool::{CallInput, ErrorKind};

pub struct Hooks {
    chain: HookChain,
    policy: Arc<dyn PermissionPolicy>,
}

impl Hooks {
    pub fn new(chain: HookChain, policy: Arc<dyn PermissionPolicy>) -> Hooks {
        Hooks { chain, policy }
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

    /// Asks the policy about the call as the hooks left it.
    async fn recheck(
        &self,
        request: &CallRequest,
        tool: &RegisteredTool,
        asked_by: Option<&str>,
    ) -> PermissionDecision {
        self.policy
            .decide(&PermissionRequest {
                session_id: &request.ctx.session_id,
                call_id: &request.call.id,
                tool: tool.name(),
                input: request.input(),
                required: tool
                    .spec()
                    .required_permission(request.input(), &request.ctx.session),
                mode: request.ctx.session.permission_mode(),
                interactive: request.ctx.interactive,
                hook_asked: asked_by,
            })
            .await
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
        let event = Self::event(&request, tool.name(), HookEventName::PreToolUse);
        let validate = |input: &Value| tool.validate_input(input);
        let (input, input_updated, mut context, asked_by) =
            match self.chain.run_pre(event, &validate).await {
                PreChainOutcome::Blocked { hook, reason } => {
                    let message = format!("hook \"{hook}\" blocked the call: {reason}");
                    return CallOutcome::refused(&request, ErrorKind::HookBlocked, &message);
                }
                PreChainOutcome::Proceed {
                    input,
                    input_updated,
                    additional_context,
                    asked_by,
                } => (input, input_updated, additional_context, asked_by),
            };
        request.call.input = CallInput::Json(input);
        if input_updated || asked_by.is_some() {
            let decision = self.recheck(&request, &tool, asked_by.as_deref()).await;
            if let PermissionDecision::Deny { reason, .. } = &decision {
                let kind = if asked_by.is_some() {
                    ErrorKind::HookBlocked
                } else {
                    ErrorKind::PermissionDenied
                };
                let mut outcome = CallOutcome::refused(&request, kind, reason);
                outcome.decision = Some(decision);
                return outcome;
            }
        }

        let mut post_event = Self::event(&request, tool.name(), HookEventName::PostToolUse);
        let mut outcome = run_next(next, request).await;
        if outcome.executed {
            if outcome.result.is_error {
                post_event.hook_event_name = HookEventName::PostToolUseFailure;
            }
            post_event.tool_response = Some(json!({
                "output": outcome.result.output,
                "is_error": outcome.result.is_error,
            }));
            context.extend(self.chain.run_post(post_event).await);
        }
        for extra in context {
            outcome.result.output.push_str("\n\n");
            outcome.result.output.push_str(&extra);
        }
        outcome
    }
}
