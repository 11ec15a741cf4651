//! The shell tools: `bash` (alias `Bash`), `bash_output` (`BashOutput`), `write_stdin`
//! (`WriteStdin`) and `kill_shell` (`KillShell`).
//!
//! Layout: [`bash`] checks input and words results; [`process`] runs `bash -c` in its own
//! process group and stops the whole group; [`output`] keeps output under a memory cap;
//! [`background`] holds `run_in_background` tasks per session; [`tasks`] is the two tools that
//! read and stop them; [`crate::shell_syntax`] (a module of its own, because the permission
//! rules read the same lines) parses a command line with tree-sitter-bash and says whether it
//! is read-only, concurrency-safe and destructive, and which words may name files;
//! [`boundary`] judges those words against the workspace; [`limits`] holds `[limits]`'s
//! per-session shell slots; [`spill`] moves a foreground
//! output that outgrows memory to a file, which the offload phase streams into the store.
//!
//! [`spare`] keeps each session's next foreground shell started ahead of its call.
//!
//! [`sandbox`] confines every shell (bubblewrap, else Landlock) so that a command inside the
//! workspace needs only `workspace_write`.
//!
//! Deliberately absent: spilling background output (it is read incrementally and capped in memory), and
//! persistence of shell state other than the working directory.

mod background;
mod bash;
mod boundary;
mod direct;
mod group;
mod limits;
mod output;
mod process;
mod sandbox;
mod spare;
mod spill;
mod tasks;

use std::sync::Arc;

pub use crate::shell_syntax::{CommandLine, SimpleCommand, simple_commands};
pub use background::BackgroundShells;
pub use limits::ShellLimits;
pub use sandbox::{
    SandboxCapability, SandboxKind, SandboxMode, SandboxSettings, ShellSandbox, SpawnerChroot,
    kill_group_inside, serve_spawner,
};
pub use spill::SpillSettings;

use crate::registry::{RegistryError, ToolRegistry};
use crate::tool::{BuildError, Tool};

impl BackgroundShells {
    /// The four shell tools, sharing this set of background tasks. Whoever closes sessions
    /// keeps the same `Arc` to call [`BackgroundShells::kill_session`].
    pub fn tools(self: &Arc<Self>) -> Result<Vec<Arc<dyn Tool>>, BuildError> {
        Ok(vec![
            Arc::new(bash::BashTool::new(self.clone())?),
            Arc::new(tasks::BashOutputTool::new(self.clone())?),
            Arc::new(tasks::WriteStdinTool::new(self.clone())?),
            Arc::new(tasks::KillShellTool::new(self.clone())?),
        ])
    }
}

/// Registers the shell tools with a fresh set of background tasks.
///
/// The session-close path needs that set to stop a closed session's tasks; until the daemon
/// wires one in (building it with [`BackgroundShells::tools`] and keeping the `Arc`), tasks of
/// a session are stopped when its `SessionState` is dropped.
pub fn register(
    registry: &mut ToolRegistry,
    shells: &Arc<BackgroundShells>,
) -> Result<(), RegistryError> {
    // A spec that does not build is a programming error in this module; it surfaces as a
    // registration error rather than a panic.
    let tools = shells.tools()?;
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(())
}
