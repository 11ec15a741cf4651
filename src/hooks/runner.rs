//! [`ConfiguredHook`]: one hook from the settings as a [`ToolHook`], and what its answer
//! means (the common convention, DESIGN §5).
//!
//! A hook answers in one of three ways ([`HookReply`]): it *answered* (exit 0 / HTTP 2xx) with
//! optional JSON on stdout (`hookSpecificOutput.permissionDecision` deny|ask|allow,
//! `permissionDecisionReason`, `updatedInput`, `additionalContext`; the older top-level
//! `decision: "block"` with `reason` counts as deny); it *blocked* (exit 2, stderr the reason);
//! or it *failed* (another exit, a crash, a timeout, output over the cap, JSON that does not
//! fit the convention). Stdout that is not a JSON object is ignored. `allow` never widens
//! anything: it is the same as saying nothing, so deny rules and the mode still decide.
//!
//! After a call (post hooks) nothing can be undone: a block or, with `on_failure = "block"`,
//! a failure is told to the model as additional context instead.

use std::ffi::OsString;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use regex::Regex;
use serde::Deserialize;
use serde_json::Value;
use tracing::Instrument;
use tracing::field::Empty;

use super::command::CommandHook;
use super::config::{HookConfig, HookConfigError, HookSettings, OnFailure};
use super::reply::HookReply;
use super::url_hook::HttpHook;
use super::{
    HookChain, HookEvent, HookEventName, PostToolUseOutcome, PreToolUseOutcome, PreToolVerdict,
    ToolHook,
};
use crate::tool::trace;

enum Transport {
    Command(CommandHook),
    Http(HttpHook),
}

/// One configured hook.
pub struct ConfiguredHook {
    event: HookEventName,
    /// The command or URL.
    name: String,
    matcher: Option<Regex>,
    transport: Transport,
    timeout: Duration,
    on_failure: OnFailure,
}

/// The convention's JSON answer.
#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct Answer {
    decision: Option<String>,
    reason: Option<String>,
    hook_specific_output: Option<SpecificOutput>,
}

#[derive(Debug, Default, Deserialize)]
#[serde(rename_all = "camelCase")]
struct SpecificOutput {
    permission_decision: Option<String>,
    permission_decision_reason: Option<String>,
    updated_input: Option<Value>,
    additional_context: Option<String>,
}

impl HookChain {
    /// The chain the settings describe. `env` is what command hooks see (see
    /// [`super::command::clean_environment`]).
    pub fn from_settings(
        settings: &HookSettings,
        env: Vec<(OsString, OsString)>,
    ) -> Result<HookChain, HookConfigError> {
        settings.check()?;
        let env = Arc::new(env);
        // Built only when an HTTP hook exists; building it cannot fail short of a broken TLS
        // setup, which is then a start-up error naming the first HTTP hook.
        let mut client = None;
        let mut hooks: Vec<Arc<dyn ToolHook>> = Vec::new();
        let names = [
            HookEventName::PreToolUse,
            HookEventName::PostToolUse,
            HookEventName::PostToolUseFailure,
        ];
        for ((event, configs), name) in settings.events().into_iter().zip(names) {
            for (index, config) in configs.iter().enumerate() {
                let transport = match (&config.command, &config.url) {
                    (Some(command), _) if !command.trim().is_empty() => {
                        Transport::Command(CommandHook::new(command.clone(), env.clone()))
                    }
                    (_, Some(url)) => {
                        let client = match &client {
                            Some(client) => client,
                            None => client.insert(HttpHook::client().map_err(|_| {
                                HookConfigError::Url {
                                    event,
                                    index,
                                    url: url.clone(),
                                }
                            })?),
                        };
                        Transport::Http(HttpHook::new(url.clone(), client.clone()))
                    }
                    _ => return Err(HookConfigError::CommandOrUrl { event, index }),
                };
                hooks.push(Arc::new(ConfiguredHook::new(name, config, transport)));
            }
        }
        Ok(HookChain::new(hooks))
    }
}

impl ConfiguredHook {
    fn new(event: HookEventName, config: &HookConfig, transport: Transport) -> ConfiguredHook {
        ConfiguredHook {
            event,
            name: config
                .command
                .clone()
                .or_else(|| config.url.clone())
                .unwrap_or_default(),
            // Checked by `HookSettings::check` before any hook is built.
            matcher: config.matcher_regex().ok().flatten(),
            transport,
            timeout: Duration::from_millis(config.timeout_ms),
            on_failure: config.on_failure,
        }
    }

    /// Runs the hook in a span of its own (a child of the call's `execute_tool`), which is
    /// the context the hook receives.
    async fn run(&self, event: &HookEvent) -> HookReply {
        let input = match serde_json::to_vec(event) {
            Ok(input) => input,
            Err(err) => return HookReply::Failed(format!("encoding its input: {err}")),
        };
        let span = trace::child(tracing::info_span!(
            target: trace::TARGET,
            "hook",
            otel.name = %format_args!("hook {:?}", event.hook_event_name),
            toold.hook.event = ?event.hook_event_name,
            toold.hook.name = %self.name,
            toold.hook.outcome = Empty,
            otel.status_description = Empty,
        ));
        let reply = async {
            match &self.transport {
                Transport::Command(command) => command.run(&input, &event.cwd, self.timeout).await,
                Transport::Http(http) => http.run(&input, self.timeout).await,
            }
        }
        .instrument(span.clone())
        .await;
        let outcome = match &reply {
            HookReply::Answered(_) => "answered",
            HookReply::Blocked(_) => "blocked",
            HookReply::Failed(why) => {
                span.record("otel.status_description", why.as_str());
                "failed"
            }
        };
        span.record("toold.hook.outcome", outcome);
        reply
    }

    /// A failure's effect: `Some(text)` when `on_failure = "block"`, else logged and `None`.
    fn failure(&self, why: &str) -> Option<String> {
        match self.on_failure {
            OnFailure::Block => Some(format!(
                "the hook failed ({why}) and its on_failure is \"block\""
            )),
            OnFailure::Allow => {
                tracing::warn!(hook = %self.name, %why, "hook failed; going on (on_failure = allow)");
                None
            }
        }
    }
}

/// Parses an answer; empty or non-JSON-object output says nothing.
fn parse_answer(stdout: &[u8]) -> Result<Answer, String> {
    let text = String::from_utf8_lossy(stdout);
    let text = text.trim();
    if !text.starts_with('{') {
        return Ok(Answer::default());
    }
    serde_json::from_str(text).map_err(|err| format!("its JSON answer is malformed: {err}"))
}

fn pre_outcome(answer: Answer) -> Result<PreToolUseOutcome, String> {
    let specific = answer.hook_specific_output.unwrap_or_default();
    let reason = specific
        .permission_decision_reason
        .or(answer.reason)
        .unwrap_or_else(|| "no reason given".to_owned());
    let verdict = match (
        specific.permission_decision.as_deref(),
        answer.decision.as_deref(),
    ) {
        (Some("deny"), _) | (None, Some("block")) => PreToolVerdict::Deny { reason },
        (Some("ask"), _) => PreToolVerdict::Ask { reason },
        (Some("allow") | None, _) => PreToolVerdict::Continue,
        (Some(other), _) => {
            return Err(format!(
                "permissionDecision \"{other}\" is not allow, deny or ask"
            ));
        }
    };
    Ok(PreToolUseOutcome {
        verdict,
        updated_input: specific.updated_input,
        additional_context: specific.additional_context,
    })
}

#[async_trait]
impl ToolHook for ConfiguredHook {
    fn name(&self) -> &str {
        &self.name
    }

    fn matches(&self, tool_name: &str) -> bool {
        self.matcher.as_ref().is_none_or(|m| m.is_match(tool_name))
    }

    async fn pre_tool_use(&self, event: &HookEvent) -> PreToolUseOutcome {
        if self.event != HookEventName::PreToolUse {
            return PreToolUseOutcome::default();
        }
        let answered = match self.run(event).await {
            HookReply::Blocked(reason) => Ok(PreToolUseOutcome {
                verdict: PreToolVerdict::Deny { reason },
                ..PreToolUseOutcome::default()
            }),
            HookReply::Failed(why) => Err(why),
            HookReply::Answered(stdout) => parse_answer(&stdout).and_then(pre_outcome),
        };
        answered.unwrap_or_else(|why| PreToolUseOutcome {
            verdict: self
                .failure(&why)
                .map_or(PreToolVerdict::Continue, |reason| PreToolVerdict::Deny {
                    reason,
                }),
            ..PreToolUseOutcome::default()
        })
    }

    async fn post_tool_use(&self, event: &HookEvent) -> PostToolUseOutcome {
        if self.event != event.hook_event_name {
            return PostToolUseOutcome::default();
        }
        let context = match self.run(event).await {
            HookReply::Blocked(reason) => Some(reason),
            HookReply::Failed(why) => self.failure(&why),
            HookReply::Answered(stdout) => match parse_answer(&stdout) {
                Err(why) => self.failure(&why),
                Ok(answer) => {
                    let specific = answer.hook_specific_output.unwrap_or_default();
                    let blocked = (answer.decision.as_deref() == Some("block"))
                        .then_some(answer.reason)
                        .flatten();
                    match (specific.additional_context, blocked) {
                        (Some(context), Some(reason)) => Some(format!("{reason}\n{context}")),
                        (context, reason) => context.or(reason),
                    }
                }
            },
        };
        PostToolUseOutcome {
            additional_context: context,
        }
    }
}
