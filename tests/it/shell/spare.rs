//! The warm spare (issue 19's speed): a call run on the session's spare shell sees what a
//! freshly started shell sees (environment, `$PWD`, its own process group and session,
//! limits, signals, descriptors), unsandboxed and in either sandbox; the spare is gone when
//! its session closes and when the daemon is killed with `kill -9`.

use std::time::Duration;

use serde_json::json;
use toold::permission::PermissionLevel;
use toold::tools::SandboxMode;

use crate::http::harness::Toold;
use crate::shell::harness::{PATIENCE, Shell, process_gone, wait_gone};
use crate::shell::limits::descendants;
use crate::shell::session_sandbox::{Sandbox, script};

/// What the shell that runs `bash script.sh` looks like from the script (its parent).
const PROBE: &str = "shell=$PPID\n\
    stat=$(cat /proc/$shell/stat); set -- ${stat##*) }\n\
    echo \"group-is-shell=$([ \"$3\" = \"$shell\" ] && echo yes) session-is-shell=$([ \"$4\" = \"$shell\" ] && echo yes)\"\n\
    echo \"pwd=$PWD\"\n\
    grep -E '^(SigBlk|SigIgn|SigCgt)' /proc/$shell/status\n\
    ls /proc/$shell/fd | sort -n | tr '\\n' ' '; echo\n\
    cat /proc/$shell/limits\n\
    echo umask=$(umask)\n\
    env | sort\n";

/// Waits until the session has a spare; its pid.
async fn spare_pid(shell: &Shell) -> i32 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Some(pid) = shell.shells.spare_pid(shell.session.id()) {
            return pid as i32;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no spare was started"
        );
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// The spare's pid as its own pid namespace numbers it (the last `NSpid` field).
fn inner_pid(pid: i32) -> String {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("NSpid:")).unwrap();
    line.split_whitespace().last().unwrap().to_owned()
}

/// Runs the probe fresh (the session's first call) and on the spare (its second), and
/// compares; the second call must have run on the spare.
async fn the_spare_looks_fresh(shell: &Shell) {
    std::fs::write(shell.path("script.sh"), PROBE).unwrap();
    let fresh = shell.bash("bash script.sh").await;
    assert!(!fresh.is_error, "{}", fresh.output);
    assert!(
        fresh
            .output
            .contains("group-is-shell=yes session-is-shell=yes"),
        "{}",
        fresh.output
    );
    let spare = spare_pid(shell).await;
    let spare_inside = inner_pid(spare);
    let warm = script(shell, &format!("echo ran-on=$PPID\n{PROBE}")).await;
    assert!(!warm.is_error, "{}", warm.output);
    let (ran_on, probe) = warm.output.split_once('\n').unwrap();
    assert_eq!(
        ran_on,
        format!("ran-on={spare_inside}"),
        "the call ran on the spare"
    );
    assert_eq!(probe, fresh.output, "a spare looks like a fresh shell");
    assert!(
        wait_gone(spare).await,
        "the used spare is gone after its call"
    );
    // The next spare is a new process.
    let next = spare_pid(shell).await;
    assert_ne!(next, spare);
}

#[tokio::test]
async fn a_call_on_the_spare_sees_what_a_fresh_shell_sees_unsandboxed() {
    the_spare_looks_fresh(&Shell::new()).await;
}

#[tokio::test]
async fn a_call_on_the_spare_sees_what_a_fresh_shell_sees_under_bubblewrap() {
    the_spare_looks_fresh(&Sandbox::with_mode(SandboxMode::Bwrap).session()).await;
}

#[tokio::test]
async fn a_call_on_the_spare_sees_what_a_fresh_shell_sees_under_landlock() {
    the_spare_looks_fresh(&Sandbox::with_mode(SandboxMode::Landlock).session()).await;
}

#[tokio::test]
async fn a_spare_follows_the_directory_and_the_confinement() {
    let sandbox = Sandbox::with_mode(SandboxMode::Bwrap);
    let workspace = tempfile::tempdir_in(sandbox.data.path().join("workspaces")).unwrap();
    // Full access, so that a call naming a path outside the workspace runs (unsandboxed).
    let shell = Shell::with_shells(
        PermissionLevel::DangerFullAccess,
        sandbox.shells.clone(),
        workspace,
    );
    std::fs::create_dir(shell.path("sub")).unwrap();
    std::fs::write(shell.path("sub/script.sh"), "echo ran-on=$PPID\n").unwrap();
    assert!(!shell.bash("cd sub").await.is_error);
    // The spare started beside `cd sub` waited in the workspace; the one after it is in sub.
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let sub = shell.path("sub").canonicalize().unwrap();
    let spare = loop {
        let spare = spare_pid(&shell).await;
        if std::fs::read_link(format!("/proc/{spare}/cwd")).is_ok_and(|cwd| cwd == sub) {
            break spare;
        }
        assert!(tokio::time::Instant::now() < deadline, "no spare in sub");
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    let spare_inside = inner_pid(spare);
    let moved = shell.bash("bash script.sh; pwd").await;
    assert_eq!(
        moved.output,
        format!("ran-on={spare_inside}\n{}\n", sub.display())
    );
    // A full-access call runs unsandboxed: the sandboxed spare must not take it, and the
    // sandboxed call after it must not take the unsandboxed spare made beside it.
    let ours = std::fs::read_link("/proc/self/ns/pid").unwrap();
    let full = shell.bash("readlink /proc/self/ns/pid").await;
    assert_eq!(full.output, format!("{}\n", ours.display()), "unsandboxed");
    std::fs::write(shell.path("sub/ns.sh"), "readlink /proc/self/ns/pid\n").unwrap();
    spare_pid(&shell).await;
    let confined = shell.bash("bash ns.sh").await;
    assert!(!confined.is_error, "{}", confined.output);
    assert_ne!(
        confined.output, full.output,
        "a sandboxed call ran unsandboxed"
    );
}

#[tokio::test]
async fn a_spare_is_gone_when_its_session_closes() {
    for shell in [
        Shell::new(),
        Sandbox::with_mode(SandboxMode::Bwrap).session(),
        Sandbox::with_mode(SandboxMode::Landlock).session(),
    ] {
        assert!(!shell.bash("true").await.is_error);
        let spare = spare_pid(&shell).await;
        assert!(!process_gone(spare));
        shell.shells.kill_session(shell.session.id()).await;
        assert!(process_gone(spare), "the closed session's spare still runs");
        assert_eq!(shell.shells.spare_pid(shell.session.id()), None);
    }
}

/// Pids below the daemon running a spare's wrapper.
fn spares_of(daemon: i32) -> Vec<i32> {
    descendants(daemon)
        .into_iter()
        .filter(|pid| {
            std::fs::read(format!("/proc/{pid}/cmdline"))
                .is_ok_and(|cmdline| String::from_utf8_lossy(&cmdline).contains(". /dev/fd/4"))
        })
        .collect()
}

async fn no_spare_outlives_the_daemon(config: &str) {
    let mut toold = Toold::start_with_config(config);
    let projects = toold.projects();
    let session = toold
        .session_with(&json!({"working_directory": projects, "permission_mode": "workspace_write"}))
        .await;
    let ran = toold
        .call_one(&session, "bash", json!({"command": "echo hi"}))
        .await;
    assert_eq!(ran["is_error"], false, "{ran}");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let spares = loop {
        let found = spares_of(toold.pid() as i32);
        if !found.is_empty() || tokio::time::Instant::now() > deadline {
            break found;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    assert_eq!(
        spares.len(),
        1,
        "{config}: one spare per session: {spares:?}"
    );
    toold.kill();
    assert!(
        wait_gone(spares[0]).await,
        "{config}: the spare outlived the daemon"
    );
}

#[tokio::test]
async fn kill_9_of_the_daemon_leaves_no_spare() {
    for config in [
        "[sandbox]\nmode = \"off\"\nallow_unsandboxed = true\n",
        "[sandbox]\nmode = \"bwrap\"\n",
        "[sandbox]\nmode = \"landlock\"\n",
    ] {
        no_spare_outlives_the_daemon(config).await;
    }
}
