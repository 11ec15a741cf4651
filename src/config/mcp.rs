//! `[mcp]` settings: what the MCP door (DESIGN §8) gives the toold sessions it creates itself
//! (one default session per caller, shared by its legacy MCP sessions) and which browser
//! origins it accepts.
//!
//! `toold mcp`'s flags ([`McpFlags`]) override the same two session settings for its one
//! session. `toold mcp` serves the directory it was started in (the MCP client's working
//! directory, its project) unless `--working-directory` or `[mcp] working_directory` names
//! another, and keeps its data outside it: [`stdio_state_dir`] unless `--data-dir`,
//! `TOOLD_DATA_DIR` or `[server] data_dir` names one (docs/decisions/mcp.md).
//!
//! Only the shape and the defaults live here; `server` turns them into the door's own
//! settings (`api::McpDoorSettings`), so the door need not know the settings file.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::permission::PermissionLevel;

/// `[mcp]` in the settings file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpSettings {
    /// The working directory of the sessions the MCP door creates; empty: a fresh workspace
    /// per session, as for `POST /v1/sessions` without one.
    pub working_directory: PathBuf,
    /// The permission mode of the sessions the MCP door creates.
    pub permission_mode: PermissionLevel,
    /// Browser origins accepted besides none and the listener's own; any other is refused
    /// with 403 (DNS rebinding).
    pub allowed_origins: Vec<String>,
}

impl Default for McpSettings {
    fn default() -> Self {
        McpSettings {
            working_directory: PathBuf::new(),
            permission_mode: PermissionLevel::WorkspaceWrite,
            allowed_origins: Vec::new(),
        }
    }
}

/// `toold mcp` flags that override `[mcp]` for its one session.
#[derive(Clone, Debug, Default)]
pub struct McpFlags {
    pub working_directory: Option<PathBuf>,
    pub permission_mode: Option<PermissionLevel>,
}

impl McpFlags {
    /// Flags win over the file and the environment.
    pub fn apply(self, settings: &mut McpSettings) {
        if let Some(dir) = self.working_directory {
            settings.working_directory = dir;
        }
        if let Some(mode) = self.permission_mode {
            settings.permission_mode = mode;
        }
    }
}

/// Where `toold mcp` keeps its data by default: `$XDG_STATE_HOME/toold` (an absolute
/// `XDG_STATE_HOME`, as the XDG base directory specification asks), else
/// `$HOME/.local/state/toold`; `None` without either (the daemon's default then applies).
pub fn stdio_state_dir() -> Option<PathBuf> {
    let var = |name| std::env::var_os(name).map(PathBuf::from);
    state_dir_from(var("XDG_STATE_HOME"), var("HOME"))
}

fn state_dir_from(xdg_state_home: Option<PathBuf>, home: Option<PathBuf>) -> Option<PathBuf> {
    let absolute = |dir: &PathBuf| dir.is_absolute();
    xdg_state_home
        .filter(absolute)
        .map(|dir| dir.join("toold"))
        .or_else(|| {
            home.filter(absolute)
                .map(|home| home.join(Path::new(".local/state/toold")))
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_state_dir_is_xdgs_then_homes() {
        let some = |dir: &str| Some(PathBuf::from(dir));
        assert_eq!(state_dir_from(some("/s"), some("/h")), some("/s/toold"));
        assert_eq!(
            state_dir_from(some("relative"), some("/h")),
            some("/h/.local/state/toold")
        );
        assert_eq!(
            state_dir_from(None, some("/h")),
            some("/h/.local/state/toold")
        );
        assert_eq!(state_dir_from(None, some("h")), None);
        assert_eq!(state_dir_from(None, None), None);
    }
}
