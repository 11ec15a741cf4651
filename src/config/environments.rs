//! `[environments]` settings (DESIGN §12): what a session's filesystem may take in.
//!
//! Only the shape lives here; the archive checks that enforce it are `workspace::archive`'s.
//! The section will grow the environment keys of DESIGN §12 (isolation, limits, registries):
//! each is one more field with its default in [`EnvironmentSettings::default`].

use serde::{Deserialize, Serialize};

/// `[environments]` in the settings file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvironmentSettings {
    /// Unpacked bytes one uploaded archive (or one uploaded file) may hold, in MiB; more is
    /// refused with 413.
    pub max_upload_mb: u64,
    /// Entries one uploaded archive may hold; more is refused with 413.
    pub max_upload_entries: u64,
}

impl Default for EnvironmentSettings {
    fn default() -> Self {
        EnvironmentSettings {
            max_upload_mb: 4096,
            max_upload_entries: 200_000,
        }
    }
}
