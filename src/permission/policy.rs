//! [`RulePolicy`]: the daemon's permission policy.
//!
//! Order, first match wins: deny rules (the server's, then the session's) → answers remembered
//! from approvals → a hook's ask → ask rules → allow rules → the mode. Because every deny and
//! ask rule is consulted before any allow rule, a session's rules can only narrow the server's:
//! a session allow never reaches a call the server denies or asks about. An ask (from a rule,
//! the mode or a hook) becomes an approval in an interactive session and a denial, with the
//! reason, in a non-interactive one. Every decision says who made it, for the audit row.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use super::approvals::{ApprovalAsk, ApprovalWait, Resolution, WaitOutcome};
use super::matcher::{CallFacts, allowing, matches_broadly};
use super::rules::{
    BASH, PATH_TOOLS, RememberedRule, Rule, RuleContext, RuleKind, RuleSource, ToolNames, WEB_FETCH,
};
use super::{DecidedBy, PermissionDecision, PermissionPolicy, PermissionRequest};

/// What the rules and the mode say before anyone is asked.
enum Verdict {
    Allow(DecidedBy),
    Deny(DecidedBy, String),
    Ask(DecidedBy, String),
}

/// Rules, remembered answers, approvals and the mode.
pub struct RulePolicy {
    approvals: Arc<dyn ApprovalWait>,
    tools: Arc<ToolNames>,
    home: Option<PathBuf>,
    timeout: Duration,
}

impl RulePolicy {
    /// `tools` resolves remembered rules' tool names; `home` is what `~/` means in them.
    pub fn new(
        approvals: Arc<dyn ApprovalWait>,
        tools: Arc<ToolNames>,
        home: Option<PathBuf>,
        timeout: Duration,
    ) -> RulePolicy {
        RulePolicy {
            approvals,
            tools,
            home,
            timeout,
        }
    }
}

/// What the rules and the mode say about a call, before anyone is asked. `tools` and `home`
/// are for compiling remembered rules.
fn judge(
    tools: &ToolNames,
    home: Option<&Path>,
    request: &PermissionRequest<'_>,
    facts: &CallFacts<'_>,
) -> Verdict {
    let rules = request.session.permission_rules();
    let tool = request.tool;
    if let Some(rule) = rules
        .of_kind(RuleKind::Deny)
        .find(|r| matches_broadly(r, facts))
    {
        let reason = format!(
            "\"{tool}\" is denied by the {} rule \"{}\"",
            rule.source, rule.text
        );
        return Verdict::Deny(by_rules(&[rule]), reason);
    }
    if let Some(verdict) = remembered(tools, home, request, facts) {
        return verdict;
    }
    if let Some(hook) = request.hook_asked {
        let reason = format!("hook \"{hook}\" asks for confirmation of \"{tool}\"");
        let by = DecidedBy::Hook {
            hook: hook.to_owned(),
        };
        return Verdict::Ask(by, reason);
    }
    if let Some(rule) = rules
        .of_kind(RuleKind::Ask)
        .find(|r| matches_broadly(r, facts))
    {
        let reason = format!(
            "the {} rule \"{}\" asks for approval of \"{tool}\"",
            rule.source, rule.text
        );
        return Verdict::Ask(by_rules(&[rule]), reason);
    }
    let allow: Vec<&Rule> = rules.of_kind(RuleKind::Allow).collect();
    if let Some(used) = allowing(&allow, facts) {
        return Verdict::Allow(by_rules(&used));
    }
    let by = DecidedBy::Mode { mode: request.mode };
    if request.required <= request.mode {
        return Verdict::Allow(by);
    }
    let reason = format!(
        "\"{tool}\" needs {} for this input; the session's mode is {}",
        request.required, request.mode
    );
    if request.interactive {
        Verdict::Ask(by, reason)
    } else {
        Verdict::Deny(by, reason)
    }
}

/// Answers remembered for the rest of the session: a remembered deny matches broadly, a
/// remembered allow narrowly, like the rules they stand for.
fn remembered(
    tools: &ToolNames,
    home: Option<&Path>,
    request: &PermissionRequest<'_>,
    facts: &CallFacts<'_>,
) -> Option<Verdict> {
    let context = RuleContext {
        workspace: request.session.working_directory(),
        home,
        tools,
    };
    for remembered in request.session.remembered_rules() {
        let rule = match compile_remembered(&remembered, &context) {
            Ok(rule) => rule,
            Err(err) => {
                tracing::warn!(session = request.session_id, error = %err, "a remembered rule no longer parses; ignoring it");
                continue;
            }
        };
        let by = by_rules(&[&rule]);
        match rule.kind {
            RuleKind::Deny if matches_broadly(&rule, facts) => {
                let reason = format!(
                    "\"{}\" is denied by an answer remembered from approval \"{}\"",
                    request.tool, remembered.approval_id
                );
                return Some(Verdict::Deny(by, reason));
            }
            RuleKind::Allow if allowing(&[&rule], facts).is_some() => {
                return Some(Verdict::Allow(by));
            }
            _ => {}
        }
    }
    None
}

impl RulePolicy {
    /// An ask: an approval in an interactive session, a denial otherwise.
    async fn ask(
        &self,
        request: &PermissionRequest<'_>,
        asked_by: DecidedBy,
        reason: String,
    ) -> PermissionDecision {
        if !request.interactive {
            return PermissionDecision::Deny {
                decided_by: asked_by,
                reason: format!(
                    "{reason}; the session is not interactive, so nobody can approve the call"
                ),
            };
        }
        let ask = ApprovalAsk {
            session_id: request.session_id,
            batch_id: request.batch_id,
            actor: request.actor,
            call_id: request.call_id,
            tool: request.tool,
            input: request.input,
            reason: &reason,
        };
        let close = request.session.close_token();
        let interrupt = request.session.batch_interrupt_token(request.batch_id);
        let cancelled = Box::pin(async move {
            tokio::select! {
                () = close.cancelled() => {}
                () = interrupt.cancelled() => {}
            }
        });
        let (id, outcome) = self.approvals.wait_for(&ask, self.timeout, cancelled).await;
        match outcome {
            WaitOutcome::Resolved(resolution) => {
                if resolution.remember {
                    remember(request, &resolution, &id);
                }
                answered(resolution, id, asked_by)
            }
            WaitOutcome::TimedOut => PermissionDecision::Deny {
                reason: format!(
                    "nobody resolved approval \"{id}\" within {} ms ({reason})",
                    self.timeout.as_millis()
                ),
                decided_by: DecidedBy::Timeout {
                    approval_id: id,
                    timeout_ms: u64::try_from(self.timeout.as_millis()).unwrap_or(u64::MAX),
                    asked_by: Box::new(asked_by),
                },
            },
            WaitOutcome::Cancelled => PermissionDecision::Deny {
                decided_by: asked_by,
                reason: format!("the call was cancelled while approval \"{id}\" waited"),
            },
            WaitOutcome::Failed(problem) => PermissionDecision::Deny {
                decided_by: asked_by,
                reason: format!("approval \"{id}\": {problem}"),
            },
        }
    }
}

#[async_trait]
impl PermissionPolicy for RulePolicy {
    async fn decide(&self, request: &PermissionRequest<'_>) -> PermissionDecision {
        let facts = CallFacts::new(request.tool, request.input, request.session);
        match judge(&self.tools, self.home.as_deref(), request, &facts) {
            Verdict::Allow(decided_by) => PermissionDecision::Allow { decided_by },
            Verdict::Deny(decided_by, reason) => PermissionDecision::Deny { decided_by, reason },
            Verdict::Ask(asked_by, reason) => self.ask(request, asked_by, reason).await,
        }
    }
}

/// Who decided, for one or several rules (the simple commands of a bash line may each be
/// allowed by a different rule): their texts joined, and the session as the source if any
/// of them is the session's.
fn by_rules(rules: &[&Rule]) -> DecidedBy {
    let texts: Vec<&str> = rules.iter().map(|rule| rule.text.as_str()).collect();
    let source = rules
        .iter()
        .map(|rule| rule.source)
        .find(|source| *source != RuleSource::Server)
        .unwrap_or(RuleSource::Server);
    DecidedBy::Rule {
        rule: texts.join(", "),
        source,
    }
}

fn answered(resolution: Resolution, id: String, asked_by: DecidedBy) -> PermissionDecision {
    let approver = resolution.approver.to_string();
    let decided_by = DecidedBy::Approver {
        approver: resolution.approver.door.clone(),
        token: resolution.approver.token_id.clone(),
        approval_id: id.clone(),
        asked_by: Box::new(asked_by),
    };
    if resolution.allow {
        return PermissionDecision::Allow { decided_by };
    }
    let because = resolution
        .reason
        .map(|reason| format!(": {reason}"))
        .unwrap_or_default();
    PermissionDecision::Deny {
        decided_by,
        reason: format!("approval \"{id}\" was denied by {approver}{because}"),
    }
}

/// Keeps the answer for the same call: the same bash line, the same resolved path, the same
/// host, or (for tools without a specifier) the tool. Nothing is kept when the call cannot be
/// named that precisely (a path that does not resolve).
fn remember(request: &PermissionRequest<'_>, resolution: &Resolution, approval_id: &str) {
    let Some(rule) = remembered_text(request) else {
        return;
    };
    let kind = if resolution.allow {
        RuleKind::Allow
    } else {
        RuleKind::Deny
    };
    request.session.remember_rule(RememberedRule {
        kind,
        rule,
        approval_id: approval_id.to_owned(),
    });
}

fn remembered_text(request: &PermissionRequest<'_>) -> Option<String> {
    let tool = request.tool;
    if tool == BASH {
        let command = request.input.get("command")?.as_str()?;
        return Some(format!("{BASH}({})", normalise(command)));
    }
    if tool == WEB_FETCH {
        let host = super::matcher::web_fetch_host(request.input)?;
        return Some(format!("{WEB_FETCH}(domain:{})", host.to_ascii_lowercase()));
    }
    if let Some((_, field)) = PATH_TOOLS.iter().find(|(name, _)| *name == tool) {
        let raw = request.input.get(*field)?.as_str()?;
        let workspace = request.session.working_directory();
        let resolved = crate::tool::paths::resolve(raw, field, workspace, workspace).ok()?;
        let path = resolved.path.to_str()?;
        return Some(format!("{tool}(/{})", globset::escape(path)));
    }
    Some(tool.to_owned())
}

fn normalise(command: &str) -> String {
    command.split_whitespace().collect::<Vec<_>>().join(" ")
}

/// A remembered rule compiled for this session. A bash answer is the exact line (its text
/// may hold `*` or end in `:*`, which must not become a pattern).
fn compile_remembered(
    remembered: &RememberedRule,
    context: &RuleContext<'_>,
) -> Result<Rule, super::RuleError> {
    let exact_line = remembered
        .rule
        .strip_prefix("bash(")
        .and_then(|rest| rest.strip_suffix(')'));
    match exact_line {
        Some(line) => Ok(Rule::exact_command(
            &remembered.rule,
            line,
            remembered.kind,
            RuleSource::Remembered,
        )),
        None => Rule::parse(
            &remembered.rule,
            remembered.kind,
            RuleSource::Remembered,
            context,
        ),
    }
}

#[cfg(test)]
#[path = "policy_tests.rs"]
mod tests;

#[cfg(test)]
#[path = "policy_table_tests.rs"]
mod table_tests;
