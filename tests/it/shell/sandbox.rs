//! The sandbox escape suite: from bash in a `workspace_write` session, writes to /etc, to
//! $HOME, to the workspace's parent, through a symlink and through /proc/self/root, and a
//! connection to a loopback port, all fail, while writes inside the workspace succeed; once
//! under bubblewrap and once under Landlock (bubblewrap not used). The commands come from a
//! script in the workspace, so the static workspace check lets them through to the sandbox,
//! as it would a path computed at run time.
//!
//! Both sandboxes must be available: CI installs bubblewrap (`.ci/run`), and the kernel must
//! offer Landlock; a machine without them fails here rather than skipping.

use std::net::TcpListener;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::json;
use toold::permission::PermissionLevel;
use toold::tool::{ErrorKind, ToolResult};
use toold::tools::{
    BackgroundShells, SandboxCapability, SandboxMode, SandboxSettings, ShellSandbox, SpillSettings,
};

use crate::shell::harness::{PATIENCE, Shell};

/// A data directory (outside /tmp, like a daemon's) holding the session's workspace, and a
/// directory outside both that escapes aim at.
struct Sandboxed {
    shell: Shell,
    outside: PathBuf,
    _data: tempfile::TempDir,
    _outside: tempfile::TempDir,
}

fn sandboxed(mode: SandboxMode) -> Sandboxed {
    sandboxed_with_network(mode, false, false)
}

/// A sandboxed session on a server whose `[sandbox] network` is `server`, the session having
/// asked for network access (`session`) or not.
fn sandboxed_with_network(mode: SandboxMode, server: bool, session: bool) -> Sandboxed {
    let base = Path::new(env!("CARGO_TARGET_TMPDIR"));
    let data = tempfile::tempdir_in(base).expect("a data directory");
    let outside = tempfile::tempdir_in(base).expect("a directory outside");
    let settings = SandboxSettings {
        mode,
        allow_unsandboxed: false,
        network: server,
        ..SandboxSettings::default()
    };
    let capability = SandboxCapability::probe();
    let sandbox = ShellSandbox::resolve(&settings, &capability, data.path());
    assert!(
        sandbox.confines(),
        "{mode:?} must be available for this suite: {} ({capability:?})",
        sandbox.describe()
    );
    let shells = Arc::new(BackgroundShells::with_settings(
        SpillSettings {
            directory: data.path().join("spill"),
            ..SpillSettings::default()
        },
        sandbox,
    ));
    std::fs::create_dir_all(data.path().join("workspaces")).unwrap();
    let workspace = tempfile::tempdir_in(data.path().join("workspaces")).unwrap();
    let shell = Shell::with_network(PermissionLevel::WorkspaceWrite, shells, workspace, session);
    Sandboxed {
        shell,
        outside: outside.path().canonicalize().unwrap(),
        _data: data,
        _outside: outside,
    }
}

impl Sandboxed {
    /// Runs `script` as `bash escape.sh` from the workspace.
    async fn script(&self, script: &str) -> ToolResult {
        std::fs::write(self.shell.path("escape.sh"), script).unwrap();
        let result = self.shell.bash("bash escape.sh").await;
        assert_ne!(
            result.error_kind,
            Some(ErrorKind::PermissionDenied),
            "a workspace_write session may run a script inside the workspace: {}",
            result.output
        );
        result
    }

    fn expected_sandbox(mode: SandboxMode) -> &'static str {
        match mode {
            SandboxMode::Bwrap => "bwrap",
            _ => "landlock",
        }
    }
}

fn unique(name: &str) -> String {
    format!("toold-escape-{name}-{}", std::process::id())
}

async fn escape_suite(mode: SandboxMode) {
    let sandbox = sandboxed(mode);
    let root = sandbox.shell.root().to_path_buf();

    let inside = sandbox.script("echo hi > inside.txt\n").await;
    assert!(!inside.is_error, "{}", inside.output);
    assert_eq!(
        inside.metadata.get("sandbox"),
        Some(&json!(Sandboxed::expected_sandbox(mode)))
    );
    assert_eq!(
        std::fs::read_to_string(root.join("inside.txt")).unwrap(),
        "hi\n"
    );

    let home = PathBuf::from(std::env::var("HOME").expect("HOME is set"));
    let parent = root.parent().unwrap().to_path_buf();
    std::os::unix::fs::symlink(&sandbox.outside, root.join("link")).unwrap();
    let targets: Vec<(&str, String, PathBuf)> = vec![
        (
            "/etc",
            format!("/etc/{}", unique("etc")),
            PathBuf::from(format!("/etc/{}", unique("etc"))),
        ),
        (
            "$HOME",
            format!("\"$HOME/{}\"", unique("home")),
            home.join(unique("home")),
        ),
        (
            "the workspace's parent",
            format!("../{}", unique("parent")),
            parent.join(unique("parent")),
        ),
        (
            "a symlink",
            "link/through-symlink".to_owned(),
            sandbox.outside.join("through-symlink"),
        ),
        (
            "/proc/self/root",
            format!("/proc/self/root{}/through-proc", sandbox.outside.display()),
            sandbox.outside.join("through-proc"),
        ),
    ];
    for (what, word, host_path) in targets {
        let result = sandbox.script(&format!("echo escaped > {word}\n")).await;
        assert!(
            result.is_error,
            "{mode:?}: writing to {what} succeeded: {}",
            result.output
        );
        assert!(
            !host_path.exists(),
            "{mode:?}: writing to {what} reached {}",
            host_path.display()
        );
    }

    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = sandbox
        .script(&format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected\n"
        ))
        .await;
    assert!(connect.is_error, "{mode:?}: {}", connect.output);
    assert!(
        !connect.output.contains("connected\n"),
        "{}",
        connect.output
    );
    assert!(
        listener.accept().is_err(),
        "{mode:?}: the loopback listener got a connection"
    );
}

#[tokio::test]
async fn escapes_fail_under_bubblewrap() {
    escape_suite(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn escapes_fail_under_landlock_without_bubblewrap() {
    escape_suite(SandboxMode::Landlock).await;
}

/// A background shell is confined the same way.
async fn background_is_confined(mode: SandboxMode) {
    let sandbox = sandboxed(mode);
    let target = format!("/etc/{}", unique("background"));
    std::fs::write(
        sandbox.shell.path("escape.sh"),
        format!("echo x > {target}; echo $? > status.txt.tmp; mv status.txt.tmp status.txt\n"),
    )
    .unwrap();
    let started = sandbox
        .shell
        .call(
            "bash",
            json!({"command": "bash escape.sh", "run_in_background": true}),
        )
        .await;
    assert!(!started.is_error, "{}", started.output);
    assert_eq!(
        started.metadata.get("sandbox"),
        Some(&json!(Sandboxed::expected_sandbox(mode)))
    );
    let status = sandbox.shell.path("status.txt");
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while !status.exists() {
        assert!(tokio::time::Instant::now() < deadline, "the task never ran");
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_ne!(std::fs::read_to_string(&status).unwrap().trim(), "0");
    assert!(!Path::new(&target).exists());
}

#[tokio::test]
async fn background_shells_are_confined_under_bubblewrap() {
    background_is_confined(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn background_shells_are_confined_under_landlock() {
    background_is_confined(SandboxMode::Landlock).await;
}

#[tokio::test]
async fn with_a_sandbox_a_write_inside_needs_only_workspace_write_and_cd_persists() {
    let sandbox = sandboxed(SandboxMode::Bwrap);
    let wrote = sandbox
        .shell
        .bash("mkdir -p sub && touch sub/made && cd sub")
        .await;
    assert!(!wrote.is_error, "{}", wrote.output);
    assert!(sandbox.shell.path("sub/made").exists());
    assert_eq!(
        wrote.metadata.get("cwd"),
        Some(&json!(sandbox.shell.path("sub").to_string_lossy()))
    );
    // Outside the workspace still needs full access, sandbox or not.
    let outside = sandbox.shell.bash("touch /etc/nope").await;
    assert_eq!(outside.error_kind, Some(ErrorKind::PermissionDenied));

    // Without a sandbox the same write inside needs full access.
    let plain = Shell::with_mode(PermissionLevel::WorkspaceWrite);
    let refused = plain.bash("touch made").await;
    assert_eq!(refused.error_kind, Some(ErrorKind::PermissionDenied));
}

/// Connects from a sandboxed shell to a loopback listener: whether it got through.
async fn connects(sandbox: &Sandboxed) -> bool {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = sandbox
        .script(&format!(
            "exec 3<>/dev/tcp/127.0.0.1/{port} && echo connected\n"
        ))
        .await;
    let accepted = listener.accept().is_ok();
    assert_eq!(
        accepted,
        connect.output.contains("connected\n"),
        "the shell and the listener agree: {}",
        connect.output
    );
    accepted
}

async fn network_needs_the_session_to_ask_and_the_server_to_allow(mode: SandboxMode) {
    for (server, session, expected) in [
        (true, true, true),
        (true, false, false),
        (false, true, false),
    ] {
        let sandbox = sandboxed_with_network(mode, server, session);
        assert_eq!(
            connects(&sandbox).await,
            expected,
            "{mode:?}: server network {server}, session asked {session}"
        );
    }
}

#[tokio::test]
async fn network_needs_the_session_to_ask_and_the_server_to_allow_under_bubblewrap() {
    network_needs_the_session_to_ask_and_the_server_to_allow(SandboxMode::Bwrap).await;
}

#[tokio::test]
async fn network_needs_the_session_to_ask_and_the_server_to_allow_under_landlock() {
    network_needs_the_session_to_ask_and_the_server_to_allow(SandboxMode::Landlock).await;
}
