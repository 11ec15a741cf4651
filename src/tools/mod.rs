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
pub mod paths;
pub mod settings;

use std::sync::Arc;

use crate::dispatch::ResultStore;
use crate::registry::{RegistryError, ToolRegistry};
pub use files::{EditFile, NotebookEdit, ReadFile, TextEditor, WriteFile};
pub use settings::{SkillSettings, WebFetchSettings};

/// What the built-in tools need from the rest of the daemon.
#[derive(Clone)]
pub struct ToolDeps {
    /// Where offloaded outputs live (`read_result` pages through them).
    pub results: Arc<dyn ResultStore>,
    pub web_fetch: WebFetchSettings,
    pub skills: SkillSettings,
}

/// A registry with every built-in tool.
pub fn builtin_registry(deps: &ToolDeps) -> Result<ToolRegistry, RegistryError> {
    let mut registry = ToolRegistry::new();
    let _ = deps;
    files::register(&mut registry)?;
    Ok(registry)
}
