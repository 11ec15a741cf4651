//! Settings of the built-in tools (`[web_fetch]`, `[skills]` in the settings file).

use std::path::PathBuf;

use serde::{Deserialize, Serialize};

/// `[web_fetch]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct WebFetchSettings {
    /// Allow loopback, private, link-local and metadata addresses (off: SSRF is refused).
    pub allow_private_addresses: bool,
    /// Whole-request timeout, in milliseconds.
    pub timeout_ms: u64,
    /// Redirects followed before giving up.
    pub max_redirects: usize,
    /// Largest response body read, in bytes.
    pub max_body_bytes: u64,
}

impl Default for WebFetchSettings {
    fn default() -> Self {
        WebFetchSettings {
            allow_private_addresses: false,
            timeout_ms: 30_000,
            max_redirects: 10,
            max_body_bytes: 10 * 1024 * 1024,
        }
    }
}

/// `[skills]`.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SkillSettings {
    /// Directories holding one folder per skill, each with a `SKILL.md`.
    pub directories: Vec<PathBuf>,
}
