//! No process left behind: timeouts, interrupts, sibling aborts and commands that leave
//! children running all end with the whole process group gone, checked by pid.

use serde_json::json;
use toold::tool::{ErrorKind, ToolCall};

use crate::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_a_grandchild_sleeper() {
    let shell = Shell::new();
    let command = "echo started; bash -c 'sleep 300 & echo $! > grandchild.pid; wait'";
    let result = shell
        .call("bash", json!({"command": command, "timeout": 1_000}))
        .await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::Execution),
        "{}",
        result.output
    );
    assert!(
        result.output.starts_with("ExecutionError: started\n"),
        "{}",
        result.output
    );
    assert!(
        result.output.contains("timed out after 1000 ms"),
        "{}",
        result.output
    );
    let pid = read_pid(&shell.path("grandchild.pid")).await;
    assert!(process_gone(pid), "grandchild {pid} is still running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_cancels_and_kills_the_group() {
    let shell = Shell::new();
    let session = shell.session.clone();
    let command = "echo begun; sleep 300 & echo $! > sleeper.pid; wait";
    let pidfile = shell.path("sleeper.pid");
    let running = tokio::spawn({
        let dispatcher = shell.dispatcher.clone();
        let pool = shell.pool();
        let session = session.clone();
        async move {
            let calls = vec![ToolCall::new("c1", "bash", json!({"command": command}))];
            dispatcher.execute_batch(session, pool, calls).await.results
        }
    });
    let pid = read_pid(&pidfile).await;
    session.interrupt();
    let results = tokio::time::timeout(PATIENCE, running)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(
        results[0].error_kind,
        Some(ErrorKind::Cancelled),
        "{}",
        results[0].output
    );
    assert!(
        results[0].output.contains("begun"),
        "partial output kept: {}",
        results[0].output
    );
    assert!(process_gone(pid), "sleeper {pid} is still running");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn processes_left_running_after_the_command_ends_are_stopped() {
    let shell = Shell::new();
    // One keeps the output pipe open, one does not; neither may outlive the call.
    let command =
        "sleep 300 & echo $! > a.pid; sleep 301 >/dev/null 2>&1 & echo $! > b.pid; echo done";
    let result = tokio::time::timeout(PATIENCE, shell.bash(command))
        .await
        .unwrap();
    assert_eq!(result.output, "done\n");
    for file in ["a.pid", "b.pid"] {
        let pid = read_pid(&shell.path(file)).await;
        assert!(process_gone(pid), "{file}: {pid} is still running");
    }
}

/// Processes whose command line is exactly `words`.
fn processes_running(words: &[&str]) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline
            .split(|b| *b == 0)
            .filter(|a| !a.is_empty())
            .collect();
        let matches =
            args.len() == words.len() && args.iter().zip(words).all(|(a, w)| *a == w.as_bytes());
        if matches && !process_gone(pid) {
            found.push(pid);
        }
    }
    found
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_failing_bash_call_aborts_its_parallel_siblings() {
    let shell = Shell::new();
    // Both are read-only, so they run in one parallel group; `sleep` is on the read-only list
    // for this reason among others.
    let calls = vec![
        ToolCall::new("slow", "bash", json!({"command": "sleep 287.5"})),
        ToolCall::new(
            "fails",
            "bash",
            json!({"command": "ls /nonexistent-toold-abort"}),
        ),
    ];
    let results = tokio::time::timeout(PATIENCE, shell.batch(calls))
        .await
        .unwrap();
    assert_eq!(results[0].id, "slow");
    assert_eq!(
        results[0].error_kind,
        Some(ErrorKind::Aborted),
        "{}",
        results[0].output
    );
    assert_eq!(
        results[1].error_kind,
        Some(ErrorKind::Execution),
        "{}",
        results[1].output
    );
    assert!(results[1].output.contains("exit code: 2"));
    // The aborted call's process group went with it.
    assert_eq!(processes_running(&["sleep", "287.5"]), Vec::<i32>::new());
}

#[test]
fn the_pool_sees_the_classifier() {
    let shell = Shell::new();
    let pool = shell.pool();
    let bash = pool.resolve("Bash").unwrap();
    let safe = json!({"command": "cat gate | grep x"});
    let write = json!({"command": "echo x > gate"});
    assert!(bash.spec().is_concurrency_safe(&safe, &shell.session));
    assert!(!bash.spec().is_destructive(&safe, &shell.session));
    assert!(!bash.spec().is_concurrency_safe(&write, &shell.session));
    assert!(bash.spec().is_destructive(&write, &shell.session));
}
