//! A test that needs the process environment changed runs again in a child process of this
//! test binary, with the variables set on that child only. Tests share this process on
//! parallel threads: `std::env::set_var` here would reach every process the others spawn
//! (daemons, shells, hooks) and race with the C library's own `getenv` calls.

use crate::support::deadline::OutputWithin;
use std::process::Command;

/// Set (to `1`) in the child process, so the test knows it is the run that does the work.
const CHILD_MARKER: &str = "TOOLD_IT_CHILD_PROCESS";

/// The longest one test may take in its child process.
const CHILD_TEST: std::time::Duration = std::time::Duration::from_secs(300);

/// Whether this process is a child started by [`run_in_child_process`].
pub fn in_child_process() -> bool {
    std::env::var_os(CHILD_MARKER).is_some()
}

/// Runs the test at `path` (from the crate root, e.g. `shell::behaviour::name`) alone in a
/// child process of this binary with `env` added to its environment; fails unless it ran
/// and passed there.
#[track_caller]
pub fn run_in_child_process(path: &str, env: &[(&str, &str)]) {
    let binary = std::env::current_exe().expect("the test binary's path");
    let output = Command::new(binary)
        .args([path, "--exact", "--test-threads=1"])
        .env(CHILD_MARKER, "1")
        .envs(env.iter().copied())
        .output_within(CHILD_TEST, path)
        .expect("the test binary starts again");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success() && stdout.contains("test result: ok. 1 passed"),
        "{path} failed in its child process ({}):\n{stdout}\n{}",
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
}
