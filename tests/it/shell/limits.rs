//! Per-session limits (issue 19): a fork bomb and a 4 GiB allocation in one session meet that
//! session's `[sandbox]` limits while another session's calls keep succeeding; and `kill -9`
//! of the daemon leaves no process of any session's sandbox (checked from `/proc`).

use std::time::Duration;

use serde_json::json;
use toold::tools::{SandboxMode, SandboxSettings};

use crate::http::harness::Toold;
use crate::shell::harness::{PATIENCE, Shell, process_gone, wait_gone};
use crate::shell::session_sandbox::Sandbox;

/// Small limits, so that hitting them is quick.
fn limited(mode: SandboxMode) -> Sandbox {
    Sandbox::new(SandboxSettings {
        mode,
        pids: 64,
        memory_bytes: 256 << 20,
        ..SandboxSettings::default()
    })
}

/// Runs `echo ok` in `other` until `busy` is done; returns `busy`'s result and how many
/// calls succeeded meanwhile (each must).
async fn while_answering(
    other: &Shell,
    busy: impl std::future::Future<Output = toold::tool::ToolResult>,
) -> (toold::tool::ToolResult, usize) {
    let busy = std::pin::pin!(busy);
    let mut answered = 0;
    let mut busy = busy;
    loop {
        tokio::select! {
            result = &mut busy => return (result, answered),
            echo = other.bash("echo ok") => {
                assert!(!echo.is_error && echo.output == "ok\n", "the other session: {}", echo.output);
                answered += 1;
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        }
    }
}

async fn limits_hold(mode: SandboxMode) {
    let sandbox = limited(mode);
    let hog = sandbox.session();
    let other = sandbox.session();
    let first = other.bash("true").await;
    assert!(!first.is_error, "{mode:?}: {}", first.output);
    let bomb = hog.call(
        "bash",
        json!({"command": "bomb() { bomb | bomb & }; bomb; sleep 3", "timeout": 20000}),
    );
    let (bombed, answered) = while_answering(&other, bomb).await;
    assert!(
        bombed.output.contains("Resource temporarily unavailable"),
        "{mode:?}: the fork bomb met no limit: {}",
        bombed.output
    );
    assert!(answered >= 2, "{mode:?}: only {answered} calls answered");
    let limits = bombed.metadata["limits"].as_str().unwrap().to_owned();
    assert!(limits.starts_with("cgroup"), "{limits}");

    let allocate = hog.bash("python3 -c \"x = b'x' * (4 << 30); print('allocated')\"");
    let (allocated, answered) = while_answering(&other, allocate).await;
    assert!(allocated.is_error, "{mode:?}: {}", allocated.output);
    assert!(
        !allocated.output.contains("allocated\n"),
        "{}",
        allocated.output
    );
    assert!(answered >= 1, "{mode:?}: only {answered} calls answered");
    // The session itself still works afterwards.
    assert_eq!(hog.bash("echo after").await.output, "after\n");
}

#[tokio::test]
async fn a_fork_bomb_and_a_4_gib_allocation_meet_the_session_limits_under_bubblewrap() {
    limits_hold(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn a_fork_bomb_and_a_4_gib_allocation_meet_the_session_limits_under_landlock() {
    limits_hold(SandboxMode::Landlock).await;
}

/// Every process below `root` in the process tree, from `/proc`.
pub fn descendants(root: i32) -> Vec<i32> {
    let mut parents: Vec<(i32, i32)> = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        let ppid = stat
            .rsplit_once(')')
            .and_then(|(_, rest)| rest.split_whitespace().nth(1))
            .and_then(|p| p.parse().ok());
        if let Some(ppid) = ppid {
            parents.push((pid, ppid));
        }
    }
    let mut found = vec![root];
    let mut i = 0;
    while i < found.len() {
        let parent = found[i];
        found.extend(
            parents
                .iter()
                .filter(|(_, p)| *p == parent)
                .map(|(c, _)| *c),
        );
        i += 1;
    }
    found.remove(0);
    found
}

async fn nothing_outlives_the_daemon(mode: &str) {
    let mut toold = Toold::start_with_config(&format!("[sandbox]\nmode = \"{mode}\"\n"));
    let projects = toold.projects();
    let created = toold
        .post(
            "/v1/sessions",
            &json!({"working_directory": projects, "permission_mode": "workspace_write"}),
        )
        .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let calls = json!({"calls": [
        {"id": "a", "name": "bash", "input": {"command": "sleep 300", "run_in_background": true}},
        {"id": "b", "name": "bash", "input": {"command": "sleep 301 & sleep 302 & wait", "run_in_background": true}},
    ]});
    let started = toold
        .post(&format!("/v1/sessions/{session}/batches"), &calls)
        .await;
    for result in started.body["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], false, "{result}");
        assert_eq!(result["metadata"]["sandbox"], mode, "{result}");
    }
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let sandboxed = loop {
        let found = descendants(toold.pid() as i32);
        // The spawner (under bwrap two bwrap processes too), two shells and three sleeps.
        if found.len() >= 5 || tokio::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert!(sandboxed.len() >= 5, "{mode}: {sandboxed:?}");
    toold.kill();
    for pid in sandboxed {
        assert!(
            wait_gone(pid).await,
            "{mode}: process {pid} outlived the daemon"
        );
    }
    assert!(process_gone(toold.pid() as i32));
}

#[tokio::test]
async fn kill_9_of_the_daemon_leaves_no_sandbox_process_under_bubblewrap() {
    nothing_outlives_the_daemon("bwrap").await;
}

#[tokio::test]
async fn kill_9_of_the_daemon_leaves_no_sandbox_process_under_landlock() {
    nothing_outlives_the_daemon("landlock").await;
}
