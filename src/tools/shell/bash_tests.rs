//! Input checking of `bash`, as a table.

use serde_json::json;

use super::*;
use crate::session::SessionState;

#[test]
fn bad_inputs_are_refused_with_clear_messages() {
    let long = "x".repeat(MAX_COMMAND_BYTES + 1);
    let cases = [
        (json!({}), "command must be a string"),
        (json!({"command": 5}), "command must be a string"),
        (json!({"command": ""}), "command is empty"),
        (json!({"command": "  \n\t"}), "command is empty"),
        (json!({"command": "ls\u{0}rm"}), "NUL byte"),
        (json!({"command": long}), "the limit is 100000 bytes"),
        (
            json!({"command": "ls", "timeout": 0}),
            "timeout 0 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": 600_001}),
            "timeout 600001 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": -5}),
            "timeout -5 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": 1.5}),
            "timeout 1.5 is out of range",
        ),
        (
            json!({"command": "ls", "timeout": "100"}),
            "timeout \"100\" is out of range",
        ),
        (
            json!({"command": "ls", "run_in_background": "yes"}),
            "run_in_background must be true or false",
        ),
    ];
    for (input, expected) in cases {
        match parse_input(&input) {
            Err(ToolError::Validation(message)) => {
                assert!(message.contains(expected), "{input}: {message}");
            }
            other => panic!("{input}: expected a validation error, got {other:?}"),
        }
    }
}

#[test]
fn good_inputs_get_defaults() {
    let parsed = parse_input(&json!({"command": "ls"})).unwrap();
    assert_eq!(parsed.timeout_ms, DEFAULT_TIMEOUT_MS);
    assert!(!parsed.run_in_background);
    let parsed =
        parse_input(&json!({"command": "ls", "timeout": 600_000.0, "run_in_background": true}))
            .unwrap();
    assert_eq!(parsed.timeout_ms, MAX_TIMEOUT_MS);
    assert!(parsed.run_in_background);
    assert_eq!(
        parse_input(&json!({"command": "ls", "timeout": 1}))
            .unwrap()
            .timeout_ms,
        1
    );
}

#[test]
fn flags_follow_the_classifier_and_fail_closed() {
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let spec = tool.spec();
    let session = Arc::new(SessionState::new(crate::session::SessionConfig::new(
        "s", "/tmp",
    )));
    let read = json!({"command": "git status"});
    assert!(spec.is_read_only(&read, &session));
    assert!(spec.is_concurrency_safe(&read, &session));
    assert!(!spec.is_destructive(&read, &session));
    assert_eq!(
        spec.required_permission(&read, &call_in(&session)),
        PermissionLevel::ReadOnly
    );
    let write = json!({"command": "rm -rf build"});
    assert!(!spec.is_read_only(&write, &session));
    assert!(spec.is_destructive(&write, &session));
    assert_eq!(
        spec.required_permission(&write, &call_in(&session)),
        PermissionLevel::DangerFullAccess
    );
    // No command at all: the classifier errs, the flags take their safe side.
    let missing = json!({"cmd": "ls"});
    assert!(!spec.is_read_only(&missing, &session));
    assert!(!spec.is_concurrency_safe(&missing, &session));
    assert!(spec.is_destructive(&missing, &session));
    assert_eq!(
        spec.required_permission(&missing, &call_in(&session)),
        PermissionLevel::DangerFullAccess
    );
}

#[test]
fn a_background_command_is_concurrency_safe_but_keeps_its_other_flags() {
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let spec = tool.spec();
    let session = Arc::new(SessionState::new(crate::session::SessionConfig::new(
        "s", "/tmp",
    )));
    let server = json!({"command": "rm -f out && npm run dev", "run_in_background": true});
    assert!(spec.is_concurrency_safe(&server, &session));
    assert!(!spec.is_read_only(&server, &session));
    assert!(spec.is_destructive(&server, &session));
    let foreground = json!({"command": "rm -f out && npm run dev", "run_in_background": false});
    assert!(!spec.is_concurrency_safe(&foreground, &session));
    // Unclassifiable input stays on the safe side, background or not.
    let missing = json!({"cmd": "ls", "run_in_background": true});
    assert!(!spec.is_concurrency_safe(&missing, &session));
}

/// A call's context in `session` (the permission an input needs is judged per call).
fn call_in(session: &Arc<SessionState>) -> crate::tool::ToolContext {
    crate::tool::ToolContext::detached(session.clone())
}

/// `read_only` unless the command needs full access.
const R: PermissionLevel = PermissionLevel::ReadOnly;
const F: PermissionLevel = PermissionLevel::DangerFullAccess;

/// A workspace with `inside.txt`, `sub/` and `out` (a symlink to `/etc`), and a session in it.
fn workspace() -> (tempfile::TempDir, Arc<SessionState>) {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().canonicalize().unwrap();
    std::fs::write(root.join("inside.txt"), "x").unwrap();
    std::fs::create_dir(root.join("sub")).unwrap();
    std::os::unix::fs::symlink("/etc", root.join("out")).unwrap();
    let session = SessionState::new(crate::session::SessionConfig::new("s", root));
    (dir, Arc::new(session))
}

#[test]
fn read_only_commands_reaching_outside_the_workspace_need_full_access() {
    let (_dir, session) = workspace();
    let root = session.working_directory().display().to_string();
    let inside_absolute = format!("cat {root}/inside.txt");
    let escape_absolute = format!("cat {root}/../x");
    let cases: &[(&str, PermissionLevel)] = &[
        ("cat inside.txt", R),
        ("ls -la sub", R),
        ("cat sub/../inside.txt", R),
        (&inside_absolute, R),
        ("pushd sub && ls && popd", R),
        ("for f in *.txt; do cat \"$f\"; done", R),
        ("grep x inside.txt 2>/dev/null", R),
        ("head -c 8 /dev/urandom 2>&1 | od -x", R),
        ("cat < inside.txt", R),
        ("echo $(cat inside.txt)", R),
        ("cat /etc/passwd", F),
        ("rg x /etc", F),
        ("ls ../..", F),
        (&escape_absolute, F),
        ("head ~/.ssh/id_rsa", F),
        ("cd /etc && cat passwd", F),
        ("cd out", F),
        ("cd", F),
        ("cd - && ls", F),
        ("builtin cd && cat .bashrc", F),
        ("cat < /etc/passwd", F),
        ("cat $HOME/.bashrc", F),
        ("cat \"${HOME}\"/.bashrc", F),
        ("cat ${f:-/etc/passwd}", F),
        ("cat $'\\057etc\\057passwd'", F),
        ("cat /etc/pass*", F),
        ("for f in /etc/*; do cat \"$f\"; done", F),
        ("echo $(cat /etc/hostname)", F),
        ("grep --file=/etc/passwd x inside.txt", F),
        ("git -C /etc log", F),
        ("git --git-dir=../.git log", F),
        // Words are judged from the shell's directory, not from where an earlier `cd` on the
        // line went (which control flow can undo): conservative.
        ("cd sub && cat ../inside.txt", F),
        // Not read-only: full access whatever the paths.
        ("rm inside.txt", F),
    ];
    assert!(cases.len() >= 15);
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let mut failures = Vec::new();
    for (command, expected) in cases {
        let input = json!({ "command": command });
        let got = tool.spec().required_permission(&input, &call_in(&session));
        if got != *expected {
            failures.push(format!("{command:?}: expected {expected:?}, got {got:?}"));
        }
    }
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn a_shell_directory_outside_the_workspace_needs_full_access_for_everything() {
    let (_dir, session) = workspace();
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let pwd = json!({"command": "pwd"});
    assert_eq!(tool.spec().required_permission(&pwd, &call_in(&session)), R);
    session.apply(&[crate::tool::ContextUpdate::ShellCwd {
        path: PathBuf::from("/"),
    }]);
    assert_eq!(tool.spec().required_permission(&pwd, &call_in(&session)), F);
    let relative = json!({"command": "cat inside.txt"});
    assert_eq!(
        tool.spec()
            .required_permission(&relative, &call_in(&session)),
        F
    );
    // Back inside: read-only again.
    let sub = session.working_directory().join("sub");
    session.apply(&[crate::tool::ContextUpdate::ShellCwd { path: sub }]);
    assert_eq!(tool.spec().required_permission(&pwd, &call_in(&session)), R);
    // `..` is judged from where the shell is: from `sub` it is the workspace.
    let up = json!({"command": "ls .."});
    assert_eq!(tool.spec().required_permission(&up, &call_in(&session)), R);
    let up_twice = json!({"command": "ls ../.."});
    assert_eq!(
        tool.spec()
            .required_permission(&up_twice, &call_in(&session)),
        F
    );
}

#[test]
fn the_description_names_the_setting_that_changes_the_default_timeout() {
    let tool = BashTool::new(Arc::new(BackgroundShells::default())).unwrap();
    let spec = tool.spec();
    assert!(spec.description.contains("bash_default_timeout_ms"));
    let timeout = &spec.input_schema["properties"]["timeout"]["description"];
    assert!(
        timeout
            .as_str()
            .unwrap()
            .contains("bash_default_timeout_ms"),
        "{timeout}"
    );
}
