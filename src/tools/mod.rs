//! The built-in tools, and the registry that holds them.
//!
//! Each tool is a file (or a folder for a family) that builds its [`ToolSpec`] with full
//! metadata and implements [`Tool`]. [`builtin_registry`] registers them all; names are
//! snake_case and the capitalised names models know (`Read`, `Bash`, …) are aliases. Shared
//! helpers: [`paths`] (resolution and the workspace boundary). Tools never reach into the
//! store or the network doors; what they need arrives in [`ToolDeps`].
//!
//! [`ToolSpec`]: crate::tool::ToolSpec
//! [`Tool`]: crate::tool::Tool

mod files;
pub mod input;
mod misc;
pub mod paths;
mod search;
pub mod settings;
mod shell;

use std::sync::Arc;

use crate::dispatch::ResultStore;
use crate::registry::{RegistryError, ToolRegistry};
pub use files::{EditFile, NotebookEdit, ReadFile, TextEditor, WriteFile};
pub use misc::{
    AddressPolicy, BlockedAddress, RUNTIME_SETTINGS, RuntimeSettingSpec, WebFetchTool,
    runtime_setting_u64, web_fetch_host,
};
pub use search::{GlobSearch, GrepSearch};
pub use settings::{SkillSettings, WebFetchSettings};
pub use shell::BackgroundShells;

/// What the built-in tools need from the rest of the daemon.
#[derive(Clone)]
pub struct ToolDeps {
    /// Where offloaded outputs live (`read_result` pages through them).
    pub results: Arc<dyn ResultStore>,
    pub web_fetch: WebFetchSettings,
    pub skills: SkillSettings,
    /// Background shell tasks; whoever closes sessions keeps this to stop a session's tasks
    /// (`BackgroundShells::kill_session`).
    pub shells: Arc<BackgroundShells>,
}

/// A registry with every built-in tool.
pub fn builtin_registry(deps: &ToolDeps) -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    files::register(&mut registry)?;
    misc::register(&mut registry, deps)?;
    search::register(&mut registry)?;
    shell::register(&mut registry, &deps.shells)?;
    Ok(registry)
}
