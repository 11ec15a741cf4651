//! The MCP bridge (DESIGN §8): external MCP servers' tools in a session's pool, called through
//! the same pipeline as a built-in (validated, permission-checked, hooked, audited, offloaded,
//! published). The door the other way is `api/mcp`; this module and that one are the only ones
//! naming `rmcp`, pinned in Cargo.toml.
//!
//! - [`settings`]: `[[mcp_servers]]` and its start-up checks; [`naming`]: `mcp__{server}__{tool}`.
//! - [`McpBridge`] (here): which instances run. A daemon-scoped server has one, started with
//!   the daemon; a session-scoped one has one per session that names it in `mcp_servers`,
//!   started in the session's workspace when the session goes live and stopped when it closes.
//! - [`instance`]: one instance's life (connect, list, restart with backoff, stop);
//!   [`connection`]: rmcp's client over a child's stdio (toold's transport, [`stdio`]) or
//!   Streamable HTTP (rmcp's);
//!   [`tool`]: a listed tool as a [`crate::tool::Tool`]; [`content`]: results as output.
//!
//! Decisions where DESIGN is silent:
//! - Creating a session waits until its servers (and a daemon server still in its first start)
//!   are ready or have failed, each at most its `startup_timeout_ms`; a server that fails does
//!   not fail the session: its tools are absent, and `GET /v1/mcp/servers` says why. A session
//!   restored after a restart or taken over does not wait: its tools appear when ready.
//! - The pool a batch gets is frozen; a session's bridged tools are part of what the service's
//!   pool cache compares ([`McpBridge::generation`]), so a listing that changed (a restart, a
//!   `tools/list_changed`) shows in the next batch.

pub mod connection;
pub mod content;
pub mod instance;
pub mod naming;
pub mod settings;
mod stdio;
pub mod tool;

pub use instance::ServerStatus;
pub use settings::{McpScope, McpServerSettings, McpSettingsError};

use std::collections::{BTreeMap, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use tokio::sync::watch;

use crate::registry::RegisteredTool;
use instance::Instance;

/// The configured servers and their running instances.
pub struct McpBridge {
    servers: BTreeMap<String, Arc<McpServerSettings>>,
    /// Where a daemon-scoped server without `cwd` runs.
    daemon_dir: PathBuf,
    daemon: Mutex<Vec<Arc<Instance>>>,
    sessions: Mutex<HashMap<String, Vec<Arc<Instance>>>>,
    /// Bumped by every instance's listing: something's tools changed.
    changed: watch::Sender<u64>,
}

impl McpBridge {
    /// The bridge for `servers` (checked by `config`); nothing runs until
    /// [`McpBridge::start`].
    pub fn new(servers: Vec<McpServerSettings>, daemon_dir: PathBuf) -> McpBridge {
        // rmcp's HTTP client (reqwest 0.13, rustls without a provider) needs a process-wide
        // crypto provider; another one installed first is as good.
        let _ = rustls::crypto::ring::default_provider().install_default();
        McpBridge {
            servers: servers
                .into_iter()
                .map(|server| (server.name.clone(), Arc::new(server)))
                .collect(),
            daemon_dir,
            daemon: Mutex::default(),
            sessions: Mutex::default(),
            changed: watch::Sender::new(0),
        }
    }

    /// A bridge with no servers.
    pub fn none() -> McpBridge {
        McpBridge::new(Vec::new(), PathBuf::from("/"))
    }

    /// Starts the daemon-scoped servers (in the background). Needs a Tokio runtime.
    pub fn start(&self) {
        let mut daemon = lock(&self.daemon);
        for settings in self.servers.values() {
            if settings.scope == McpScope::Daemon {
                let cwd = resolve_dir(&self.daemon_dir, &settings.cwd);
                daemon.push(Instance::start(
                    settings.clone(),
                    None,
                    cwd,
                    self.changed.clone(),
                ));
            }
        }
    }

    /// `Ok` when every name is a configured server.
    pub fn check_names(&self, names: &[String]) -> Result<(), String> {
        match names.iter().find(|name| !self.servers.contains_key(*name)) {
            None => Ok(()),
            Some(name) if self.servers.is_empty() => Err(format!(
                "unknown MCP server \"{name}\"; none is configured ([[mcp_servers]])"
            )),
            Some(name) => Err(format!(
                "unknown MCP server \"{name}\"; configured: {}",
                self.servers.keys().cloned().collect::<Vec<_>>().join(", ")
            )),
        }
    }

    /// Starts the session-scoped servers `names` lists for `session_id`, in `workspace`
    /// (daemon-scoped names are already running). Needs a Tokio runtime.
    pub fn open_session(&self, session_id: &str, workspace: &Path, names: &[String]) {
        let instances: Vec<Arc<Instance>> = names
            .iter()
            .filter_map(|name| self.servers.get(name))
            .filter(|settings| settings.scope == McpScope::Session)
            .map(|settings| {
                Instance::start(
                    settings.clone(),
                    Some(session_id.to_owned()),
                    resolve_dir(workspace, &settings.cwd),
                    self.changed.clone(),
                )
            })
            .collect();
        if !instances.is_empty() {
            lock(&self.sessions).insert(session_id.to_owned(), instances);
        }
    }

    /// Waits until `session_id`'s servers and the daemon's have ended their first start.
    pub async fn wait_started(&self, session_id: &str) {
        let instances = self.instances(session_id);
        futures::future::join_all(instances.iter().map(|i| i.first_start())).await;
    }

    /// Stops `session_id`'s servers and waits for their processes to be gone.
    pub async fn close_session(&self, session_id: &str) {
        let instances = lock(&self.sessions).remove(session_id).unwrap_or_default();
        futures::future::join_all(instances.iter().map(|i| i.stop())).await;
    }

    /// Stops every server (daemon shutdown).
    pub async fn shutdown(&self) {
        let mut instances: Vec<_> = lock(&self.sessions).drain().flat_map(|(_, i)| i).collect();
        instances.append(&mut lock(&self.daemon));
        futures::future::join_all(instances.iter().map(|i| i.stop())).await;
    }

    /// A number that changes whenever the bridged tools `session_id` sees may have.
    pub fn generation(&self, session_id: &str) -> u64 {
        if self.servers.is_empty() {
            return 0;
        }
        self.instances(session_id)
            .iter()
            .map(|instance| instance.tools().0)
            .sum()
    }

    /// The bridged tools `session_id` sees now (the daemon's servers', then its own).
    pub fn tools(&self, session_id: &str) -> Vec<Arc<RegisteredTool>> {
        if self.servers.is_empty() {
            return Vec::new();
        }
        self.instances(session_id)
            .iter()
            .flat_map(|instance| instance.tools().1.iter().cloned().collect::<Vec<_>>())
            .collect()
    }

    /// The configured servers' names, sorted.
    pub fn names(&self) -> Vec<String> {
        self.servers.keys().cloned().collect()
    }

    /// Whether any server is configured.
    pub fn has_servers(&self) -> bool {
        !self.servers.is_empty()
    }

    /// Sees a change whenever any server's tools change.
    pub fn watch(&self) -> watch::Receiver<u64> {
        self.changed.subscribe()
    }

    /// Every running instance, by name then session.
    pub fn status(&self) -> Vec<ServerStatus> {
        let mut all: Vec<ServerStatus> = lock(&self.daemon).iter().map(|i| i.status()).collect();
        all.extend(
            lock(&self.sessions)
                .values()
                .flatten()
                .map(|instance| instance.status()),
        );
        all.sort_by(|a, b| (&a.name, &a.session_id).cmp(&(&b.name, &b.session_id)));
        all
    }

    /// The session-scoped servers as configured, one entry each in state `not_started` with
    /// no session: what `GET /v1/mcp/servers` lists of a server no session (that its caller
    /// sees) runs, so an operator sees every configured server before a session starts it.
    pub fn configured(&self) -> Vec<ServerStatus> {
        self.servers
            .values()
            .filter(|settings| settings.scope == McpScope::Session)
            .map(|settings| ServerStatus {
                name: settings.name.clone(),
                scope: settings.scope.as_str(),
                session_id: None,
                transport: settings.transport(),
                state: instance::NOT_STARTED,
                pid: None,
                tools: Vec::new(),
                last_error: None,
                restarts: 0,
            })
            .collect()
    }

    fn instances(&self, session_id: &str) -> Vec<Arc<Instance>> {
        let mut instances = lock(&self.daemon).clone();
        if let Some(own) = lock(&self.sessions).get(session_id) {
            instances.extend(own.iter().cloned());
        }
        instances
    }
}

/// `dir` for an empty `cwd`, `cwd` if absolute, else `cwd` under `dir`.
fn resolve_dir(dir: &Path, cwd: &str) -> PathBuf {
    if cwd.is_empty() {
        dir.to_path_buf()
    } else {
        dir.join(cwd)
    }
}

fn lock<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Only whole entries are inserted or removed under these locks.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}
