//! Provided tools as toold [`Tool`]s: [`ProvidedTool`] (a provider's declared tool, named
//! `{provider}__{tool}`) and [`AgentTool`] (the built-in `agent` spec, executed by the provider
//! named `agent` in a child session). Both run through [`ProviderHub::invoke`].
//!
//! The `agent` tool: `{description, prompt, subagent_type?}`, interrupt `cancel`. It needs
//! `read_only` and is read-only and parallel-safe itself: it changes nothing but through its
//! child session, whose every call is checked on its own (mode never wider than the parent's).
//! Its timeout is ten minutes (a sub-agent runs a whole model loop).

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::hub::failure;
use super::{AGENT_PROVIDER, AGENT_TOOL, ProviderHub};
use crate::tool::{
    InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

/// How long a sub-agent may run.
pub const AGENT_TIMEOUT: Duration = Duration::from_secs(600);

/// One tool a provider declared.
pub struct ProvidedTool {
    spec: ToolSpec,
    /// Weak: the hub owns its tools (through its providers).
    hub: Weak<ProviderHub>,
    provider: String,
    /// The provider's own name for the tool.
    raw_name: String,
}

impl ProvidedTool {
    pub(super) fn new(
        spec: ToolSpec,
        hub: Weak<ProviderHub>,
        provider: &str,
        raw_name: &str,
    ) -> ProvidedTool {
        ProvidedTool {
            spec,
            hub,
            provider: provider.to_owned(),
            raw_name: raw_name.to_owned(),
        }
    }
}

#[async_trait]
impl Tool for ProvidedTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(hub) = self.hub.upgrade() else {
            return Ok(failure(&self.provider, "is gone (the daemon is stopping)"));
        };
        Ok(hub
            .invoke(
                &self.provider,
                &self.raw_name,
                input,
                ctx,
                self.spec.timeout,
                None,
            )
            .await)
    }
}

/// The built-in `agent` tool (see the module header).
pub struct AgentTool {
    spec: ToolSpec,
    hub: Weak<ProviderHub>,
}

impl AgentTool {
    pub(super) fn new(hub: Weak<ProviderHub>) -> AgentTool {
        let spec = ToolSpec::builder(AGENT_TOOL)
            .description(
                "Launches a sub-agent that works on a task on its own (in a child session of \
                 this one, with at most this session's permissions) and answers with its \
                 summary. `description`: a few words naming the task; `prompt`: the full \
                 task; `subagent_type`: which kind of sub-agent, if the provider offers several.",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "description": {"type": "string", "description": "A short (3-5 word) description of the task."},
                    "prompt": {"type": "string", "description": "The task for the sub-agent to perform."},
                    "subagent_type": {"type": "string", "description": "The kind of sub-agent to use."}
                },
                "required": ["description", "prompt"],
                "additionalProperties": false
            }))
            .read_only(true)
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .max_result_size_chars(Some(super::declare::DEFAULT_MAX_RESULT_CHARS))
            .timeout(AGENT_TIMEOUT)
            .build()
            // Every field `build` checks is set above.
            .expect("the agent tool's spec is complete");
        AgentTool { spec, hub }
    }
}

#[async_trait]
impl Tool for AgentTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(hub) = self.hub.upgrade() else {
            return Ok(failure(AGENT_PROVIDER, "is gone (the daemon is stopping)"));
        };
        let Some(children) = hub.child_sessions() else {
            return Ok(ToolOutput::failure(
                "the agent tool cannot run: this daemon provides no child sessions",
            ));
        };
        let child = match children.open_child(&ctx.session_id, &ctx.call_id).await {
            Ok(child) => child,
            Err(why) => {
                return Ok(ToolOutput::failure(format!(
                    "the agent tool could not open a child session: {why}"
                )));
            }
        };
        let close = CloseChild {
            children: Some(children),
            child_session_id: child.session_id.clone(),
        };
        let output = hub
            .invoke(
                AGENT_PROVIDER,
                AGENT_TOOL,
                input,
                ctx,
                self.spec.timeout,
                Some(child),
            )
            .await;
        close.close().await;
        Ok(output)
    }
}

/// Closes a child session when the call ends: awaited on the way out, or spawned when the
/// call's future is dropped first.
struct CloseChild {
    children: Option<Arc<dyn super::ChildSessions>>,
    child_session_id: String,
}

impl CloseChild {
    async fn close(mut self) {
        if let Some(children) = self.children.take() {
            children.close_child(&self.child_session_id).await;
        }
    }
}

impl Drop for CloseChild {
    fn drop(&mut self) {
        if let Some(children) = self.children.take() {
            let id = std::mem::take(&mut self.child_session_id);
            if let Ok(runtime) = tokio::runtime::Handle::try_current() {
                runtime.spawn(async move { children.close_child(&id).await });
            }
        }
    }
}
