//! The real `toold` binary, spawned on port 0 over a test's own directory (`data/`, and
//! `projects/` as the allowed root), with none of the caller's `TOOLD_*` settings; the HTTP
//! and gRPC areas (and the fleet tests) wrap it in their own clients.
//!
//! `TOOLD_TEST_SANDBOX=MODE` (`auto`, `bwrap`, `landlock`, `off`) passes `--sandbox MODE` to
//! every daemon spawned here (the suite run with a sandbox that cannot work must fail, not
//! hang: docs/performance.md, "The tests with every sandbox broken").

use std::io::BufReader;
use std::path::Path;
use std::process::{Child, Command, ExitStatus, Stdio};

use super::deadline::{STEP, first_line_within, wait_within};

/// A running daemon, killed (`kill -9`) when dropped.
pub struct DaemonProcess {
    child: Child,
    /// `http://127.0.0.1:PORT`, from the line the daemon prints once it listens.
    pub base: String,
}

/// `toold serve` on port 0 over `dir` (`dir/data`, allowed root `dir/projects`), with
/// `extra` flags; nothing spawned yet.
pub fn command(dir: &Path, extra: &[&str]) -> Command {
    command_on(dir, "127.0.0.1:0", extra)
}

/// [`command`] listening on `listen` (a restarted daemon's old address, say).
pub fn command_on(dir: &Path, listen: &str, extra: &[&str]) -> Command {
    let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
    command
        .args(["serve", "--listen", listen, "--data-dir"])
        .arg(dir.join("data"))
        .arg("--allowed-root")
        .arg(dir.join("projects"))
        .args(sandbox_flag())
        .args(extra);
    without_settings(&mut command);
    command
}

/// `--sandbox MODE` when `TOOLD_TEST_SANDBOX` names one (for every daemon the tests spawn,
/// `toold mcp` included), else nothing.
pub fn sandbox_flag() -> Vec<String> {
    match std::env::var("TOOLD_TEST_SANDBOX") {
        Ok(mode) if !mode.is_empty() => vec!["--sandbox".to_owned(), mode],
        _ => Vec::new(),
    }
}

/// Keeps the caller's `TOOLD_*` settings from `command` (a developer's TOOLD_DATABASE_URL
/// would point every test daemon at one database); the tests' own variables are not settings.
pub fn without_settings(command: &mut Command) {
    for (name, _) in std::env::vars_os() {
        let is_setting = name
            .to_str()
            .is_some_and(|name| name.starts_with("TOOLD_") && !name.starts_with("TOOLD_TEST_"));
        if is_setting {
            command.env_remove(&name);
        }
    }
}

impl DaemonProcess {
    /// Starts the daemon over `dir` (creating `dir/projects`) and waits until it listens.
    pub fn start(dir: &Path, extra: &[&str]) -> DaemonProcess {
        DaemonProcess::start_on(dir, "127.0.0.1:0", extra)
    }

    /// [`DaemonProcess::start`] listening on `listen`.
    pub fn start_on(dir: &Path, listen: &str, extra: &[&str]) -> DaemonProcess {
        DaemonProcess::start_command(dir, command_on(dir, listen, extra))
    }

    /// [`DaemonProcess::start`] with `env` added to the daemon's environment (the standard
    /// `OTEL_*` variables, say).
    pub fn start_with_env(dir: &Path, extra: &[&str], env: &[(&str, &str)]) -> DaemonProcess {
        let mut command = command(dir, extra);
        command.envs(env.iter().copied());
        DaemonProcess::start_command(dir, command)
    }

    fn start_command(dir: &Path, mut command: Command) -> DaemonProcess {
        std::fs::create_dir_all(dir.join("projects")).unwrap();
        let mut child = command
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("toold starts");
        let stdout = BufReader::new(child.stdout.take().unwrap());
        let Some(Ok(line)) = first_line_within(stdout, STEP) else {
            let _ = child.kill();
            let _ = child.wait();
            panic!("toold did not say where it listens within {STEP:?}");
        };
        let base = line
            .trim()
            .strip_prefix("toold listening on ")
            .unwrap_or_else(|| panic!("unexpected first line {line:?}"))
            .to_owned();
        DaemonProcess { child, base }
    }

    /// The daemon's process id (to find its children in `/proc`).
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn signal_terminate(&self) {
        // SAFETY: kill(2) on our own child's pid; no memory is involved.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
    }

    /// Waits for the process to exit (after a signal); fails the test after a minute.
    pub fn wait(&mut self) -> ExitStatus {
        wait_within(&mut self.child, STEP, "the daemon")
    }

    /// Stops the daemon with `kill -9` and waits for it.
    pub fn kill(&mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for DaemonProcess {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
