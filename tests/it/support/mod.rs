//! What several test areas share, written once: the real daemon spawned on port 0
//! (`daemon`), the Postgres test server and its throwaway schemas (`postgres`), a child
//! process for a test that needs its own environment (`child_process`), the CI's Python venv
//! (`python`), a workspace beside a directory outside it (`workspace`), the real MCP servers
//! the bridge mounts and `/proc` (`mcp_servers`), and test tools.

pub mod child_process;
pub mod daemon;
pub mod mcp_servers;
pub mod postgres;
pub mod python;
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

/// A test that cannot run here says so: in CI (`CI` set) it fails, since CI installs
/// everything; elsewhere it prints that it skipped and why (the test itself then returns).
pub fn skip_unless_ci(why: &str) {
    let test = std::thread::current()
        .name()
        .unwrap_or("this test")
        .to_owned();
    if std::env::var_os("CI").is_some() {
        panic!("{test} cannot run: {why} (CI installs what the tests need)");
    }
    eprintln!("SKIPPED {test}: {why}");
}
