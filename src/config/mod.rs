//! Settings: the file, then `TOOLD_*` environment variables, then flags, into one typed
//! [`Settings`] that components receive as arguments. Nothing else reads the environment.
//! The standard `OTEL_*` variables of DESIGN §9 land in `[telemetry]` the same way (an empty
//! one counts as unset, as OpenTelemetry's SDKs read them); the exporter's headers and timeout
//! (`telemetry::otlp::EXPORT_VARIABLES`) are handed over as read, for the exporter to parse.

mod auth;
mod environments;
mod limits;
mod mcp;
mod oidc;
mod server;

pub use auth::{AuthSettings, AuthSettingsError, AuthToken, TokenPrincipal};
pub use environments::EnvironmentSettings;
pub use limits::LimitSettings;
pub use mcp::{McpFlags, McpSettings, stdio_state_dir};
pub use oidc::{OidcIssuers, OidcRoleMapping, OidcSettings, OidcSettingsError};
// `toold mcp --permission-mode` names a mode; the command line reaches it through config.
pub use crate::permission::PermissionLevel;
pub use server::{HalfTlsError, ServerFlags, ServerSettings, TlsFiles};

use std::path::Path;

use figment::Figment;
use figment::providers::{Format, Serialized, Toml};
use serde::{Deserialize, Serialize};

use crate::dispatch::DispatchSettings;
use crate::hooks::{HookConfigError, HookSettings};
use crate::mcp::{McpServerSettings, McpSettingsError};
use crate::permission::PermissionSettings;
use crate::telemetry::traces::TelemetrySettings;
use crate::tools::{SandboxSettings, SkillSettings, WebFetchSettings};

/// Every setting of the daemon.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Settings {
    pub dispatch: DispatchSettings,
    pub web_fetch: WebFetchSettings,
    pub skills: SkillSettings,
    pub server: ServerSettings,
    pub permissions: PermissionSettings,
    pub sandbox: SandboxSettings,
    pub hooks: HookSettings,
    pub mcp: McpSettings,
    pub telemetry: TelemetrySettings,
    /// `[[auth.tokens]]`: principals and roles (DESIGN §10).
    pub auth: AuthSettings,
    /// `[limits]`: per principal and per session (DESIGN §10).
    pub limits: LimitSettings,
    /// `[environments]`: images, isolation, limits and uploads (DESIGN §12).
    pub environments: EnvironmentSettings,
    /// `[[mcp_servers]]`: read key by key, so a bad entry is named with its key.
    #[serde(deserialize_with = "crate::mcp::settings::deserialize_servers")]
    pub mcp_servers: Vec<McpServerSettings>,
}

/// How an environment variable's text becomes a setting's value.
#[derive(Clone, Copy)]
enum EnvKind {
    Count,
    /// `true`/`false` (also `1`/`0`, `on`/`off`).
    Switch,
    Text,
    /// One of these words.
    Choice(&'static [&'static str]),
    /// A list split on this separator (empty parts dropped).
    List(char),
}

/// Environment variables, the setting each overrides, and how it is read (DESIGN §7).
const ENV_SETTINGS: &[(&str, &str, EnvKind)] = &[
    (
        "TOOLD_MAX_TOOL_CONCURRENCY",
        "dispatch.max_concurrency",
        EnvKind::Count,
    ),
    ("TOOLD_LISTEN", "server.listen", EnvKind::Text),
    ("TOOLD_DATA_DIR", "server.data_dir", EnvKind::Text),
    ("TOOLD_DATABASE_URL", "server.database_url", EnvKind::Text),
    (
        "TOOLD_ADVERTISE_ADDRESS",
        "server.advertise_address",
        EnvKind::Text,
    ),
    (
        "TOOLD_ALLOWED_ROOTS",
        "server.allowed_roots",
        EnvKind::List(':'),
    ),
    (
        "TOOLD_AUTH_TOKENS",
        "server.auth_tokens",
        EnvKind::List(','),
    ),
    ("TOOLD_TLS_CERT", "server.tls_cert", EnvKind::Text),
    ("TOOLD_TLS_KEY", "server.tls_key", EnvKind::Text),
    ("TOOLD_FLEET_SECRET", "server.fleet_secret", EnvKind::Text),
    (
        "TOOLD_SANDBOX",
        "sandbox.mode",
        EnvKind::Choice(&["auto", "bwrap", "landlock", "off"]),
    ),
    (
        "TOOLD_REPOLL_SELF_WAKE",
        "server.repoll_self_wake",
        EnvKind::Switch,
    ),
    (
        "TOOLD_LIMITS_CONCURRENT_BATCHES_PER_PRINCIPAL",
        "limits.concurrent_batches_per_principal",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_SESSIONS_PER_PRINCIPAL",
        "limits.sessions_per_principal",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_REQUESTS_PER_SECOND_PER_PRINCIPAL",
        "limits.requests_per_second_per_principal",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_SHELL_CALLS_PER_SESSION",
        "limits.shell_calls_per_session",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_BACKGROUND_SHELLS_PER_SESSION",
        "limits.background_shells_per_session",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_SNAPSHOTS_PER_PRINCIPAL",
        "limits.snapshots_per_principal",
        EnvKind::Count,
    ),
    (
        "TOOLD_LIMITS_SNAPSHOT_BYTES_PER_PRINCIPAL",
        "limits.snapshot_bytes_per_principal",
        EnvKind::Count,
    ),
    (
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "telemetry.otlp_endpoint",
        EnvKind::Text,
    ),
    (
        "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT",
        "telemetry.otlp_traces_endpoint",
        EnvKind::Text,
    ),
    (
        "OTEL_EXPORTER_OTLP_PROTOCOL",
        "telemetry.otlp_protocol",
        EnvKind::Text,
    ),
    ("OTEL_SERVICE_NAME", "telemetry.service_name", EnvKind::Text),
    (
        "OTEL_TRACES_SAMPLER",
        "telemetry.traces_sampler",
        EnvKind::Text,
    ),
    (
        "OTEL_TRACES_SAMPLER_ARG",
        "telemetry.traces_sampler_arg",
        EnvKind::Text,
    ),
];

/// Each message says it all: none has a `source`, since the command line prints an error's
/// chain and would repeat it.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("settings file {path}: {problem}")]
    File {
        path: String,
        problem: Box<figment::Error>,
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
    #[error("invalid settings: {0}")]
    Hooks(HookConfigError),
    #[error("invalid settings: {0}")]
    McpServers(McpSettingsError),
    #[error("telemetry.service_name (OTEL_SERVICE_NAME) must not be empty")]
    EmptyServiceName,
    #[error("invalid settings: {0}")]
    Telemetry(crate::telemetry::traces::TracesError),
    #[error("invalid settings: {0}")]
    Auth(AuthSettingsError),
    #[error("invalid settings: {0}")]
    Oidc(OidcSettingsError),
}

impl From<HookConfigError> for ConfigError {
    fn from(err: HookConfigError) -> ConfigError {
        ConfigError::Hooks(err)
    }
}

impl From<McpSettingsError> for ConfigError {
    fn from(err: McpSettingsError) -> ConfigError {
        ConfigError::McpServers(err)
    }
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
                    problem: Box::new(figment::Error::from("the file does not exist".to_string())),
                });
            }
            figment = figment.merge(Toml::file_exact(path));
        }
        for (name, key, kind) in ENV_SETTINGS {
            let Some(value) = env(name) else { continue };
            if name.starts_with("OTEL_") && value.trim().is_empty() {
                continue;
            }
            figment = match kind {
                EnvKind::Count => {
                    let parsed: usize = value.trim().parse().map_err(|_| ConfigError::Env {
                        name: (*name).to_owned(),
                        value: value.clone(),
                        key: (*key).to_owned(),
                    })?;
                    figment.merge(Serialized::default(key, parsed))
                }
                EnvKind::Switch => {
                    let parsed = match value.trim().to_ascii_lowercase().as_str() {
                        "true" | "1" | "on" => true,
                        "false" | "0" | "off" => false,
                        _ => {
                            return Err(ConfigError::Env {
                                name: (*name).to_owned(),
                                value: value.clone(),
                                key: (*key).to_owned(),
                            });
                        }
                    };
                    figment.merge(Serialized::default(key, parsed))
                }
                EnvKind::Text => figment.merge(Serialized::default(key, value)),
                EnvKind::Choice(words) => {
                    let word = value.trim();
                    if !words.contains(&word) {
                        return Err(ConfigError::Env {
                            name: (*name).to_owned(),
                            value: value.clone(),
                            key: format!("{key} (one of {})", words.join(", ")),
                        });
                    }
                    figment.merge(Serialized::default(key, word))
                }
                EnvKind::List(separator) => {
                    let items: Vec<&str> = value
                        .split(*separator)
                        .map(str::trim)
                        .filter(|item| !item.is_empty())
                        .collect();
                    figment.merge(Serialized::default(key, items))
                }
            };
        }
        let mut settings: Settings = figment.extract().map_err(|err| match file {
            Some(path) => ConfigError::File {
                path: path.display().to_string(),
                problem: Box::new(err),
            },
            None => ConfigError::Invalid(Box::new(err)),
        })?;
        settings.telemetry.export_variables = crate::telemetry::otlp::EXPORT_VARIABLES
            .iter()
            .filter_map(|name| env(name).map(|value| ((*name).to_owned(), value)))
            .collect();
        settings.check()?;
        crate::mcp::settings::check_servers(&mut settings.mcp_servers, &env)?;
        Ok(settings)
    }

    fn check(&self) -> Result<(), ConfigError> {
        let counts = [
            ("dispatch.max_concurrency", self.dispatch.max_concurrency),
            (
                "server.max_concurrent_requests",
                self.server.max_concurrent_requests,
            ),
            ("server.body_limit_bytes", self.server.body_limit_bytes),
            ("server.event_buffer", self.server.event_buffer),
            (
                "permissions.approval_timeout_ms",
                usize::try_from(self.permissions.approval_timeout_ms).unwrap_or(usize::MAX),
            ),
            (
                "server.heartbeat_interval_ms",
                usize::try_from(self.server.heartbeat_interval.as_millis()).unwrap_or(usize::MAX),
            ),
            (
                "server.node_timeout_ms",
                usize::try_from(self.server.node_timeout.as_millis()).unwrap_or(usize::MAX),
            ),
        ];
        for (key, value) in counts {
            if value == 0 {
                return Err(ConfigError::OutOfRange { key, value });
            }
        }
        self.hooks.check()?;
        self.telemetry.sampler().map_err(ConfigError::Telemetry)?;
        if self.telemetry.service_name.trim().is_empty() {
            return Err(ConfigError::EmptyServiceName);
        }
        self.auth_principals()?;
        self.auth.oidc.check().map_err(ConfigError::Oidc)?;
        Ok(())
    }

    /// Every accepted token (as its SHA-256 digest) with the principal it names: the
    /// `--auth-token` ones as admins, then `[[auth.tokens]]` (see `config/auth.rs`).
    pub fn auth_principals(&self) -> Result<Vec<TokenPrincipal>, ConfigError> {
        self.auth
            .principals(&self.server.auth_tokens)
            .map_err(ConfigError::Auth)
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
    fn server_settings_come_from_the_environment_by_their_design_names() {
        let env = |name: &str| match name {
            "TOOLD_LISTEN" => Some("0.0.0.0:9000".to_owned()),
            "TOOLD_DATA_DIR" => Some("/var/lib/toold".to_owned()),
            "TOOLD_DATABASE_URL" => Some("sqlite:///tmp/t.db".to_owned()),
            "TOOLD_ALLOWED_ROOTS" => Some("/srv/a:/srv/b".to_owned()),
            "TOOLD_AUTH_TOKENS" => Some("one, two".to_owned()),
            "TOOLD_TLS_CERT" => Some("/etc/toold/cert.pem".to_owned()),
            "TOOLD_TLS_KEY" => Some("/etc/toold/key.pem".to_owned()),
            "TOOLD_FLEET_SECRET" => Some("s3cret".to_owned()),
            _ => None,
        };
        let server = Settings::load(None, env).unwrap().server;
        assert_eq!(server.fleet_secret, "s3cret");
        assert_eq!(server.listen, "0.0.0.0:9000");
        assert_eq!(server.data_dir, Path::new("/var/lib/toold"));
        assert_eq!(server.database_location(), "sqlite:///tmp/t.db");
        assert_eq!(
            server.allowed_roots,
            vec![Path::new("/srv/a"), Path::new("/srv/b")]
        );
        assert_eq!(server.auth_tokens, vec!["one", "two"]);
        assert_eq!(server.tls_cert, Path::new("/etc/toold/cert.pem"));
        assert_eq!(server.tls_key, Path::new("/etc/toold/key.pem"));
        let defaults = Settings::load(None, no_env).unwrap().server;
        assert_eq!(defaults.listen, "127.0.0.1:7070");
        assert_eq!(
            (defaults.fleet_secret.as_str(), defaults.max_sessions),
            ("", 0)
        );
        assert_eq!(defaults.body_limit_bytes, 16 * 1024 * 1024);
        assert_eq!(
            defaults.database_location(),
            Path::new("toold-data").join("toold.db").to_string_lossy()
        );
    }

    #[test]
    fn repoll_self_wake_is_on_unless_the_file_or_the_environment_turns_it_off() {
        assert!(
            Settings::load(None, no_env)
                .unwrap()
                .server
                .repoll_self_wake
        );
        for (value, expected) in [
            ("false", false),
            ("0", false),
            ("OFF", false),
            ("true", true),
        ] {
            let env = |name: &str| (name == "TOOLD_REPOLL_SELF_WAKE").then(|| value.to_owned());
            let server = Settings::load(None, env).unwrap().server;
            assert_eq!(server.repoll_self_wake, expected, "{value}");
        }
        let env = |name: &str| (name == "TOOLD_REPOLL_SELF_WAKE").then(|| "maybe".to_owned());
        let err = Settings::load(None, env).unwrap_err().to_string();
        assert!(
            err.contains("TOOLD_REPOLL_SELF_WAKE") && err.contains("maybe"),
            "{err}"
        );
    }

    #[test]
    fn the_standard_otel_variables_land_in_telemetry() {
        use crate::telemetry::traces::OtlpProtocol;
        let env = |name: &str| match name {
            "OTEL_EXPORTER_OTLP_ENDPOINT" => Some("http://collector:4317".to_owned()),
            "OTEL_EXPORTER_OTLP_PROTOCOL" => Some("grpc".to_owned()),
            "OTEL_SERVICE_NAME" => Some("agents".to_owned()),
            "OTEL_TRACES_SAMPLER" => Some("traceidratio".to_owned()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("0.5".to_owned()),
            "OTEL_EXPORTER_OTLP_HEADERS" => Some("api-key=k".to_owned()),
            // Empty means unset, as OpenTelemetry's SDKs read it.
            "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT" => Some(String::new()),
            _ => None,
        };
        let telemetry = Settings::load(None, env).unwrap().telemetry;
        assert_eq!(telemetry.otlp_protocol, OtlpProtocol::Grpc);
        // The exporter's own variables are handed over as read, for it to parse.
        assert_eq!(
            telemetry.export_variables,
            [(
                "OTEL_EXPORTER_OTLP_HEADERS".to_owned(),
                "api-key=k".to_owned()
            )]
        );
        assert_eq!(
            telemetry.traces_endpoint().as_deref(),
            Some("http://collector:4317")
        );
        assert_eq!(telemetry.service_name, "agents");
        assert!(telemetry.sampler().is_ok());
        assert_eq!(
            Settings::load(None, no_env)
                .unwrap()
                .telemetry
                .traces_endpoint(),
            None
        );
    }

    #[test]
    fn bad_otel_variables_are_refused_by_name() {
        let protocol =
            |name: &str| (name == "OTEL_EXPORTER_OTLP_PROTOCOL").then(|| "http/json".to_owned());
        let err = Settings::load(None, protocol).unwrap_err().to_string();
        assert!(err.contains("http/json"), "{err}");
        let sampler = |name: &str| (name == "OTEL_TRACES_SAMPLER").then(|| "sometimes".to_owned());
        let err = Settings::load(None, sampler).unwrap_err().to_string();
        assert!(err.contains("sometimes"), "{err}");
        let ratio = |name: &str| match name {
            "OTEL_TRACES_SAMPLER" => Some("traceidratio".to_owned()),
            "OTEL_TRACES_SAMPLER_ARG" => Some("many".to_owned()),
            _ => None,
        };
        let err = Settings::load(None, ratio).unwrap_err().to_string();
        assert!(err.contains("many"), "{err}");
        // An empty variable is unset; an empty name in the file is refused.
        let blank = |name: &str| (name == "OTEL_SERVICE_NAME").then(|| " ".to_owned());
        let settings = Settings::load(None, blank).unwrap();
        assert_eq!(settings.telemetry.service_name, "toold");
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toold.toml");
        std::fs::write(&path, "[telemetry]\nservice_name = \"\"\n").unwrap();
        let err = Settings::load(Some(&path), no_env).unwrap_err().to_string();
        assert!(err.contains("service_name"), "{err}");
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
    fn sandbox_and_hooks_come_from_the_file_in_designs_shape() {
        use crate::hooks::OnFailure;
        use crate::tools::SandboxMode;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toold.toml");
        std::fs::write(
            &path,
            r#"
[sandbox]
mode = "landlock"
allow_unsandboxed = true
network = true

[[hooks.pre_tool_use]]
matcher = "bash|write_file"
command = "/usr/local/bin/check"
timeout_ms = 5000
on_failure = "block"

[[hooks.post_tool_use]]
url = "http://127.0.0.1:9000/hook"
"#,
        )
        .unwrap();
        let settings = Settings::load(Some(&path), no_env).unwrap();
        assert_eq!(settings.sandbox.mode, SandboxMode::Landlock);
        assert!(settings.sandbox.allow_unsandboxed && settings.sandbox.network);
        let pre = &settings.hooks.pre_tool_use[0];
        assert_eq!(pre.command.as_deref(), Some("/usr/local/bin/check"));
        assert_eq!((pre.timeout_ms, pre.on_failure), (5000, OnFailure::Block));
        let post = &settings.hooks.post_tool_use[0];
        assert_eq!(post.url.as_deref(), Some("http://127.0.0.1:9000/hook"));
        assert_eq!(
            (post.timeout_ms, post.on_failure),
            (10_000, OnFailure::Allow)
        );

        std::fs::write(&path, "[sandbox]\nmode = \"chroot\"\n").unwrap();
        let err = Settings::load(Some(&path), no_env).unwrap_err().to_string();
        assert!(err.contains("chroot"), "{err}");
        std::fs::write(
            &path,
            "[[hooks.pre_tool_use]]\nmatcher = \"(\"\ncommand = \"x\"\n",
        )
        .unwrap();
        let err = Settings::load(Some(&path), no_env).unwrap_err().to_string();
        assert!(err.contains("hooks.pre_tool_use[0]"), "{err}");
    }

    #[test]
    fn bad_values_are_clear_errors() {
        let env = |_: &str| Some("lots".to_owned());
        let err = Settings::load(None, env).unwrap_err().to_string();
        assert!(
            err.contains("TOOLD_MAX_TOOL_CONCURRENCY") && err.contains("lots"),
            "{err}"
        );
        let zero = |name: &str| {
            (name.starts_with("TOOLD_") && name != "TOOLD_SANDBOX").then(|| "0".to_owned())
        };
        let sandbox = |name: &str| (name == "TOOLD_SANDBOX").then(|| "chroot".to_owned());
        let err = Settings::load(None, sandbox).unwrap_err().to_string();
        assert!(
            err.contains("TOOLD_SANDBOX") && err.contains("chroot") && err.contains("landlock"),
            "{err}"
        );
        let sandbox = |name: &str| (name == "TOOLD_SANDBOX").then(|| "landlock".to_owned());
        assert_eq!(
            Settings::load(None, sandbox).unwrap().sandbox.mode,
            crate::tools::SandboxMode::Landlock
        );
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

    #[test]
    fn limits_come_from_the_file_and_the_environment_and_bad_ones_name_their_key() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toold.toml");
        std::fs::write(
            &path,
            "[limits]\nsessions_per_principal = 3\nshell_calls_per_session = 2\n",
        )
        .unwrap();
        let env = |name: &str| {
            (name == "TOOLD_LIMITS_REQUESTS_PER_SECOND_PER_PRINCIPAL").then(|| "50".to_owned())
        };
        let limits = Settings::load(Some(&path), env).unwrap().limits;
        assert_eq!(
            limits,
            LimitSettings {
                sessions_per_principal: 3,
                shell_calls_per_session: 2,
                requests_per_second_per_principal: 50,
                ..LimitSettings::default()
            }
        );
        for (text, named) in [
            ("sessions_per_principal = -1", "sessions_per_principal"),
            (
                "concurrent_batches_per_principal = \"many\"",
                "concurrent_batches_per_principal",
            ),
            (
                "background_shells_per_session = 1.5",
                "background_shells_per_session",
            ),
            ("session_per_principal = 1", "session_per_principal"),
        ] {
            std::fs::write(&path, format!("[limits]\n{text}\n")).unwrap();
            let err = Settings::load(Some(&path), no_env).unwrap_err().to_string();
            assert!(err.contains(named), "{text}: {err}");
        }
        let env = |name: &str| {
            (name == "TOOLD_LIMITS_SHELL_CALLS_PER_SESSION").then(|| "lots".to_owned())
        };
        let err = Settings::load(None, env).unwrap_err().to_string();
        assert!(
            err.contains("TOOLD_LIMITS_SHELL_CALLS_PER_SESSION")
                && err.contains("limits.shell_calls_per_session"),
            "{err}"
        );
    }
}
