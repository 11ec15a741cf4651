//! `[mcp]` settings: what the MCP door (DESIGN §8) gives the toold sessions it creates itself
//! (one per legacy MCP session, one default session per caller) and which browser origins it
//! accepts.
//!
//! `toold mcp`'s flags ([`McpFlags`]) override the same two session settings for its one
//! session.
//!
//! Only the shape and the defaults live here; `server` turns them into the door's own
//! settings (`api::McpDoorSettings`), so the door need not know the settings file.

use std::path::PathBuf;

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
