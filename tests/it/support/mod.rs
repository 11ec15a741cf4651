//! What several test areas share, written once: the real daemon spawned on port 0
//! (`daemon`), the Postgres test server and its throwaway schemas (`postgres`), a child
//! process for a test that needs its own environment (`child_process`), the CI's Python venv
//! (`python`), a workspace beside a directory outside it (`workspace`), the real MCP servers
//! the bridge mounts and `/proc` (`mcp_servers`), and test tools.

pub mod child_process;
pub mod daemon;
pub mod deadline;
pub mod mcp_servers;
pub mod postgres;
pub mod python;
pub mod registry;
pub mod workspace;

mod deferred_echo;

pub use deferred_echo::DeferredEcho;

/// The first `name` on `PATH`, if any.
pub fn tool_on_path(name: &str) -> Option<std::path::PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|candidate| candidate.is_file())
}

/// Whether this is a CI run (`CI` set, and not to `""`, `0` or `false`): there every tool
/// the tests need is installed (`.ci/run`), so a test that would skip fails instead.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|ci| !matches!(ci.as_str(), "" | "0" | "false"))
}

/// The skips of this run, printed together when the test process exits.
static SKIPPED: std::sync::Mutex<Vec<String>> = std::sync::Mutex::new(Vec::new());

/// A test that cannot run here says so, and every skip goes through here: in CI ([`in_ci`])
/// it fails, since CI installs everything; elsewhere it prints `SKIPPED <test>: <why>` on
/// stderr (seen with `--nocapture`) and the test itself then returns. The skips are also
/// counted and listed on stderr when the test binary exits, so a run that passed says what it
/// did not check.
pub fn skip_unless_ci(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    if in_ci() {
        panic!("{test} cannot run: {why} (CI installs what the tests need)");
    }
    eprintln!("SKIPPED {test}: {why}");
    let mut skipped = SKIPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    if skipped.is_empty() {
        // SAFETY: registers a plain `extern "C"` function, called once at exit.
        unsafe { libc::atexit(print_skipped) };
    }
    skipped.push(format!("{test}: {why}"));
}

/// The exit handler [`skip_unless_ci`] registers: the list, written straight to stderr (the
/// test harness's output capture is gone by then).
extern "C" fn print_skipped() {
    let skipped = SKIPPED
        .lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    let mut text = format!(
        "\n{} test(s) SKIPPED (a tool they need is missing; CI runs them):\n",
        skipped.len()
    );
    for line in skipped.iter() {
        text.push_str(&format!("  SKIPPED {line}\n"));
    }
    // SAFETY: write(2) of a buffer we own to the process's stderr.
    unsafe { libc::write(2, text.as_ptr().cast(), text.len()) };
}
