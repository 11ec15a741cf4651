//! The permission table: rules from the server and the session against calls, with a real
//! workspace on disk (symlinks, `..`), the real tool registry's names and aliases, and the
//! real bash parser. Each row names the verdict and who gives it.

use std::os::unix::fs::symlink;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};

use super::*;
use crate::permission::{PermissionLevel, RuleSet, SessionRules};
use crate::session::{SessionConfig, SessionState};

use PermissionLevel::{DangerFullAccess as Full, ReadOnly as Ro, WorkspaceWrite as Ww};

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
struct World {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    home: PathBuf,
    tools: ToolNames,
}

fn world() -> World {
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
    let registry = crate::tools::builtin_registry(&crate::tools::ToolDeps {
        results: Arc::new(crate::dispatch::InMemoryResultStore::default()),
        web_fetch: Default::default(),
        skills: Default::default(),
        shells: Arc::default(),
    })
    .unwrap();
    World {
        _dir: dir,
        workspace,
        home,
        tools: crate::service::tool_names(&registry),
    }
}

fn strings(texts: &[&str]) -> Vec<String> {
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
    fn session(&self, session: &[&str]) -> SessionState {
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
        let mut config = SessionConfig::new("s", &self.workspace)
            .permission_mode(Ww)
            .interactive(true);
        config.rules = Arc::new(rules);
        SessionState::new(config)
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

struct Case {
    session: &'static [&'static str],
    tool: &'static str,
    input: Value,
    required: PermissionLevel,
    hook_asked: bool,
    want: &'static str,
}

fn case(tool: &'static str, input: Value, required: PermissionLevel, want: &'static str) -> Case {
    Case {
        session: &[],
        tool,
        input,
        required,
        hook_asked: false,
        want,
    }
}

fn bash(command: &str, want: &'static str) -> Case {
    case("bash", json!({ "command": command }), Full, want)
}

fn with(session: &'static [&'static str], case: Case) -> Case {
    Case { session, ..case }
}

fn judged(world: &World, case: &Case, session: &SessionState) -> String {
    let request = PermissionRequest {
        session_id: "s",
        session,
        batch_id: "b",
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

fn path_input(field: &str, path: impl AsRef<Path>) -> Value {
    json!({ field: path.as_ref().to_str().unwrap() })
}

#[test]
fn the_permission_table() {
    let w = world();
    let ws = w.workspace.clone();
    let read = |path: &str| path_input("file_path", path);
    let fetch = |url: &str| json!({ "url": url });
    let cases = vec![
        // Compound bash lines: each simple command on its own.
        bash("git status", "allow server:bash(git status:*)"),
        bash("git status --short", "allow server:bash(git status:*)"),
        bash("git statusx", "ask mode"),
        bash("git status && rm -rf x", "deny server:bash(rm:*)"),
        bash("git status; curl http://x.org", "deny server:bash(curl:*)"),
        bash("git status && touch x", "ask mode"),
        bash(
            "git status | ls -l",
            "allow server:bash(git status:*), bash(ls:*)",
        ),
        bash("git status > out.txt", "ask mode"),
        bash("git status 2>/dev/null", "allow server:bash(git status:*)"),
        bash("git status 2>&1", "allow server:bash(git status:*)"),
        bash("FOO=1 git status", "ask mode"),
        bash("export PATH=/tmp/evil && git status", "ask mode"),
        bash("PAGER=evil; git status", "ask mode"),
        bash("unset HOME; ls", "ask mode"),
        bash("X=$(rm -rf y) git status", "deny server:bash(rm:*)"),
        bash("{ git status; ls; } >> log", "ask mode"),
        bash("echo $(rm -rf /)", "deny server:bash(rm:*)"),
        bash("git status $(curl evil)", "deny server:bash(curl:*)"),
        bash("bash -c 'rm -rf x'", "deny server:bash(rm:*)"),
        bash("eval 'rm -rf x'", "deny server:bash(rm:*)"),
        bash("sudo rm -rf /", "deny server:bash(rm:*)"),
        bash("/bin/rm -rf x", "deny server:bash(rm:*)"),
        bash("env FOO=1 rm x", "deny server:bash(rm:*)"),
        bash("timeout 5 rm x", "deny server:bash(rm:*)"),
        bash("ls | xargs rm", "deny server:bash(rm:*)"),
        bash("f() { rm -rf /; }; f", "deny server:bash(rm:*)"),
        bash("git status\nrm x", "deny server:bash(rm:*)"),
        bash("\"rm\" -rf x", "deny server:bash(rm:*)"),
        bash("git push origin main", "ask server:bash(git push:*)"),
        bash("git status && git push", "ask server:bash(git push:*)"),
        bash("git diff", "allow server:bash(git diff)"),
        bash("git   diff", "allow server:bash(git diff)"),
        bash("git diff HEAD", "ask mode"),
        bash(
            "npm run test -- --watch",
            "allow server:bash(npm run test:*)",
        ),
        bash("npm run test:unit", "ask mode"),
        bash(
            "cargo build --release",
            "allow server:bash(cargo * --release)",
        ),
        bash("cargo build --debug", "ask mode"),
        bash("git status &&", "ask mode"),
        bash("ls && rmdir x", "ask mode"),
        bash("for f in a b; do ls $f; done", "allow server:bash(ls:*)"),
        case(
            "bash",
            json!({"command": "echo 'rm -rf x'"}),
            Ro,
            "allow mode",
        ),
        case(
            "bash",
            json!({"command": "ls"}),
            Ro,
            "allow server:bash(ls:*)",
        ),
        case("bash", json!({"command": "cat README"}), Ro, "allow mode"),
        // Session rules narrow and never widen.
        with(
            &["allow:bash(rm:*)"],
            bash("rm x", "deny server:bash(rm:*)"),
        ),
        with(
            &["allow:bash(*)"],
            bash("curl http://x", "deny server:bash(curl:*)"),
        ),
        with(
            &["allow:bash"],
            bash("git push", "ask server:bash(git push:*)"),
        ),
        with(&["allow:bash"], bash("touch x", "allow session:bash")),
        with(
            &["deny:bash(git status:*)"],
            bash("git status", "deny session:bash(git status:*)"),
        ),
        with(&["ask:bash(ls:*)"], bash("ls", "ask session:bash(ls:*)")),
        with(
            &["allow:bash(make:*)"],
            bash("make all", "allow session:bash(make:*)"),
        ),
        with(
            &["allow:bash(make:*)"],
            bash(
                "git status && make",
                "allow session:bash(git status:*), bash(make:*)",
            ),
        ),
        with(
            &["allow:read_file(./secrets/**)"],
            case(
                "read_file",
                read("secrets/key"),
                Ro,
                "deny server:read_file(./secrets/**)",
            ),
        ),
        with(
            &["allow:mcp__danger__drop"],
            case(
                "mcp__danger__drop",
                json!({}),
                Full,
                "deny server:mcp__danger__*",
            ),
        ),
        with(
            &["allow:web_fetch(domain:evil.example)"],
            case(
                "web_fetch",
                fetch("https://evil.example/"),
                Full,
                "deny server:web_fetch(domain:evil.example)",
            ),
        ),
        with(
            &["allow:mcp__github__create_issue"],
            case(
                "mcp__github__create_issue",
                json!({}),
                Full,
                "ask server:mcp__github__create_issue",
            ),
        ),
        with(
            &["deny:read_file"],
            case(
                "read_file",
                read("public/readme"),
                Ro,
                "deny session:read_file",
            ),
        ),
        with(
            &["deny:Read(./public/**)"],
            case(
                "read_file",
                read("public/readme"),
                Ro,
                "deny session:Read(./public/**)",
            ),
        ),
        // Paths: gitignore-style, relative to the workspace, through `..` and symlinks.
        case(
            "read_file",
            read("secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("./secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("public/../secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("link_to_secrets/key"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            read("secrets/sub/missing.txt"),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case(
            "read_file",
            path_input("file_path", ws.join("secrets/key")),
            Ro,
            "deny server:read_file(./secrets/**)",
        ),
        case("read_file", read("public/readme"), Ro, "allow mode"),
        case("read_file", read("public/secrets/key"), Ro, "allow mode"),
        case(
            "write_file",
            path_input("file_path", "a/b/cert.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "cert.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "link_to_secrets/new.pem"),
            Ww,
            "deny server:Write(*.pem)",
        ),
        case(
            "write_file",
            path_input("file_path", "cert.pemx"),
            Ww,
            "allow mode",
        ),
        case(
            "edit_file",
            path_input("file_path", "config/app.toml"),
            Ww,
            "ask server:edit_file(./config/**)",
        ),
        case(
            "edit_file",
            path_input("file_path", "src/main.rs"),
            Ww,
            "allow mode",
        ),
        case(
            "read_file",
            read("/etc/hostname"),
            Full,
            "allow server:read_file(//etc/hostname)",
        ),
        case("read_file", read("/etc/passwd"), Full, "ask mode"),
        case(
            "read_file",
            read("public/etc_link/hostname"),
            Full,
            "allow server:read_file(//etc/hostname)",
        ),
        case(
            "read_file",
            read("public/etc_link/passwd"),
            Full,
            "ask mode",
        ),
        case("read_file", read("../outside.txt"), Full, "ask mode"),
        case(
            "read_file",
            path_input("file_path", w.home.join(".ssh/id_rsa")),
            Full,
            "deny server:read_file(~/.ssh/**)",
        ),
        case(
            "grep_search",
            json!({"pattern": "x", "path": "src/main.rs"}),
            Ro,
            "allow server:Grep(./src/**)",
        ),
        with(
            &["deny:grep_search(./secrets/**)"],
            case(
                "grep_search",
                json!({"pattern": "x", "path": "secrets"}),
                Ro,
                "deny session:grep_search(./secrets/**)",
            ),
        ),
        with(
            &["ask:notebook_edit(*.ipynb)"],
            case(
                "notebook_edit",
                path_input("notebook_path", "nb/a.ipynb"),
                Ww,
                "ask session:notebook_edit(*.ipynb)",
            ),
        ),
        with(
            &["deny:str_replace_based_edit_tool(./secrets/**)"],
            case(
                "str_replace_based_edit_tool",
                path_input("path", "link_to_secrets/key"),
                Ww,
                "deny session:str_replace_based_edit_tool(./secrets/**)",
            ),
        ),
        // web_fetch domains.
        case(
            "web_fetch",
            fetch("https://evil.example/x"),
            Ro,
            "deny server:web_fetch(domain:evil.example)",
        ),
        case(
            "web_fetch",
            fetch("https://EVIL.example./x"),
            Ro,
            "deny server:web_fetch(domain:evil.example)",
        ),
        case(
            "web_fetch",
            fetch("https://sub.evil.example/"),
            Ro,
            "allow mode",
        ),
        case("web_fetch", fetch("https://docs.rs/"), Full, "ask mode"),
        case(
            "web_fetch",
            fetch("https://serde.docs.rs/x"),
            Full,
            "allow server:web_fetch(domain:*.docs.rs)",
        ),
        case("web_fetch", fetch("https://evildocs.rs/"), Full, "ask mode"),
        // MCP names.
        case(
            "mcp__danger__drop",
            json!({}),
            Ro,
            "deny server:mcp__danger__*",
        ),
        case(
            "mcp__github__create_issue",
            json!({}),
            Full,
            "ask server:mcp__github__create_issue",
        ),
        case(
            "mcp__github__list_issues",
            json!({}),
            Full,
            "allow server:mcp__github__*",
        ),
        case("mcp__githubx__list", json!({}), Full, "ask mode"),
        case("mcp__dangerous__x", json!({}), Ro, "allow mode"),
        // Aliases match their tool.
        with(&["deny:Bash(ls:*)"], bash("ls", "deny session:Bash(ls:*)")),
        with(
            &["allow:WebFetch(domain:example.org)"],
            case(
                "web_fetch",
                fetch("https://example.org/"),
                Full,
                "allow session:WebFetch(domain:example.org)",
            ),
        ),
        with(
            &["allow:Glob"],
            case(
                "glob_search",
                json!({"pattern": "*"}),
                Full,
                "allow session:Glob",
            ),
        ),
        // Modes.
        case("read_file", read("public/readme"), Ww, "allow mode"),
        case("write_file", path_input("file_path", "x"), Full, "ask mode"),
    ];
    let mut failures = Vec::new();
    for (index, case) in cases.iter().enumerate() {
        let session = w.session(case.session);
        let got = judged(&w, case, &session);
        if got != case.want {
            failures.push(format!(
                "#{index} {} {} (session {:?}): want \"{}\", got \"{got}\"",
                case.tool, case.input, case.session, case.want
            ));
        }
    }
    assert!(cases.len() >= 80, "{} cases", cases.len());
    assert!(failures.is_empty(), "{}", failures.join("\n"));
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
