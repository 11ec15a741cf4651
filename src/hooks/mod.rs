//! Pre- and post-tool hooks: the trait a hook implements and the chain that composes them.
//!
//! Hooks run in configuration order; each sees the input as updated by the previous one; a
//! deny stops the chain. This module knows the hook protocol's data (the JSON a command hook
//! reads on stdin); [`config`] is the `[hooks]` settings, [`runner`] turns each configured
//! hook into a [`ToolHook`] and reads its answer, [`command`] and [`url_hook`] run it, and
//! [`reply`] is what a run leaves for the runner to read (and the output cap).
//! Deliberately absent: what an `ask` means (the permission policy decides) and hooks set by
//! a session (only the server's settings configure hooks).

pub mod command;
pub mod config;
mod reply;
mod runner;
mod url_hook;

pub use command::{KEPT_VARIABLES, clean_environment};
pub use config::{HookConfig, HookConfigError, HookSettings, OnFailure};
pub use reply::MAX_HOOK_OUTPUT_BYTES;
pub use runner::ConfiguredHook;

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use serde::Serialize;
use serde_json::Value;

use crate::tool::PermissionLevel;

/// The hook event names of the common convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub enum HookEventName {
    PreToolUse,
    PostToolUse,
    PostToolUseFailure,
}

/// What a hook is told about a call; serialises to the JSON a command hook reads on stdin.
#[derive(Clone, Debug, Serialize)]
pub struct HookEvent {
    pub session_id: String,
    pub cwd: PathBuf,
    pub permission_mode: PermissionLevel,
    pub hook_event_name: HookEventName,
    pub tool_name: String,
    pub tool_input: Value,
    pub tool_use_id: String,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub tool_response: Option<Value>,
}

/// A pre-tool hook's verdict.
#[derive(Clone, Debug, Default, PartialEq)]
pub enum PreToolVerdict {
    #[default]
    Continue,
    /// The call needs confirmation; the permission policy decides what that means.
    Ask {
        reason: String,
    },
    Deny {
        reason: String,
    },
}

/// What a pre-tool hook returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PreToolUseOutcome {
    pub verdict: PreToolVerdict,
    /// Replaces the call's input; validated against the schema again.
    pub updated_input: Option<Value>,
    /// Appended to the output the model sees.
    pub additional_context: Option<String>,
}

/// What a post-tool hook returns.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct PostToolUseOutcome {
    pub additional_context: Option<String>,
}

/// One configured hook.
#[async_trait]
pub trait ToolHook: Send + Sync + 'static {
    /// A name for audit rows and error messages (the command or URL).
    fn name(&self) -> &str;

    /// Whether the hook applies to this tool (its matcher).
    fn matches(&self, tool_name: &str) -> bool;

    async fn pre_tool_use(&self, _event: &HookEvent) -> PreToolUseOutcome {
        PreToolUseOutcome::default()
    }

    /// Runs after a successful call (`PostToolUse`) or a failed one (`PostToolUseFailure`).
    async fn post_tool_use(&self, _event: &HookEvent) -> PostToolUseOutcome {
        PostToolUseOutcome::default()
    }
}

/// How the pre-tool part of a chain ended.
#[derive(Clone, Debug, PartialEq)]
pub enum PreChainOutcome {
    Proceed {
        /// The input after every hook's update.
        input: Value,
        /// Whether any hook changed the input (it must then pass the schema again).
        input_updated: bool,
        additional_context: Vec<String>,
        /// The first hook that asked for confirmation, if any.
        asked_by: Option<String>,
    },
    Blocked {
        hook: String,
        reason: String,
    },
}

/// The hooks configured on the server, in order.
#[derive(Clone, Default)]
pub struct HookChain {
    hooks: Vec<Arc<dyn ToolHook>>,
}

impl HookChain {
    pub fn new(hooks: Vec<Arc<dyn ToolHook>>) -> HookChain {
        HookChain { hooks }
    }

    pub fn is_empty(&self) -> bool {
        self.hooks.is_empty()
    }

    /// The same chain with each hook replaced by `wrap(hook)` (the server wraps each in one
    /// that counts its runs).
    pub fn map(self, wrap: impl Fn(Arc<dyn ToolHook>) -> Arc<dyn ToolHook>) -> HookChain {
        HookChain {
            hooks: self.hooks.into_iter().map(wrap).collect(),
        }
    }

    /// Runs the matching pre-tool hooks in order. `validate` checks an updated input against
    /// the tool's schema; an update that fails it blocks the call.
    pub async fn run_pre(
        &self,
        mut event: HookEvent,
        validate: &(dyn Fn(&Value) -> Result<(), String> + Send + Sync),
    ) -> PreChainOutcome {
        let mut additional_context = Vec::new();
        let mut asked_by = None;
        let mut input_updated = false;
        for hook in self.hooks.iter().filter(|h| h.matches(&event.tool_name)) {
            let outcome = hook.pre_tool_use(&event).await;
            if let PreToolVerdict::Deny { reason } = outcome.verdict {
                return PreChainOutcome::Blocked {
                    hook: hook.name().to_owned(),
                    reason,
                };
            }
            if let Some(updated) = outcome.updated_input {
                if let Err(problem) = validate(&updated) {
                    return PreChainOutcome::Blocked {
                        hook: hook.name().to_owned(),
                        reason: format!("the hook's updated input fails the schema: {problem}"),
                    };
                }
                event.tool_input = updated;
                input_updated = true;
            }
            if let PreToolVerdict::Ask { .. } = outcome.verdict {
                asked_by.get_or_insert_with(|| hook.name().to_owned());
            }
            additional_context.extend(outcome.additional_context);
        }
        PreChainOutcome::Proceed {
            input: event.tool_input,
            input_updated,
            additional_context,
            asked_by,
        }
    }

    /// Runs the matching post-tool hooks in order and collects their additional context.
    pub async fn run_post(&self, event: HookEvent) -> Vec<String> {
        let mut additional_context = Vec::new();
        for hook in self.hooks.iter().filter(|h| h.matches(&event.tool_name)) {
            additional_context.extend(hook.post_tool_use(&event).await.additional_context);
        }
        additional_context
    }
}
