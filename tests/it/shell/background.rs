//! Background tasks: start, incremental reads, exit status, kill, per-session isolation,
//! session close and the output cap.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ErrorKind, ToolCall, ToolContext, ToolResult};

use crate::shell::harness::*;

async fn start(shell: &Shell, command: &str) -> (String, ToolResult) {
    let result = shell
        .call(
            "bash",
            json!({"command": command, "run_in_background": true}),
        )
        .await;
    assert!(!result.is_error, "{}", result.output);
    let task_id = result.metadata["task_id"].as_str().unwrap().to_owned();
    (task_id, result)
}

async fn read(shell: &Shell, task_id: &str) -> ToolResult {
    shell.call("bash_output", json!({"task_id": task_id})).await
}

/// Reads until the accumulated output contains `needle`; returns every read's output.
async fn read_until(shell: &Shell, task_id: &str, needle: &str) -> Vec<ToolResult> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut reads = Vec::new();
    loop {
        let result = read(shell, task_id).await;
        assert!(!result.is_error, "{}", result.output);
        let done = result.output.contains(needle);
        reads.push(result);
        if done {
            return reads;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "never saw {needle:?}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_task_is_read_incrementally_and_killed() {
    let shell = Shell::new();
    let command = "echo first; while [ ! -e go ]; do sleep 0.02; done; echo second; \
                   sleep 300 & echo $! > sleeper.pid; wait";
    let (task_id, started) = start(&shell, command).await;
    assert!(started.output.contains(&task_id), "{}", started.output);
    let shell_pid = started.metadata["pid"].as_i64().unwrap() as i32;

    let first = read_until(&shell, &task_id, "first").await;
    let last = first.last().unwrap();
    assert!(last.output.ends_with("status: running"), "{}", last.output);
    assert_eq!(last.metadata["status"], json!("running"));

    std::fs::write(shell.path("go"), "").unwrap();
    let second = read_until(&shell, &task_id, "second").await;
    for result in &second {
        assert!(
            !result.output.contains("first"),
            "old output again: {}",
            result.output
        );
    }
    let sleeper = read_pid(&shell.path("sleeper.pid")).await;
    let quiet = read(&shell, &task_id).await;
    assert!(
        quiet.output.starts_with("(no new output)"),
        "{}",
        quiet.output
    );

    let killed = shell.call("kill_shell", json!({"task_id": task_id})).await;
    assert!(!killed.is_error, "{}", killed.output);
    assert!(
        killed.output.contains("stopped and removed"),
        "{}",
        killed.output
    );
    assert!(
        killed.output.ends_with("status: killed"),
        "{}",
        killed.output
    );
    assert!(
        wait_gone(shell_pid).await,
        "the task's shell {shell_pid} still runs"
    );
    assert!(
        wait_gone(sleeper).await,
        "the task's child {sleeper} still runs"
    );

    let gone = read(&shell, &task_id).await;
    assert_eq!(gone.error_kind, Some(ErrorKind::Validation));
    assert!(gone.output.contains("unknown task"), "{}", gone.output);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_exited_task_reports_its_code_until_removed() {
    let shell = Shell::new();
    let (task_id, _) = start(&shell, "echo bye; exit 7").await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut seen = String::new();
    let finished = loop {
        let result = read(&shell, &task_id).await;
        seen.push_str(&result.output);
        if result.metadata["status"] == json!("exited") {
            break result;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never exited"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(seen.contains("bye\n"), "{seen}");
    assert!(
        finished.output.ends_with("status: exited with code 7"),
        "{}",
        finished.output
    );
    assert_eq!(finished.metadata["exit_code"], json!(7));
    // Still listed: reading again gives the status and no new output.
    let again = read(&shell, &task_id).await;
    assert!(
        again.output.starts_with("(no new output)"),
        "{}",
        again.output
    );
    let removed = shell.call("KillShell", json!({"task_id": task_id})).await;
    assert!(
        removed.output.ends_with("status: exited with code 7"),
        "{}",
        removed.output
    );
    assert_eq!(shell.shells.task_count(shell.session.id()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn another_sessions_task_is_unknown() {
    let shell = Shell::new();
    let (task_id, _) = start(&shell, "sleep 300").await;
    let other = Arc::new(SessionState::new(SessionConfig::new(
        "sess_other",
        shell.root().to_path_buf(),
    )));
    for tool in ["bash_output", "kill_shell"] {
        let calls = vec![ToolCall::new("c", tool, json!({"task_id": task_id}))];
        let result = shell
            .dispatcher
            .execute_batch(other.clone(), shell.pool(), calls)
            .await
            .results
            .remove(0);
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::Validation),
            "{}",
            result.output
        );
        assert!(result.output.contains("unknown task"), "{}", result.output);
    }
    // The owner still sees it running, then closes the session.
    assert!(
        read(&shell, &task_id)
            .await
            .output
            .ends_with("status: running")
    );
    assert_eq!(shell.shells.kill_session(shell.session.id()).await, 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn closing_a_session_stops_all_its_tasks() {
    let shell = Shell::new();
    let mut pids = Vec::new();
    for _ in 0..2 {
        let (_, started) = start(&shell, "sleep 300").await;
        pids.push(started.metadata["pid"].as_i64().unwrap() as i32);
    }
    assert_eq!(shell.shells.task_count(shell.session.id()), 2);
    assert_eq!(shell.shells.kill_session(shell.session.id()).await, 2);
    for pid in pids {
        assert!(wait_gone(pid).await, "{pid} still runs");
    }
    assert_eq!(shell.shells.task_count(shell.session.id()), 0);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_dropped_session_takes_its_tasks_along() {
    let shell = Shell::new();
    let session = Arc::new(SessionState::new(SessionConfig::new(
        "sess_dropped",
        shell.root().to_path_buf(),
    )));
    let tool = shell.registry.get("bash").unwrap().tool.clone();
    let ctx = ToolContext::detached(session.clone());
    let input = json!({"command": "sleep 300", "run_in_background": true});
    let output = tool.execute(input, &ctx).await.unwrap();
    let pid = output.metadata["pid"].as_i64().unwrap() as i32;
    drop(ctx);
    drop(session);
    assert!(wait_gone(pid).await, "{pid} outlived its session");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn background_output_is_capped_and_offloaded() {
    let shell = Shell::new();
    // 20 MB before anyone reads: more than the 8 MiB a task keeps between reads.
    let command = "head -c 20000000 /dev/zero | tr '\\0' x; echo; echo tail-end; touch finished";
    let (task_id, _) = start(&shell, command).await;
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !shell.path("finished").exists() {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the task never finished"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let result = read(&shell, &task_id).await;
    let omitted = result.metadata["omitted_bytes"].as_u64().unwrap();
    assert!(omitted >= 20_000_000 - 8 * 1024 * 1024, "omitted {omitted}");
    let offloaded = result.offloaded.as_ref().expect("the read was offloaded");
    assert!(offloaded.total_chars > 8_000_000);
    assert!(result.output.starts_with("xxxx"));
    assert!(
        result.output.contains("tail-end\n"),
        "the end survives the cap"
    );
    shell.shells.kill_session(shell.session.id()).await;
}

#[test]
fn the_task_tools_declare_what_they_do() {
    let shell = Shell::new();
    let input = json!({"task_id": "bash_1"});
    // Killing a task stops its processes half-way, as `kill` does.
    let kill = shell.registry.get("kill_shell").unwrap().tool.clone();
    assert!(kill.spec().is_destructive(&input, &shell.session));
    // Each read moves the task's read mark: two reads in parallel would split the output
    // between them at random.
    let read = shell.registry.get("bash_output").unwrap().tool.clone();
    assert!(!read.spec().is_concurrency_safe(&input, &shell.session));
    assert!(read.spec().is_read_only(&input, &shell.session));
    assert!(!read.spec().is_destructive(&input, &shell.session));
}
