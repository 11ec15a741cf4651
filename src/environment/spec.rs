//! What a session asks for (`POST /v1/sessions {"environment": …}`, DESIGN §12) and the
//! `[environments]` keys that bound it: isolation tier, network, limits, registries.
//!
//! Only shapes and their checks live here: a request's limits are filled from the defaults
//! and refused above the maximums (`invalid_request` naming the limit), its `workdir` must be
//! an absolute, normalised path other than `/`, its `env` names must be names. Deliberately
//! absent: reading the process environment for registry passwords (config does that) and
//! running anything.

use std::collections::BTreeMap;
use std::path::{Component, Path, PathBuf};

use serde::{Deserialize, Serialize};

/// `environment.isolation`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Isolation {
    /// `bwrap` where it works, else `landlock`.
    #[default]
    Auto,
    Landlock,
    Bwrap,
    /// gVisor's `runsc`: a user-space kernel.
    Gvisor,
}

impl Isolation {
    pub fn as_str(self) -> &'static str {
        match self {
            Isolation::Auto => "auto",
            Isolation::Landlock => "landlock",
            Isolation::Bwrap => "bwrap",
            Isolation::Gvisor => "gvisor",
        }
    }
}

/// `environment.network`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Network {
    /// Loopback only, inside the environment.
    #[default]
    None,
    /// The host's network.
    Host,
}

/// `environment.limits`, and `[environments] default_limits` / `max_limits`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Limits {
    pub memory_mb: Option<u64>,
    pub cpus: Option<f64>,
    pub pids: Option<u64>,
    pub disk_mb: Option<u64>,
}

impl Limits {
    /// `self` with what it leaves out taken from `defaults`, checked against `max`.
    pub fn resolve(&self, defaults: &Limits, max: &Limits) -> Result<Limits, String> {
        let out = Limits {
            memory_mb: self.memory_mb.or(defaults.memory_mb),
            cpus: self.cpus.or(defaults.cpus),
            pids: self.pids.or(defaults.pids),
            disk_mb: self.disk_mb.or(defaults.disk_mb),
        };
        let over = |name: &str, got: Option<f64>, max: Option<f64>| match (got, max) {
            (Some(got), _) if got <= 0.0 || !got.is_finite() => Err(format!(
                "environment.limits.{name} must be more than 0, got {got}"
            )),
            (Some(got), Some(max)) if got > max => Err(format!(
                "environment.limits.{name} = {got} is over the server's maximum {max}"
            )),
            _ => Ok(()),
        };
        let f = |v: Option<u64>| v.map(|v| v as f64);
        over("memory_mb", f(out.memory_mb), f(max.memory_mb))?;
        over("cpus", out.cpus, max.cpus)?;
        over("pids", f(out.pids), f(max.pids))?;
        over("disk_mb", f(out.disk_mb), f(max.disk_mb))?;
        Ok(out)
    }
}

/// `environment` in a session's creation request.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct EnvironmentRequest {
    /// An OCI image reference (a tag or `@sha256:` digest).
    pub image: Option<String>,
    /// Or a directory under an allowed root, used read-only as the image's root.
    pub rootfs: Option<PathBuf>,
    pub isolation: Option<Isolation>,
    pub network: Network,
    pub limits: Limits,
    /// Added to (and over) the image's `Env`.
    pub env: BTreeMap<String, String>,
    /// Where the workspace appears (default `/workspace`).
    pub workdir: Option<PathBuf>,
    /// The user commands run as (default: the image's `User`).
    pub user: Option<String>,
}

impl EnvironmentRequest {
    /// The checks that need no settings: one source, a sound `workdir` and `env`.
    pub fn check(&self) -> Result<(), String> {
        match (&self.image, &self.rootfs) {
            (Some(_), Some(_)) => {
                return Err("environment: give image or rootfs, not both".to_string());
            }
            (None, None) => return Err("environment: image or rootfs is required".to_string()),
            (Some(image), None) if image.trim().is_empty() => {
                return Err("environment.image must not be empty".to_string());
            }
            _ => {}
        }
        workdir_inside(&self.workdir())?;
        for name in self.env.keys() {
            let ok = !name.is_empty()
                && !name.starts_with(|c: char| c.is_ascii_digit())
                && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_');
            if !ok {
                return Err(format!(
                    "environment.env: \"{name}\" is not a variable name"
                ));
            }
        }
        Ok(())
    }

    pub fn workdir(&self) -> PathBuf {
        self.workdir
            .clone()
            .unwrap_or_else(|| PathBuf::from("/workspace"))
    }
}

/// `workdir` as a relative path under the environment's root.
pub fn workdir_inside(workdir: &Path) -> Result<PathBuf, String> {
    if !workdir.is_absolute() {
        return Err(format!(
            "environment.workdir \"{}\" must be absolute",
            workdir.display()
        ));
    }
    let mut out = PathBuf::new();
    for part in workdir.components() {
        match part {
            Component::RootDir => {}
            Component::Normal(p) => out.push(p),
            _ => {
                return Err(format!(
                    "environment.workdir \"{}\" must not contain . or ..",
                    workdir.display()
                ));
            }
        }
    }
    if out.as_os_str().is_empty() || ["proc", "dev", "sys"].iter().any(|d| out.starts_with(d)) {
        return Err(format!(
            "environment.workdir \"{}\" must be a directory below / outside /proc, /dev and /sys",
            workdir.display()
        ));
    }
    Ok(out)
}

/// One `[[environments.registries]]` entry.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct RegistrySettings {
    /// `host[:port]` as image references name it.
    pub host: String,
    /// Plain HTTP.
    pub insecure: bool,
    pub username: Option<String>,
    /// The variable holding `username`'s password.
    pub password_env: Option<String>,
    /// The variable holding a bearer token (instead of a username and password).
    pub token_env: Option<String>,
}

/// A registry's credentials once config read its variables.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Credentials {
    Anonymous,
    Basic { username: String, password: String },
    Bearer(String),
}

/// A registry as the image cache uses it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Registry {
    pub host: String,
    pub insecure: bool,
    pub credentials: Credentials,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn limits_take_defaults_and_refuse_what_is_over_the_maximum() {
        let defaults = Limits {
            memory_mb: Some(2048),
            cpus: Some(1.0),
            pids: Some(512),
            disk_mb: Some(8192),
        };
        let max = Limits {
            memory_mb: Some(4096),
            ..Limits::default()
        };
        let asked = Limits {
            pids: Some(64),
            ..Limits::default()
        };
        let got = asked.resolve(&defaults, &max).unwrap();
        assert_eq!(got.pids, Some(64));
        assert_eq!(got.memory_mb, Some(2048));
        let too_much = Limits {
            memory_mb: Some(8192),
            ..Limits::default()
        };
        let err = too_much.resolve(&defaults, &max).unwrap_err();
        assert!(err.contains("memory_mb = 8192"), "{err}");
        let zero = Limits {
            cpus: Some(0.0),
            ..Limits::default()
        };
        assert!(zero.resolve(&defaults, &max).unwrap_err().contains("cpus"));
    }

    #[test]
    fn workdir_and_env_are_checked() {
        for bad in ["relative", "/", "/a/../b", "/proc/x"] {
            assert!(workdir_inside(Path::new(bad)).is_err(), "{bad}");
        }
        assert_eq!(
            workdir_inside(Path::new("/workspace/a")).unwrap(),
            PathBuf::from("workspace/a")
        );
        let mut request = EnvironmentRequest {
            image: Some("x".into()),
            ..Default::default()
        };
        request.env.insert("BAD-NAME".into(), "1".into());
        assert!(request.check().unwrap_err().contains("BAD-NAME"));
        let neither = EnvironmentRequest::default();
        assert!(neither.check().is_err());
    }
}
