//! Input to running commands (issue 19): `write_stdin` drives a REPL through two inputs, and
//! `bash_output` with `wait_ms` returns as soon as output arrives rather than at its deadline.
//! Unsandboxed and in a per-session sandbox alike.

use std::time::{Duration, Instant};

use serde_json::{Value, json};
use toold::tools::SandboxMode;

use crate::shell::harness::Shell;
use crate::shell::session_sandbox::Sandbox;

async fn start(shell: &Shell, command: &str) -> String {
    let started = shell
        .call(
            "bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    assert!(!started.is_error, "{}", started.output);
    started.metadata["task_id"].as_str().unwrap().to_owned()
}

/// Writes `input` and collects output (waiting for it) until `expected` shows up.
async fn answer(shell: &Shell, task: &str, input: &str, expected: &str) -> String {
    let written = shell
        .call(
            "write_stdin",
            json!({"task_id": task, "input": input, "wait_ms": 10000}),
        )
        .await;
    assert!(!written.is_error, "{}", written.output);
    let mut seen = written.output;
    for _ in 0..20 {
        if seen.contains(expected) {
            break;
        }
        let more = shell
            .call("bash_output", json!({"task_id": task, "wait_ms": 2000}))
            .await;
        seen.push_str(&more.output);
    }
    seen
}

async fn drives_a_repl(shell: &Shell) {
    let task = start(shell, "python3 -i -q").await;
    let first = answer(shell, &task, "x = 6 * 7\nprint(x)\n", "42").await;
    assert!(first.contains("42"), "{first}");
    let second = answer(shell, &task, "print('ab' * 2)\n", "abab").await;
    assert!(second.contains("abab"), "{second}");
    assert!(!second.contains("42\n"), "only new output: {second}");
    let mut quit = shell
        .call(
            "write_stdin",
            json!({"task_id": task, "input": "exit()\n", "wait_ms": 10000}),
        )
        .await;
    // A prompt may still have been on its way; the end follows.
    for _ in 0..20 {
        if quit.metadata["status"] == json!("exited") {
            break;
        }
        quit = shell
            .call("bash_output", json!({"task_id": task, "wait_ms": 2000}))
            .await;
    }
    assert_eq!(quit.metadata["status"], json!("exited"), "{}", quit.output);
    let after = shell
        .call(
            "write_stdin",
            json!({"task_id": task, "input": "print(1)\n"}),
        )
        .await;
    assert!(
        after.is_error && after.output.contains("exited"),
        "{}",
        after.output
    );
}

#[tokio::test]
async fn write_stdin_drives_python_through_two_inputs() {
    drives_a_repl(&Shell::new()).await;
}

#[tokio::test]
async fn write_stdin_drives_python_through_two_inputs_in_the_session_sandbox() {
    let sandbox = Sandbox::with_mode(SandboxMode::Bwrap);
    drives_a_repl(&sandbox.session()).await;
}

#[tokio::test]
async fn bash_output_with_a_wait_returns_as_soon_as_output_arrives() {
    let shell = Shell::new();
    let task = start(&shell, "sleep 1; echo late; sleep 300").await;
    let asked = Instant::now();
    let read = shell
        .call("bash_output", json!({"task_id": task, "wait_ms": 30000}))
        .await;
    let waited = asked.elapsed();
    assert!(read.output.starts_with("late\n"), "{}", read.output);
    assert_eq!(read.metadata["status"], json!("running"));
    // It waited for the output (a second) and not for the deadline (thirty).
    assert!(
        waited >= Duration::from_millis(500) && waited < Duration::from_secs(25),
        "{waited:?}"
    );
    // Nothing new: a short wait runs out and says so.
    let idle = shell
        .call("bash_output", json!({"task_id": task, "wait_ms": 100}))
        .await;
    assert!(
        idle.output.starts_with("(no new output)"),
        "{}",
        idle.output
    );
    // The task ending also ends a wait.
    let ending = start(&shell, "sleep 1").await;
    let ended = shell
        .call("bash_output", json!({"task_id": ending, "wait_ms": 30000}))
        .await;
    assert_eq!(
        ended.metadata["status"],
        json!("exited"),
        "{}",
        ended.output
    );
}

#[tokio::test]
async fn bad_waits_and_inputs_are_refused_with_the_value() {
    let shell = Shell::new();
    let task = start(&shell, "sleep 300").await;
    let cases: [(&str, Value, &str); 3] = [
        (
            "bash_output",
            json!({"task_id": task, "wait_ms": 600001}),
            "600001",
        ),
        ("write_stdin", json!({"task_id": task}), "input"),
        (
            "write_stdin",
            json!({"task_id": "bash_999", "input": "x"}),
            "unknown task \"bash_999\"",
        ),
    ];
    for (tool, input, expected) in cases {
        let result = shell.call(tool, input).await;
        assert!(result.is_error, "{tool}: {}", result.output);
        assert!(
            result.output.contains(expected),
            "{tool}: {}",
            result.output
        );
    }
}

#[tokio::test]
async fn input_needs_what_running_a_command_there_needs() {
    // Unsandboxed, a workspace_write session may start `cat` but not feed it: input can make
    // a program do anything (`sed -f -` writes files), and nothing confines it.
    let shell = Shell::with_mode(toold::permission::PermissionLevel::WorkspaceWrite);
    let task = start(&shell, "cat").await;
    let refused = shell
        .call("write_stdin", json!({"task_id": task, "input": "x\n"}))
        .await;
    assert_eq!(
        refused.error_kind,
        Some(toold::tool::ErrorKind::PermissionDenied),
        "{}",
        refused.output
    );
    assert!(
        refused.output.contains("danger_full_access"),
        "{}",
        refused.output
    );
}
