//! Settings: the file, then `TOOLD_*` environment variables, then flags, into one typed
//! [`Settings`] that components receive as arguments. Nothing else reads the environment.

use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::dispatch::DispatchSettings;
use crate::tools::{SkillSettings, WebFetchSettings};

/// Every setting of the daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub dispatch: DispatchSettings,
    pub web_fetch: WebFetchSettings,
    pub skills: SkillSettings,
}

/// Environment variables and the setting each overrides.
const ENV_SETTINGS: &[(&str, &str)] = &[("TOOLD_MAX_TOOL_CONCURRENCY", "dispatch.max_concurrency")];

#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("settings file {path}: {source}")]
    File {
        path: String,
        #[source]
        source: Box<figment::Error>,
    },
    #[error("invalid settings: {0}")]
    Invalid(Box<figment::Error>),
    #[error("environment variable {name}={value:?} is not a valid value for {key}")]
    Env {
        name: String,
        value: String,
        key: String,
    },
    #[error("{key} must be at least 1, got {value}")]
    OutOfRange { key: &'static str, value: usize },
}

impl Settings {
    /// Defaults, then `file` (if given; it must exist), then the environment as seen through
    /// `env` (a lookup, so tests need not touch the process environment).
    pub fn load(
        file: Option<&Path>,
        env: impl Fn(&str) -> Option<String>,
    ) -> Result<Settings, ConfigError> {
        let mut figment = Figment::from(Serialized::defaults(Settings::default()));
        if let Some(path) = file {
            if !path.is_file() {
                return Err(ConfigError::File {
                    path: path.display().to_string(),
                    source: Box::new(figment::Error::from("the file does not exist".to_string())),
                });
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        for (name, key) in ENV_SETTINGS {
            if let Some(value) = env(name) {
                let parsed: usize = value.trim().parse().map_err(|_| ConfigError::Env {
                    name: (*name).to_owned(),
                    value: value.clone(),
                    key: (*key).to_owned(),
                })?;
                figment = figment.merge(Serialized::default(key, parsed));
            }
        }
        let settings: Settings = figment.extract().map_err(|err| match file {
            Some(path) => ConfigError::File {
                path: path.display().to_string(),
                source: Box::new(err),
            },
            None => ConfigError::Invalid(Box::new(err)),
        })?;
        settings.check()?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), ConfigError> {
        if self.dispatch.max_concurrency == 0 {
            return Err(ConfigError::OutOfRange {
                key: "dispatch.max_concurrency",
                value: 0,
            });
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn no_env(_: &str) -> Option<String> {
        None
    }

    #[test]
    fn defaults_apply_without_file_or_env() {
        let settings = Settings::load(None, no_env).unwrap();
        assert_eq!(settings.dispatch.max_concurrency, 10);
        assert_eq!(
            settings.dispatch.call_timeout,
            Duration::from_millis(660_000)
        );
    }

    #[test]
    fn file_then_env_override_in_that_order() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toold.toml");
        std::fs::write(
            &path,
            "[dispatch]\nmax_concurrency = 4\ncall_timeout_ms = 1500\n",
        )
        .unwrap();
        let from_file = Settings::load(Some(&path), no_env).unwrap();
        assert_eq!(from_file.dispatch.max_concurrency, 4);
        assert_eq!(from_file.dispatch.call_timeout, Duration::from_millis(1500));
        let env = |name: &str| (name == "TOOLD_MAX_TOOL_CONCURRENCY").then(|| "7".to_owned());
        let from_env = Settings::load(Some(&path), env).unwrap();
        assert_eq!(from_env.dispatch.max_concurrency, 7);
        assert_eq!(from_env.dispatch.call_timeout, Duration::from_millis(1500));
    }

    #[test]
    fn the_shipped_settings_file_documents_the_defaults() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("config/toold.toml");
        assert_eq!(
            Settings::load(Some(&path), no_env).unwrap(),
            Settings::default()
        );
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let env = |_: &str| Some("lots".to_owned());
        let err = Settings::load(None, env).unwrap_err().to_string();
        assert!(
            err.contains("TOOLD_MAX_TOOL_CONCURRENCY") && err.contains("lots"),
            "{err}"
        );
        let zero = |_: &str| Some("0".to_owned());
        assert!(
            Settings::load(None, zero)
                .unwrap_err()
                .to_string()
                .contains("at least 1")
        );

        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bad.toml");
        std::fs::write(&path, "[dispatch]\nmax_concurency = 4\n").unwrap();
        let err = Settings::load(Some(&path), no_env).unwrap_err().to_string();
        assert!(err.contains("max_concurency"), "{err}");
        let missing = Settings::load(Some(&dir.path().join("nope.toml")), no_env);
        assert!(missing.unwrap_err().to_string().contains("does not exist"));
    }
}
