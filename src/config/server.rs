//! `[server]` settings: where the daemon listens, keeps its data and who may call it.
//!
//! Only the shape and the defaults live here; [`super`] fills them from the file, the
//! environment and the flags, and `server` turns them into a running daemon. They live in
//! `config`, not `server`, so settings flow one way: the server imports config, never back.

use std::path::PathBuf;
use std::time::Duration;

use serde::{Deserialize, Serialize};

/// `[server]` in the settings file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ServerSettings {
    /// HTTP listener (`TOOLD_LISTEN`, `--listen`); port 0 picks a free one.
    pub listen: String,
    /// SQLite, workspaces and the node id live here (`TOOLD_DATA_DIR`, `--data-dir`).
    /// Relative paths are taken from the daemon's working directory.
    pub data_dir: PathBuf,
    /// `sqlite://…` or a path (`TOOLD_DATABASE_URL`, `--database-url`); empty: `toold.db`
    /// under the data directory.
    pub database_url: String,
    /// Roots a session's working directory may lie under (`TOOLD_ALLOWED_ROOTS`,
    /// `--allowed-root`). `<data_dir>/workspaces` always is one.
    pub allowed_roots: Vec<PathBuf>,
    /// Bearer tokens accepted (`TOOLD_AUTH_TOKENS`, `--auth-token`); empty: no auth, which is
    /// only allowed on a loopback address.
    pub auth_tokens: Vec<String>,
    /// Request bodies above this are refused with 413.
    pub body_limit_bytes: usize,
    /// Time a request may take to produce its response head (streams then run on).
    #[serde(rename = "request_timeout_ms", with = "millis")]
    pub request_timeout: Duration,
    /// Requests handled at once; more are shed with 429.
    pub max_concurrent_requests: usize,
    /// On SIGTERM/SIGINT, how long running batches may finish before they are cancelled.
    #[serde(rename = "shutdown_grace_ms", with = "millis")]
    pub shutdown_grace: Duration,
    /// Events buffered per event-stream subscriber before it gets a `lagged` event.
    pub event_buffer: usize,
    /// Persisted events older than this many hours are pruned (hourly); 0 keeps them forever.
    pub event_retention_hours: u64,
    /// Audit rows of calls started more than this many days ago are deleted (hourly, in small
    /// chunks), with their offloaded results; 0 (the default) keeps them forever.
    pub audit_retention_days: u64,
    /// Log filter (`info`, `toold=debug,tower_http=info`, …).
    pub log: String,
    /// The address other daemons and clients are told to reach this one at (`http://host:port`
    /// or `host:port`; `TOOLD_ADVERTISE_ADDRESS`); empty: the address it listens on.
    pub advertise_address: String,
    /// How often the daemon records its heartbeat in the store.
    #[serde(rename = "heartbeat_interval_ms", with = "millis")]
    pub heartbeat_interval: Duration,
    /// A daemon sharing the store whose heartbeat is older than this is taken for stopped: its
    /// unfinished calls are marked interrupted and its sessions adopted.
    #[serde(rename = "node_timeout_ms", with = "millis")]
    pub node_timeout: Duration,
    /// Serve each connection inside `RepollOnSelfWake` (`TOOLD_REPOLL_SELF_WAKE`), which saves
    /// a wake-up of a second worker on every HTTP/1 POST; off is for re-measuring it after a
    /// tokio or hyper upgrade (see `api/listener/self_wake.rs`).
    pub repoll_self_wake: bool,
    /// PEM certificate chain to serve HTTPS and gRPC over TLS with (`TOOLD_TLS_CERT`,
    /// `--tls-cert`); empty: plain HTTP. Reloaded on SIGHUP.
    pub tls_cert: PathBuf,
    /// PEM private key of `tls_cert` (`TOOLD_TLS_KEY`, `--tls-key`); set both or neither.
    pub tls_key: PathBuf,
    /// The secret daemons of one fleet present to each other when one forwards a request for a
    /// session another runs (`TOOLD_FLEET_SECRET`); empty: no forwarding, and such a request
    /// is refused with a `conflict` naming the owner, as a lone daemon's fleet did before.
    pub fleet_secret: String,
    /// Live sessions after which a new session is placed on the least-loaded live daemon of
    /// the fleet instead of this one (its create forwarded there); 0: no limit. Needs
    /// `fleet_secret`.
    pub max_sessions: usize,
}

/// The certificate and key files TLS is served with.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TlsFiles {
    pub certificate: PathBuf,
    pub key: PathBuf,
}

/// `tls_cert` without `tls_key`, or the other way round.
#[derive(Debug, thiserror::Error)]
#[error(
    "TLS needs both a certificate and a key: {given} is set, {missing} is not (set --tls-cert and --tls-key, or neither)"
)]
pub struct HalfTlsError {
    given: &'static str,
    missing: &'static str,
}

impl Default for ServerSettings {
    fn default() -> Self {
        ServerSettings {
            listen: "127.0.0.1:7070".into(),
            data_dir: PathBuf::from("toold-data"),
            database_url: String::new(),
            allowed_roots: Vec::new(),
            auth_tokens: Vec::new(),
            body_limit_bytes: 16 * 1024 * 1024,
            request_timeout: Duration::from_secs(900),
            max_concurrent_requests: 512,
            shutdown_grace: Duration::from_secs(30),
            event_buffer: 4096,
            event_retention_hours: 168,
            audit_retention_days: 0,
            log: "info".into(),
            advertise_address: String::new(),
            heartbeat_interval: Duration::from_secs(2),
            node_timeout: Duration::from_secs(15),
            repoll_self_wake: true,
            tls_cert: PathBuf::new(),
            tls_key: PathBuf::new(),
            fleet_secret: String::new(),
            max_sessions: 0,
        }
    }
}

impl ServerSettings {
    /// How long persisted events are kept (zero: forever).
    pub fn event_retention(&self) -> Duration {
        Duration::from_secs(self.event_retention_hours.saturating_mul(3600))
    }

    /// How long audit rows are kept (zero: forever).
    pub fn audit_retention(&self) -> Duration {
        Duration::from_secs(self.audit_retention_days.saturating_mul(86_400))
    }

    /// The address to advertise: the setting (with the scheme added when it has none), else
    /// the scheme and the address bound. The scheme is `https` when TLS is configured.
    pub fn advertised(&self, bound: std::net::SocketAddr) -> String {
        let scheme = self.scheme();
        match self.advertise_address.trim() {
            "" => format!("{scheme}://{bound}"),
            given if given.contains("://") => given.to_owned(),
            given => format!("{scheme}://{given}"),
        }
    }

    /// `https` when a TLS certificate is configured, else `http`.
    pub fn scheme(&self) -> &'static str {
        if self.tls_cert.as_os_str().is_empty() {
            "http"
        } else {
            "https"
        }
    }

    /// The files to serve TLS with: both set, or neither (`None`: plain HTTP). Checked when the
    /// daemon starts, after the flags, since any of the three layers may set either.
    pub fn tls_files(&self) -> Result<Option<TlsFiles>, HalfTlsError> {
        let cert = !self.tls_cert.as_os_str().is_empty();
        let key = !self.tls_key.as_os_str().is_empty();
        match (cert, key) {
            (false, false) => Ok(None),
            (true, true) => Ok(Some(TlsFiles {
                certificate: self.tls_cert.clone(),
                key: self.tls_key.clone(),
            })),
            (true, false) => Err(HalfTlsError {
                given: "tls_cert",
                missing: "tls_key",
            }),
            (false, true) => Err(HalfTlsError {
                given: "tls_key",
                missing: "tls_cert",
            }),
        }
    }

    /// The database location: the configured URL, else `toold.db` under the data directory.
    pub fn database_location(&self) -> String {
        if self.database_url.is_empty() {
            self.data_dir
                .join("toold.db")
                .to_string_lossy()
                .into_owned()
        } else {
            self.database_url.clone()
        }
    }
}

/// Command-line flags that override `[server]` (DESIGN §7).
#[derive(Clone, Debug, Default)]
pub struct ServerFlags {
    pub listen: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub database_url: Option<String>,
    pub allowed_roots: Vec<PathBuf>,
    pub auth_tokens: Vec<String>,
    pub tls_cert: Option<PathBuf>,
    pub tls_key: Option<PathBuf>,
}

impl ServerFlags {
    /// Flags win over the file and the environment; repeated flags replace the list.
    pub fn apply(self, settings: &mut ServerSettings) {
        if let Some(listen) = self.listen {
            settings.listen = listen;
        }
        if let Some(dir) = self.data_dir {
            settings.data_dir = dir;
        }
        if let Some(url) = self.database_url {
            settings.database_url = url;
        }
        if !self.allowed_roots.is_empty() {
            settings.allowed_roots = self.allowed_roots;
        }
        if !self.auth_tokens.is_empty() {
            settings.auth_tokens = self.auth_tokens;
        }
        if let Some(cert) = self.tls_cert {
            settings.tls_cert = cert;
        }
        if let Some(key) = self.tls_key {
            settings.tls_key = key;
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        Ok(Duration::from_millis(u64::deserialize(deserializer)?))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_retention_defaults_to_a_week_and_reads_from_the_file() {
        assert_eq!(
            ServerSettings::default().event_retention(),
            Duration::from_secs(7 * 24 * 3600)
        );
        let file: ServerSettings = toml_from("event_retention_hours = 2");
        assert_eq!(file.event_retention(), Duration::from_secs(2 * 3600));
        let off: ServerSettings = toml_from("event_retention_hours = 0");
        assert!(off.event_retention().is_zero());
    }

    #[test]
    fn tls_needs_both_files_or_neither() {
        let mut server = ServerSettings::default();
        assert_eq!(server.tls_files().unwrap(), None);
        assert_eq!(server.scheme(), "http");
        server.tls_cert = PathBuf::from("/etc/toold/cert.pem");
        let err = server.tls_files().unwrap_err().to_string();
        assert!(err.contains("tls_cert is set, tls_key is not"), "{err}");
        server.tls_key = PathBuf::from("/etc/toold/key.pem");
        let files = server.tls_files().unwrap().unwrap();
        assert_eq!(files.key, PathBuf::from("/etc/toold/key.pem"));
        assert_eq!(server.scheme(), "https");
        let bound = "10.0.0.1:7070".parse().unwrap();
        assert_eq!(server.advertised(bound), "https://10.0.0.1:7070");
        server.tls_cert = PathBuf::new();
        let err = server.tls_files().unwrap_err().to_string();
        assert!(err.contains("tls_key is set, tls_cert is not"), "{err}");
    }

    fn toml_from(text: &str) -> ServerSettings {
        use figment::providers::{Format, Toml};
        figment::Figment::from(Toml::string(text))
            .extract()
            .unwrap()
    }
}
