//! `[permissions]`: the server's rules and how long an approval waits (DESIGN §5). Parsing the
//! rules is [`super::rules`]'s; they are checked at start-up against the tool registry.

use std::time::Duration;

use serde::{Deserialize, Serialize};

/// Server-wide rules; sessions may add their own, never widen these.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct PermissionSettings {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
    /// How long an approval waits for a person before it denies, in milliseconds.
    pub approval_timeout_ms: u64,
}

impl Default for PermissionSettings {
    fn default() -> PermissionSettings {
        PermissionSettings {
            allow: Vec::new(),
            deny: Vec::new(),
            ask: Vec::new(),
            approval_timeout_ms: 60_000,
        }
    }
}

impl PermissionSettings {
    pub fn approval_timeout(&self) -> Duration {
        Duration::from_millis(self.approval_timeout_ms)
    }
}
