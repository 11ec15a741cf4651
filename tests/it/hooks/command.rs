//! Command hooks: real scripts.

use serde_json::Value;
use toold::hooks::{HookSettings, OnFailure};
use toold::tool::ErrorKind;

use crate::hooks::harness::{Hooked, pre, script};

fn scripts() -> tempfile::TempDir {
    tempfile::tempdir().unwrap()
}

#[tokio::test]
async fn exit_2_blocks_with_stderr_as_the_reason() {
    let dir = scripts();
    let hook = script(
        dir.path(),
        "h",
        "cat >/dev/null; echo 'no touching today' >&2; exit 2",
    );
    let hooked = Hooked::new(pre(vec![hook]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("no touching today"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());
}

#[tokio::test]
async fn json_deny_blocks_and_json_ask_without_an_approver_blocks() {
    let dir = scripts();
    let deny = script(
        dir.path(),
        "deny",
        r#"printf '{"hookSpecificOutput":{"hookEventName":"PreToolUse","permissionDecision":"deny","permissionDecisionReason":"policy says no"}}'"#,
    );
    let hooked = Hooked::new(pre(vec![deny]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("policy says no"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());

    let ask = script(
        dir.path(),
        "ask",
        r#"printf '{"hookSpecificOutput":{"permissionDecision":"ask","permissionDecisionReason":"sure?"}}'"#,
    );
    let hooked = Hooked::new(pre(vec![ask]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("asked for confirmation"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());

    // "allow" widens nothing and changes nothing: the call runs as the mode allows.
    let allow = script(
        dir.path(),
        "allow",
        r#"printf '{"hookSpecificOutput":{"permissionDecision":"allow"}}'"#,
    );
    let hooked = Hooked::new(pre(vec![allow]));
    assert!(!hooked.bash("touch ran").await.is_error);
    assert!(hooked.path("ran").exists());
}

#[tokio::test]
async fn updated_input_chains_across_two_hooks_and_is_validated_again() {
    let dir = scripts();
    let first = script(
        dir.path(),
        "first",
        r#"input=$(cat)
case "$input" in
  *'"command":"echo original"'*) printf '{"hookSpecificOutput":{"updatedInput":{"command":"echo first"}}}' ;;
  *) echo "first saw $input" >&2; exit 2 ;;
esac"#,
    );
    let second = script(
        dir.path(),
        "second",
        r#"input=$(cat)
case "$input" in
  *'"command":"echo first"'*) printf '{"hookSpecificOutput":{"updatedInput":{"command":"echo second"},"additionalContext":"rewritten twice"}}' ;;
  *) echo "second saw $input" >&2; exit 2 ;;
esac"#,
    );
    let hooked = Hooked::new(pre(vec![first, second]));
    let result = hooked.bash("echo original").await;
    assert!(!result.is_error, "{}", result.output);
    assert!(result.output.starts_with("second\n"), "{}", result.output);
    assert!(
        result.output.contains("rewritten twice"),
        "{}",
        result.output
    );

    let breaking = script(
        dir.path(),
        "breaking",
        r#"cat >/dev/null; printf '{"hookSpecificOutput":{"updatedInput":{"command":42}}}'"#,
    );
    let hooked = Hooked::new(pre(vec![breaking]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("fails the schema"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());
}

/// The live (not zombie) processes whose command line names `script`.
fn processes_naming(script: &std::path::Path) -> Vec<String> {
    let script = script.to_string_lossy().into_owned();
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().into_string().ok())
        .filter(|pid| pid.bytes().all(|b| b.is_ascii_digit()))
        .filter(|pid| {
            let cmdline = std::fs::read(format!("/proc/{pid}/cmdline")).unwrap_or_default();
            let zombie = std::fs::read_to_string(format!("/proc/{pid}/stat"))
                .map_or(true, |stat| stat.contains(") Z "));
            !zombie && String::from_utf8_lossy(&cmdline).contains(&script)
        })
        .collect()
}

#[tokio::test]
async fn a_timed_out_hook_is_killed_and_blocks_only_with_on_failure_block() {
    let dir = scripts();
    // Every process of the hook names the script: `sh -c SCRIPT`, then bash running it, then
    // `sleep` in its place under the script's name. (The test used to read the hook's pid from
    // a file its first line wrote: on a loaded machine the 300 ms ran out before that line
    // ran, and the file was missing. Whether or not the hook got that far, none of its
    // processes may outlive the reply.)
    let mut slow = script(dir.path(), "slow", "exec -a \"$0 (sleeping)\" sleep 300");
    let script_path = dir.path().join("slow");
    slow.timeout_ms = 300;
    slow.on_failure = OnFailure::Block;
    let hooked = Hooked::new(pre(vec![slow.clone()]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("timed out after 300 ms"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());
    // The hook's group is sent SIGKILL before the reply, and the process the runner started
    // is reaped; a process of the group is gone only once the kernel has run its exit, which
    // on a loaded machine can come a moment after the reply.
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    while !processes_naming(&script_path).is_empty() && std::time::Instant::now() < deadline {
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    let left = processes_naming(&script_path);
    assert!(left.is_empty(), "the timed-out hook still runs: {left:?}");

    slow.on_failure = OnFailure::Allow;
    let hooked = Hooked::new(pre(vec![slow]));
    let result = hooked.bash("touch ran").await;
    assert!(!result.is_error, "{}", result.output);
    assert!(hooked.path("ran").exists());
}

#[tokio::test]
async fn on_failure_block_makes_a_crashing_hook_block() {
    let dir = scripts();
    let mut crashing = script(dir.path(), "crash", "cat >/dev/null; echo boom >&2; exit 1");
    let malformed = script(dir.path(), "malformed", "cat >/dev/null; echo '{not json'");
    let hooked = Hooked::new(pre(vec![crashing.clone(), malformed.clone()]));
    assert!(
        !hooked.bash("touch ran").await.is_error,
        "allow is the default"
    );

    crashing.on_failure = OnFailure::Block;
    let hooked = Hooked::new(pre(vec![crashing]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("exited with code 1: boom") && result.output.contains("\"block\""),
        "{}",
        result.output
    );
    let mut malformed = malformed;
    malformed.on_failure = OnFailure::Block;
    let hooked = Hooked::new(pre(vec![malformed]));
    let result = hooked.bash("true").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(result.output.contains("malformed"), "{}", result.output);
}

#[tokio::test]
async fn post_hooks_see_the_tool_response_and_failures_go_to_the_failure_hooks() {
    let dir = scripts();
    let post = script(
        dir.path(),
        "post",
        r#"cat > "$PWD/post.json"; printf '{"hookSpecificOutput":{"additionalContext":"post says hi"}}'"#,
    );
    let failure = script(dir.path(), "failure", r#"cat > "$PWD/failure.json""#);
    let hooked = Hooked::new(HookSettings {
        post_tool_use: vec![post],
        post_tool_use_failure: vec![failure],
        ..HookSettings::default()
    });
    let result = hooked.bash("echo hello").await;
    assert!(result.output.contains("hello") && result.output.contains("post says hi"));
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(hooked.path("post.json")).unwrap()).unwrap();
    assert_eq!(event["hook_event_name"], "PostToolUse");
    assert_eq!(event["tool_name"], "bash");
    assert_eq!(event["tool_use_id"], "call_1");
    assert_eq!(event["tool_input"]["command"], "echo hello");
    assert_eq!(event["tool_response"]["output"], "hello\n");
    assert_eq!(event["tool_response"]["is_error"], false);
    assert!(!hooked.path("failure.json").exists());

    std::fs::remove_file(hooked.path("post.json")).unwrap();
    let failed = hooked.bash("exit 3").await;
    assert!(failed.is_error);
    let event: Value =
        serde_json::from_str(&std::fs::read_to_string(hooked.path("failure.json")).unwrap())
            .unwrap();
    assert_eq!(event["hook_event_name"], "PostToolUseFailure");
    assert_eq!(event["tool_response"]["is_error"], true);
    assert!(!hooked.path("post.json").exists());
}

#[tokio::test]
async fn command_hooks_get_a_clean_environment_and_the_workspace_as_cwd() {
    let dir = scripts();
    let env = script(
        dir.path(),
        "env",
        r#"cat >/dev/null; env > "$PWD/env.txt"; pwd -P > "$PWD/cwd.txt""#,
    );
    let hooked = Hooked::new(pre(vec![env]));
    assert!(!hooked.bash("true").await.is_error);
    let seen = std::fs::read_to_string(hooked.path("env.txt")).unwrap();
    assert!(!seen.contains("top-secret"), "{seen}");
    assert!(seen.contains("HOME=/nonexistent-home"), "{seen}");
    let names: Vec<&str> = seen.lines().filter_map(|l| l.split('=').next()).collect();
    for name in names {
        // bash itself adds PWD, SHLVL and _.
        assert!(
            toold::hooks::KEPT_VARIABLES.contains(&name)
                || ["PWD", "SHLVL", "_", "OLDPWD"].contains(&name),
            "unexpected variable {name}"
        );
    }
    let cwd = std::fs::read_to_string(hooked.path("cwd.txt")).unwrap();
    assert_eq!(
        cwd.trim(),
        hooked.session.working_directory().to_string_lossy()
    );
}

#[tokio::test]
async fn a_matcher_limits_hooks_to_the_tools_it_names() {
    let dir = scripts();
    let mut hook = script(dir.path(), "h", "cat >/dev/null; echo blocked >&2; exit 2");
    hook.matcher = "bash_output|kill_shell".into();
    let hooked = Hooked::new(pre(vec![hook]));
    assert!(!hooked.bash("true").await.is_error);
}
