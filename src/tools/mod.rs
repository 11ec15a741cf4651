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
    AddressPolicy, BlockedAddress, RUNTIME_SETTINGS, RuntimeSettingSpec, SkillSummary,
    WebFetchTool, runtime_setting_u64, skill_catalog,
};
pub use search::{GlobSearch, GrepSearch};
pub use settings::{SkillSettings, WebFetchSettings};
pub use shell::{
    BackgroundShells, CommandLine, SandboxCapability, SandboxKind, SandboxMode, SandboxSettings,
    ShellLimits, ShellSandbox, SimpleCommand, SpawnerChroot, SpillSettings, kill_group_inside,
    serve_spawner, simple_commands,
};

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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dispatch::InMemoryResultStore;

    /// The names and aliases models are trained on (issue 3), all present, nothing else.
    #[test]
    fn every_builtin_tool_and_alias_is_registered() {
        let skills = tempfile::tempdir().expect("skills dir");
        let skill = skills.path().join("demo");
        std::fs::create_dir(&skill).expect("skill folder");
        std::fs::write(skill.join("SKILL.md"), "---\ndescription: demo\n---\nbody").expect("skill");
        let deps = ToolDeps {
            results: Arc::new(InMemoryResultStore::default()),
            web_fetch: WebFetchSettings::default(),
            skills: SkillSettings {
                directories: vec![skills.path().to_path_buf()],
            },
            shells: Arc::default(),
        };
        let registry = builtin_registry(&deps).expect("the built-in registry builds");
        // The lists live with permission's test session, which compiles rules against them
        // (permission sits below the tools): one list, checked here against the registry.
        let names: Vec<&str> = registry.tools().map(|tool| tool.name()).collect();
        assert_eq!(names, crate::permission::test_session::BUILTIN_NAMES);
        let aliases: Vec<(&str, &str)> = registry.aliases().collect();
        assert_eq!(aliases, crate::permission::test_session::BUILTIN_ALIASES);
        for tool in registry.tools() {
            let spec = tool.spec();
            assert!(
                spec.description.len() > 80,
                "{} needs a real description",
                spec.name
            );
            assert!(
                tool.flattened_schema.get("additionalProperties").is_some()
                    || spec.name == "structured_output",
                "{} should say whether extra fields are allowed",
                spec.name
            );
        }
    }
}
