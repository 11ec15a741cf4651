//! [`PermissionLevel`]: what a call requires and what a session's mode grants, ordered
//! `read_only` < `workspace_write` < `danger_full_access`.
//!
//! It is part of the contract because a tool's spec declares it (`required_permission(input)`
//! returns one); the permission module decides with it and re-exports it.

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

/// A permission mode, and what a call requires. Ordered: a mode grants every level below it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PermissionLevel {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

impl PermissionLevel {
    pub fn as_str(self) -> &'static str {
        match self {
            PermissionLevel::ReadOnly => "read_only",
            PermissionLevel::WorkspaceWrite => "workspace_write",
            PermissionLevel::DangerFullAccess => "danger_full_access",
        }
    }
}

impl fmt::Display for PermissionLevel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error(
    "unknown permission mode \"{0}\"; expected read_only, workspace_write or danger_full_access"
)]
pub struct UnknownPermissionMode(pub String);

impl FromStr for PermissionLevel {
    type Err = UnknownPermissionMode;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        match text {
            "read_only" => Ok(PermissionLevel::ReadOnly),
            "workspace_write" => Ok(PermissionLevel::WorkspaceWrite),
            "danger_full_access" => Ok(PermissionLevel::DangerFullAccess),
            other => Err(UnknownPermissionMode(other.to_owned())),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn modes_are_ordered_and_parse() {
        assert!(PermissionLevel::ReadOnly < PermissionLevel::WorkspaceWrite);
        assert!(PermissionLevel::WorkspaceWrite < PermissionLevel::DangerFullAccess);
        for level in [
            PermissionLevel::ReadOnly,
            PermissionLevel::WorkspaceWrite,
            PermissionLevel::DangerFullAccess,
        ] {
            assert_eq!(level.as_str().parse::<PermissionLevel>(), Ok(level));
        }
        let err = "root".parse::<PermissionLevel>().unwrap_err();
        assert!(err.to_string().contains("\"root\""));
    }
}
