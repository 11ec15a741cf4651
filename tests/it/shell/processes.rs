//! No process left behind: timeouts, interrupts, sibling aborts and commands that leave
//! children running all end with the whole process group gone, checked by pid.

use serde_json::json;
use toold::tool::{ErrorKind, ToolCall};

use crate::shell::harness::*;

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_timeout_kills_a_grandchild_sleeper() {
    let shell = Shell::new();
    let command = "echo started; bash -c 'sleep 300 & echo $! > grandchild.pid; wait'";
    // Long enough for a loaded machine to fork twice and write the pid file first.
    let result = shell
        .call("bash", json!({"command": command, "timeout": 5_000}))
        .await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::Timeout),
        "{}",
        result.output
    );
    assert!(
        result.output.starts_with("TimeoutError: started\n"),
        "{}",
        result.output
    );
    assert!(
        result.output.contains("timed out after 5000 ms"),
        "{}",
        result.output
    );
    let pid = read_pid(&shell.path("grandchild.pid")).await;
    assert!(wait_gone(pid).await, "grandchild {pid} is still running");
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
    assert!(wait_gone(pid).await, "sleeper {pid} is still running");
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
        assert!(wait_gone(pid).await, "{file}: {pid} is still running");
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_group_ignoring_sigterm_is_gone_when_the_call_returns() {
    let shell = Shell::new();
    // Sleepers that ignore SIGTERM (an ignored signal stays ignored across exec), so they go
    // only with the SIGKILL, at the lowest priority, so they are slow to get the CPU to die;
    // they do not hold the output pipe, so nothing but the stop itself waits for them.
    let command = "trap '' TERM; for i in $(seq 200); do nice -n 19 sleep 300 >/dev/null 2>&1 & \
                   echo $! >> sleepers.pid; done; echo started";
    let result = tokio::time::timeout(PATIENCE, shell.bash(command))
        .await
        .unwrap();
    assert_eq!(result.output, "started\n");
    // Checked at once, without waiting: the call may not return before the group is gone.
    let pids = std::fs::read_to_string(shell.path("sleepers.pid")).unwrap();
    let running: Vec<i32> = pids
        .lines()
        .map(|line| line.parse().unwrap())
        .filter(|pid| !process_gone(*pid))
        .collect();
    assert_eq!(running, Vec::<i32>::new(), "still running after the call");
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
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        let running = processes_running(&["sleep", "287.5"]);
        if running.is_empty() {
            break;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "still running: {running:?}"
        );
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
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
