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
