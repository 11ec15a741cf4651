//! The world the permission tests judge calls in (a real workspace on disk with symlinks, a
//! home directory, the real tool registry's names and aliases, the server's rules), and the
//! tests of hook asks, remembered answers and bad rules. The table is in
//! `policy_table_tests.rs`.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};

use serde_json::{Value, json};

use super::*;
use crate::permission::test_session::{TestSession, builtin_tool_names};
use crate::permission::{PermissionLevel, PermissionSession, RuleSet, SessionRules};

pub(super) use PermissionLevel::{DangerFullAccess as Full, ReadOnly as Ro, WorkspaceWrite as Ww};

const SERVER_DENY: &[&str] = &[
    "read_file(./secrets/**)",
    "bash(rm:*)",
    "bash(curl:*)",
    "web_fetch(domain:evil.example)",
    "mcp__danger__*",
    "Write(*.pem)",
    "read_file(~/.ssh/**)",
];
const SERVER_ASK: &[&str] = &[
    "bash(git push:*)",
    "edit_file(./config/**)",
    "mcp__github__create_issue",
];
const SERVER_ALLOW: &[&str] = &[
    "bash(git status:*)",
    "bash(git diff)",
    "bash(ls:*)",
    "bash(npm run test:*)",
    "bash(cargo * --release)",
    "read_file(//etc/hostname)",
    "web_fetch(domain:*.docs.rs)",
    "mcp__github__*",
    "Grep(./src/**)",
];

/// A workspace with secrets, a symlink to them, a symlink out to /etc, and a home directory.
pub(super) struct World {
    _dir: tempfile::TempDir,
    pub(super) workspace: PathBuf,
    pub(super) home: PathBuf,
    tools: ToolNames,
}

pub(super) fn world() -> World {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    let workspace = root.join("ws");
    let home = root.join("home");
    for sub in ["secrets", "public", "src", "config"] {
        std::fs::create_dir_all(workspace.join(sub)).unwrap();
    }
    std::fs::create_dir_all(home.join(".ssh")).unwrap();
    std::fs::write(workspace.join("secrets/key"), "k").unwrap();
    std::fs::write(workspace.join("public/readme"), "r").unwrap();
    std::fs::write(workspace.join("src/main.rs"), "fn main() {}").unwrap();
    std::fs::write(home.join(".ssh/id_rsa"), "x").unwrap();
    symlink(workspace.join("secrets"), workspace.join("link_to_secrets")).unwrap();
    symlink("/etc", workspace.join("public/etc_link")).unwrap();
    World {
        _dir: dir,
        workspace,
        home,
        tools: builtin_tool_names(),
    }
}

pub(super) fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

impl World {
    fn context(&self) -> RuleContext<'_> {
        RuleContext {
            workspace: &self.workspace,
            home: Some(&self.home),
            tools: &self.tools,
        }
    }

    /// A session with the server's rules above and `session` rules (`kind:rule`).
    pub(super) fn session(&self, session: &[&str]) -> TestSession {
        let pick = |kind: &str| -> Vec<String> {
            session
                .iter()
                .filter_map(|entry| entry.strip_prefix(kind))
                .map(str::to_owned)
                .collect()
        };
        let context = self.context();
        let rules = SessionRules {
            server: RuleSet::parse(
                &strings(SERVER_ALLOW),
                &strings(SERVER_DENY),
                &strings(SERVER_ASK),
                RuleSource::Server,
                &context,
            )
            .unwrap(),
            session: RuleSet::parse(
                &pick("allow:"),
                &pick("deny:"),
                &pick("ask:"),
                RuleSource::Session,
                &context,
            )
            .unwrap(),
        };
        // Interactive: the policy is asked with `interactive: true` below.
        TestSession::new(&self.workspace, Ww, rules)
    }
}

/// Who decided, as the table writes it.
fn by(decided_by: &DecidedBy) -> String {
    match decided_by {
        DecidedBy::Mode { .. } => "mode".to_owned(),
        DecidedBy::Rule { rule, source } => format!("{source}:{rule}"),
        DecidedBy::Hook { .. } => "hook".to_owned(),
        other => format!("{other:?}"),
    }
}

fn verdict_text(verdict: &Verdict) -> String {
    match verdict {
        Verdict::Allow(who) => format!("allow {}", by(who)),
        Verdict::Deny(who, _) => format!("deny {}", by(who)),
        Verdict::Ask(who, _) => format!("ask {}", by(who)),
    }
}

pub(super) struct Case {
    pub(super) session: &'static [&'static str],
    pub(super) tool: &'static str,
    pub(super) input: Value,
    pub(super) required: PermissionLevel,
    pub(super) hook_asked: bool,
    pub(super) want: &'static str,
}

pub(super) fn case(
    tool: &'static str,
    input: Value,
    required: PermissionLevel,
    want: &'static str,
) -> Case {
    Case {
        session: &[],
        tool,
        input,
        required,
        hook_asked: false,
        want,
    }
}

pub(super) fn bash(command: &str, want: &'static str) -> Case {
    case("bash", json!({ "command": command }), Full, want)
}

pub(super) fn with(session: &'static [&'static str], case: Case) -> Case {
    Case { session, ..case }
}

pub(super) fn judged(world: &World, case: &Case, session: &TestSession) -> String {
    let request = PermissionRequest {
        session_id: "s",
        session,
        batch_id: "b",
        actor: None,
        call_id: "c",
        tool: case.tool,
        input: &case.input,
        required: case.required,
        mode: session.permission_mode(),
        interactive: true,
        hook_asked: case.hook_asked.then_some("check"),
    };
    let facts = CallFacts::new(case.tool, &case.input, session);
    verdict_text(&judge(&world.tools, Some(&world.home), &request, &facts))
}

pub(super) fn path_input(field: &str, path: impl AsRef<Path>) -> Value {
    json!({ field: path.as_ref().to_str().unwrap() })
}

#[test]
fn a_hook_ask_narrows_but_a_deny_rule_still_wins() {
    let w = world();
    let session = w.session(&[]);
    let hooked = |case: Case| Case {
        hook_asked: true,
        ..case
    };
    for (case, want) in [
        (
            hooked(case(
                "read_file",
                json!({"file_path": "public/readme"}),
                Ro,
                "",
            )),
            "ask hook",
        ),
        (hooked(bash("rm x", "")), "deny server:bash(rm:*)"),
        (hooked(bash("git status", "")), "ask hook"),
    ] {
        assert_eq!(judged(&w, &case, &session), want, "{}", case.input);
    }
}

#[test]
fn remembered_answers_repeat_for_the_same_call_only_and_never_beat_a_deny_rule() {
    let w = world();
    let session = w.session(&[]);
    let remember = |kind, rule: &str| {
        session.remember_rule(RememberedRule {
            kind,
            rule: rule.to_owned(),
            approval_id: "appr_1".to_owned(),
        });
    };
    remember(RuleKind::Allow, "bash(make > log *)");
    remember(RuleKind::Allow, "bash(rm x)");
    let key = w.workspace.join("public/readme");
    remember(
        RuleKind::Deny,
        &format!("read_file(/{})", globset::escape(key.to_str().unwrap())),
    );
    for (case, want) in [
        (
            bash("make  >  log *", ""),
            "allow remembered:bash(make > log *)",
        ),
        (bash("make > log x", ""), "ask mode"),
        (bash("rm x", ""), "deny server:bash(rm:*)"),
        (
            case("read_file", json!({"file_path": "public/readme"}), Ro, ""),
            "deny remembered:read_file(/PATH)",
        ),
    ] {
        let got = judged(&w, &case, &session);
        let want = want.replace(
            "/PATH",
            &format!("/{}", globset::escape(key.to_str().unwrap())),
        );
        assert_eq!(got, want, "{}", case.input);
    }
}

#[test]
fn bad_rules_are_refused_with_the_reason() {
    let w = world();
    let context = w.context();
    for (text, expected) in [
        ("bash(", "must end with"),
        ("bash()", "specifier is empty"),
        ("nosuch", "unknown tool \"nosuch\""),
        ("reed_file", "did you mean \"read_file\""),
        ("todo_write(x)", "takes no specifier"),
        ("mcp__", "mcp__SERVER__TOOL"),
        ("mcp__x__*(y)", "MCP tools take no specifier"),
        ("web_fetch(example.org)", "domain:HOST"),
        ("web_fetch(domain:a b)", "is not a host name"),
        ("read_file(~user/x)", "only \"~/\""),
        ("read_file(../x)", "\"..\" is not allowed"),
        ("bash(:*)", "prefix before \":*\" is empty"),
        ("bad name!", "is not a tool name"),
    ] {
        let err = Rule::parse(text, RuleKind::Deny, RuleSource::Session, &context).unwrap_err();
        let message = err.to_string();
        assert!(
            message.contains(expected) && message.contains(&format!("\"{text}\"")),
            "{text}: {message}"
        );
    }
}
