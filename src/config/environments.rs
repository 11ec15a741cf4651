//! `[environments]` settings (DESIGN §12): what a session's filesystem may take in, and what
//! an environment may ask for (isolation, limits) and pull from (`[[environments.registries]]`).
//!
//! Only the shape lives here and the one read of the process environment the section needs:
//! a registry's `password_env`/`token_env` variable, read by [`EnvironmentSettings::registries`]
//! (a named variable that is unset is an error naming it). The archive checks are
//! `workspace::archive`'s, the limits' checks `environment::spec`'s.

use serde::{Deserialize, Serialize};

use crate::environment::{Credentials, Isolation, Limits, Registry, RegistrySettings};

/// `[environments]` in the settings file.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvironmentSettings {
    /// Unpacked bytes one uploaded archive (or one uploaded file) may hold, in MiB; more is
    /// refused with 413.
    pub max_upload_mb: u64,
    /// Entries one uploaded archive may hold; more is refused with 413.
    pub max_upload_entries: u64,
    /// The tier an environment without `isolation` gets.
    pub default_isolation: Isolation,
    /// What an environment's `limits` leave out.
    pub default_limits: Limits,
    /// The most an environment may ask for (a key left out: no maximum).
    pub max_limits: Limits,
    /// Per-registry transport and credentials.
    pub registries: Vec<RegistrySettings>,
}

impl Eq for EnvironmentSettings {}

impl Default for EnvironmentSettings {
    fn default() -> Self {
        EnvironmentSettings {
            max_upload_mb: 4096,
            max_upload_entries: 200_000,
            default_isolation: Isolation::Auto,
            default_limits: Limits {
                memory_mb: Some(2048),
                cpus: Some(1.0),
                pids: Some(512),
                disk_mb: Some(8192),
            },
            max_limits: Limits {
                memory_mb: Some(16384),
                cpus: Some(4.0),
                pids: Some(4096),
                disk_mb: Some(65536),
            },
            registries: Vec::new(),
        }
    }
}

impl EnvironmentSettings {
    /// The registries with their credentials read from the variables they name.
    pub fn registries(&self) -> Result<Vec<Registry>, String> {
        self.registries.iter().map(registry).collect()
    }
}

fn registry(entry: &RegistrySettings) -> Result<Registry, String> {
    if entry.host.trim().is_empty() {
        return Err("[[environments.registries]]: host is required".to_string());
    }
    let read = |var: &str| {
        std::env::var(var).map_err(|_| {
            format!(
                "[[environments.registries]] \"{}\": the variable {var} is not set",
                entry.host
            )
        })
    };
    let credentials = match (&entry.username, &entry.password_env, &entry.token_env) {
        (_, Some(_), Some(_)) => {
            return Err(format!(
                "[[environments.registries]] \"{}\": give password_env or token_env, not both",
                entry.host
            ));
        }
        (Some(username), Some(var), None) => Credentials::Basic {
            username: username.clone(),
            password: read(var)?,
        },
        (None, Some(_), None) => {
            return Err(format!(
                "[[environments.registries]] \"{}\": password_env needs a username",
                entry.host
            ));
        }
        (_, None, Some(var)) => Credentials::Bearer(read(var)?),
        _ => Credentials::Anonymous,
    };
    Ok(Registry {
        host: entry.host.clone(),
        insecure: entry.insecure,
        credentials,
    })
}
