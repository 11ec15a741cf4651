//! One sandbox per session (issue 19): two sessions' sandboxes cannot see or signal each
//! other's processes or read each other's workspaces; a call leaves nothing for the next one
//! but its working directory and its background shells; a spawner killed mid-call fails that
//! call clearly and the next call starts a new one; a spawner ends with its session; a call
//! dropped while its command starts leaves nothing running; commands get SIGPIPE at its
//! default. Each under bubblewrap and under Landlock where the sandbox matters.

use std::sync::Arc;

use serde_json::json;
use toold::permission::PermissionLevel;
use toold::tools::{
    BackgroundShells, SandboxCapability, SandboxMode, SandboxSettings, ShellSandbox, SpillSettings,
};

use crate::shell::harness::{Shell, process_gone, wait_gone};

/// Shells of one daemon-like data directory (outside /tmp) with `[sandbox]` as `settings`.
pub struct Sandbox {
    pub shells: Arc<BackgroundShells>,
    pub data: tempfile::TempDir,
}

impl Sandbox {
    pub fn new(settings: SandboxSettings) -> Sandbox {
        let data = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).expect("a data directory");
        let sandbox = ShellSandbox::resolve(&settings, &SandboxCapability::probe(), data.path());
        assert!(sandbox.confines(), "{}", sandbox.describe());
        let shells = Arc::new(BackgroundShells::with_settings(
            SpillSettings {
                directory: data.path().to_owned(),
                ..SpillSettings::default()
            },
            sandbox,
        ));
        std::fs::create_dir_all(data.path().join("workspaces")).unwrap();
        Sandbox { shells, data }
    }

    pub fn with_mode(mode: SandboxMode) -> Sandbox {
        Sandbox::new(SandboxSettings {
            mode,
            ..SandboxSettings::default()
        })
    }

    /// A `workspace_write` session with a workspace in the data directory.
    pub fn session(&self) -> Shell {
        let workspace = tempfile::tempdir_in(self.data.path().join("workspaces")).unwrap();
        Shell::with_shells(
            PermissionLevel::WorkspaceWrite,
            self.shells.clone(),
            workspace,
        )
    }
}

/// Runs `script` as `bash script.sh` from the session's workspace (so the static workspace
/// check lets it through to the sandbox, like a path computed at run time).
pub async fn script(shell: &Shell, script: &str) -> toold::tool::ToolResult {
    std::fs::write(shell.path("script.sh"), script).unwrap();
    shell.bash("bash script.sh").await
}

async fn sessions_are_isolated(mode: SandboxMode) {
    let sandbox = Sandbox::with_mode(mode);
    let a = sandbox.session();
    let b = sandbox.session();
    std::fs::write(a.path("secret.txt"), "a's secret\n").unwrap();
    let started = a
        .call(
            "bash",
            json!({"command": "sleep 300", "run_in_background": true}),
        )
        .await;
    assert!(!started.is_error, "{}", started.output);
    let pid = started.metadata["pid"].as_i64().unwrap();
    let secret = a.path("secret.txt");
    let attempt = script(
        &b,
        &format!(
            "cat {secret}; kill -KILL {pid} && echo signalled; \
             for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done > seen.txt\n",
            secret = secret.display()
        ),
    )
    .await;
    assert!(
        !attempt.output.contains("a's secret"),
        "{mode:?}: {}",
        attempt.output
    );
    assert!(
        !attempt.output.contains("signalled"),
        "{mode:?}: {}",
        attempt.output
    );
    assert!(
        !process_gone(pid as i32),
        "{mode:?}: a's process was killed"
    );
    if mode == SandboxMode::Bwrap {
        // Its own pid namespace: the other session's processes are not there to see.
        let seen = std::fs::read_to_string(b.path("seen.txt")).unwrap();
        assert!(!seen.contains("sleep 300"), "{seen}");
    }
}

#[tokio::test]
async fn sessions_cannot_see_signal_or_read_each_other_under_bubblewrap() {
    sessions_are_isolated(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn sessions_cannot_signal_or_read_each_other_under_landlock() {
    sessions_are_isolated(SandboxMode::Landlock).await;
}

async fn nothing_leaks_but_the_directory_and_background_shells(mode: SandboxMode) {
    let sandbox = Sandbox::with_mode(mode);
    let shell = sandbox.session();
    let background = shell
        .call(
            "bash",
            json!({"command": "exec -a toold-kept sleep 300", "run_in_background": true}),
        )
        .await;
    assert!(!background.is_error, "{}", background.output);
    std::fs::write(
        shell.path("leave.sh"),
        "setsid sleep 301 >/dev/null 2>&1 < /dev/null & echo $! > escaped.pid\nsleep 302 &\n",
    )
    .unwrap();
    let first = shell
        .bash("export LEAKED=1; mkdir -p sub; (cd sub; export INNER=1); bash leave.sh; cd sub")
        .await;
    assert!(!first.is_error, "{}", first.output);
    // Read from a script, which inherits the calling shell's environment, so that the
    // static check sees no expansion it cannot place.
    std::fs::write(
        shell.path("sub/check.sh"),
        "echo \"leaked=${LEAKED:-no} inner=${INNER:-no}\"\n\
         kill -0 $(cat ../escaped.pid) 2>/dev/null && echo escaped-alive\n\
         for p in /proc/[0-9]*; do tr '\\0' ' ' < $p/cmdline 2>/dev/null; echo; done > ../seen.txt\n",
    )
    .unwrap();
    let next = shell.bash("bash check.sh; pwd").await;
    assert!(!next.is_error, "{}", next.output);
    assert!(
        next.output.contains("leaked=no inner=no"),
        "{}",
        next.output
    );
    assert!(
        next.output
            .contains(&format!("{}/sub", shell.root().display())),
        "the documented working directory persists: {}",
        next.output
    );
    assert!(!next.output.contains("escaped-alive"), "{}", next.output);
    let seen = std::fs::read_to_string(shell.path("seen.txt")).unwrap();
    assert!(
        !seen.contains("sleep 301") && !seen.contains("sleep 302"),
        "{seen}"
    );
    if mode == SandboxMode::Bwrap {
        assert!(
            seen.contains("toold-kept"),
            "the background shell is seen: {seen}"
        );
    }
}

#[tokio::test]
async fn state_and_processes_do_not_leak_into_the_next_call_under_bubblewrap() {
    nothing_leaks_but_the_directory_and_background_shells(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn state_and_processes_do_not_leak_into_the_next_call_under_landlock() {
    nothing_leaks_but_the_directory_and_background_shells(SandboxMode::Landlock).await;
}

/// The host pid of the session's spawner (`toold sandbox-spawner … --session ID`), not
/// counting a child it forked that has not exec'd yet (it may be starting the session's
/// spare shell while this looks).
pub fn spawner_pids(session_id: &str) -> Vec<i32> {
    let found = spawner_like(session_id);
    found
        .iter()
        .copied()
        .filter(|pid| !parent_of(*pid).is_some_and(|parent| found.contains(&parent)))
        .collect()
}

fn parent_of(pid: i32) -> Option<i32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat.rsplit_once(')')?
        .1
        .split_whitespace()
        .nth(1)?
        .parse()
        .ok()
}

/// Processes whose command line is the session's spawner's.
fn spawner_like(session_id: &str) -> Vec<i32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        let args: Vec<&[u8]> = cmdline.split(|&b| b == 0).collect();
        let is_spawner = args.get(1) == Some(&b"sandbox-spawner".as_slice())
            && args
                .windows(2)
                .any(|w| w[0] == b"--session" && w[1] == session_id.as_bytes());
        if is_spawner && !process_gone(pid) {
            found.push(pid);
        }
    }
    found
}

async fn a_dead_spawner_fails_its_call_and_the_next_starts_anew(mode: SandboxMode) {
    let sandbox = Sandbox::with_mode(mode);
    let shell = sandbox.session();
    assert!(!shell.bash("true").await.is_error);
    let spawner = spawner_pids(shell.session.id());
    assert_eq!(spawner.len(), 1, "one spawner for the session: {spawner:?}");
    let killer = async {
        tokio::time::sleep(std::time::Duration::from_millis(500)).await;
        // SAFETY: kill(2) on the spawner's pid.
        unsafe { libc::kill(spawner[0], libc::SIGKILL) };
    };
    let (in_flight, ()) = tokio::join!(shell.bash("sleep 30"), killer);
    assert!(in_flight.is_error, "{}", in_flight.output);
    assert!(
        in_flight.output.contains("spawner") && in_flight.output.contains("next call"),
        "{}",
        in_flight.output
    );
    let next = shell.bash("echo again").await;
    assert!(!next.is_error, "{}", next.output);
    assert_eq!(next.output.trim(), "again");
    let replaced = spawner_pids(shell.session.id());
    assert!(
        replaced.len() == 1 && replaced[0] != spawner[0],
        "{replaced:?}"
    );
}

#[tokio::test]
async fn killing_the_spawner_mid_call_fails_that_call_and_the_next_works_under_bubblewrap() {
    a_dead_spawner_fails_its_call_and_the_next_starts_anew(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn killing_the_spawner_mid_call_fails_that_call_and_the_next_works_under_landlock() {
    a_dead_spawner_fails_its_call_and_the_next_starts_anew(SandboxMode::Landlock).await;
}

/// A command starts with SIGPIPE at its default (Rust ignores it in the daemon and in the
/// spawner, and an ignored signal would stay ignored across exec: `yes | head` would not end
/// by the signal).
async fn sigpipe_is_at_its_default(shell: &Shell) {
    let status = script(shell, "grep SigIgn /proc/self/status\n").await;
    let mask = status
        .output
        .trim()
        .strip_prefix("SigIgn:\t")
        .and_then(|hex| u64::from_str_radix(hex, 16).ok())
        .unwrap_or_else(|| panic!("{}", status.output));
    assert_eq!(mask & (1 << (libc::SIGPIPE - 1)), 0, "{}", status.output);
}

#[tokio::test]
async fn commands_start_with_sigpipe_at_its_default_unsandboxed_and_in_either_sandbox() {
    let unsandboxed = Shell::new();
    sigpipe_is_at_its_default(&unsandboxed).await;
    for mode in [SandboxMode::Bwrap, SandboxMode::Landlock] {
        sigpipe_is_at_its_default(&Sandbox::with_mode(mode).session()).await;
    }
}

#[tokio::test]
async fn a_spawner_ends_with_its_session_closed_or_dropped() {
    let sandbox = Sandbox::with_mode(SandboxMode::Bwrap);
    let closed = sandbox.session();
    assert!(!closed.bash("true").await.is_error);
    let spawner = spawner_pids(closed.session.id());
    assert_eq!(spawner.len(), 1, "{spawner:?}");
    // The session-close path: gone when kill_session returns.
    sandbox.shells.kill_session(closed.session.id()).await;
    assert!(
        process_gone(spawner[0]),
        "the closed session's spawner still runs"
    );

    let dropped = sandbox.session();
    assert!(!dropped.bash("true").await.is_error);
    let spawner = spawner_pids(dropped.session.id());
    assert_eq!(spawner.len(), 1, "{spawner:?}");
    drop(dropped);
    // Dropped without closing: the next session's first call ends it.
    let other = sandbox.session();
    assert!(!other.bash("true").await.is_error);
    assert!(
        wait_gone(spawner[0]).await,
        "the dropped session's spawner still runs"
    );
}

/// Pids whose command line contains `marker`, from `/proc`.
fn running_with(marker: &str) -> Vec<i32> {
    std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|entry| {
            let pid = entry.file_name().to_string_lossy().parse::<i32>().ok()?;
            let cmdline = std::fs::read(entry.path().join("cmdline")).ok()?;
            let found = String::from_utf8_lossy(&cmdline).contains(marker);
            (found && !process_gone(pid)).then_some(pid)
        })
        .collect()
}

#[tokio::test]
async fn a_call_dropped_while_its_command_starts_leaves_nothing_running() {
    let sandbox = Sandbox::with_mode(SandboxMode::Bwrap);
    let shell = sandbox.session();
    assert!(!shell.bash("true").await.is_error);
    // The tool itself, not a batch (which runs on when its caller goes), dropped at various
    // points: before the spawner answered (it then kills the command itself) or after (the
    // call's guard kills the group).
    let bash = shell.registry.get("bash").unwrap().tool.clone();
    for delay_us in [0, 200, 1_000, 5_000] {
        let marker = format!("toold-dropped-{}-{delay_us}", std::process::id());
        let ctx = toold::tool::ToolContext::detached(shell.session.clone());
        let call = bash.execute(
            json!({"command": format!("exec -a {marker} sleep 300")}),
            &ctx,
        );
        let _ = tokio::time::timeout(std::time::Duration::from_micros(delay_us), call).await;
        // The spawner takes requests in order: once this call is answered, the dropped one
        // was started and, if abandoned, killed.
        assert!(!shell.bash("true").await.is_error);
        let deadline = tokio::time::Instant::now() + crate::shell::harness::PATIENCE;
        while !running_with(&marker).is_empty() && tokio::time::Instant::now() < deadline {
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
        assert!(running_with(&marker).is_empty(), "{marker} still runs");
    }
}
