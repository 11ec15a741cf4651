//! One running instance of a configured server (the daemon's, or one session's) and the task
//! that keeps it running: connect, list the tools, serve calls, and when the connection ends,
//! restart with backoff; until stopped.
//!
//! - **State** (`starting` → `ready`; `restarting` after a crash or a failed start; `failed`
//!   while it waits to retry; `stopped`) with the last error and the restart count, shown by
//!   `GET /v1/mcp/servers`.
//! - **Backoff** 250 ms doubling to 30 s between attempts; a connection that stayed up for a
//!   minute resets it.
//! - **Tools** are listed at each connection and again on `tools/list_changed`; each listing
//!   bumps the instance's generation, which the service's pool cache compares, so the next
//!   batch sees the new list and a running batch keeps its frozen pool. A listed tool whose
//!   schema is not an object (or otherwise does not register) is left out and named in the
//!   last error.
//! - **Stop** (session close, daemon shutdown) cancels the task: the client is closed and a
//!   stdio process gets SIGTERM, then SIGKILL after 2 s, and is reaped.

use std::path::PathBuf;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::{Duration, Instant};

use rmcp::model::{ClientRequest, CustomRequest, CustomResult, ServerResult};
use rmcp::service::{Peer, RoleClient};
use serde::Serialize;
use serde_json::{Value, json};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::connection::{self, ChildProcess, Client, Routes};
use super::naming::bridged_name;
use super::settings::McpServerSettings;
use super::tool::BridgedTool;
use crate::registry::{RegisteredTool, ToolSource};

const FIRST_BACKOFF: Duration = Duration::from_millis(250);
const MAX_BACKOFF: Duration = Duration::from_secs(30);
/// A connection up this long resets the backoff.
const STABLE: Duration = Duration::from_secs(60);
/// How long a stdio server has to exit after SIGTERM.
const STOP_GRACE: Duration = Duration::from_secs(2);
/// The longest a stop waits: closing the client and the process, each within its grace.
const STOP_WAIT: Duration = Duration::from_secs(10);

/// Where an instance is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Phase {
    Starting,
    Ready,
    Restarting,
    Failed,
    Stopped,
}

impl Phase {
    pub fn as_str(self) -> &'static str {
        match self {
            Phase::Starting => "starting",
            Phase::Ready => "ready",
            Phase::Restarting => "restarting",
            Phase::Failed => "failed",
            Phase::Stopped => "stopped",
        }
    }
}

/// The state `GET /v1/mcp/servers` gives a session-scoped server no session runs (not an
/// instance's phase: [`super::McpBridge::configured`]).
pub const NOT_STARTED: &str = "not_started";

/// What `GET /v1/mcp/servers` shows of an instance.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct ServerStatus {
    pub name: String,
    pub scope: &'static str,
    pub session_id: Option<String>,
    pub transport: &'static str,
    pub state: &'static str,
    pub pid: Option<u32>,
    pub tools: Vec<String>,
    pub last_error: Option<String>,
    pub restarts: u64,
}

struct State {
    phase: Phase,
    peer: Option<Peer<RoleClient>>,
    pid: Option<u32>,
    tools: Arc<Vec<Arc<RegisteredTool>>>,
    last_error: Option<String>,
    restarts: u64,
}

/// A running instance of a server.
pub struct Instance {
    settings: Arc<McpServerSettings>,
    session_id: Option<String>,
    cwd: PathBuf,
    routes: Arc<Routes>,
    state: Mutex<State>,
    /// Bumped at each tool listing (and stop): the pool cache's key.
    generation: AtomicU64,
    /// Sees the phase change (session creation waits for the first start).
    phase: watch::Sender<Phase>,
    /// Every instance's listings bump the bridge's counter too (the MCP door's list_changed).
    changed: watch::Sender<u64>,
    stop: CancellationToken,
    stopped: tokio::sync::Notify,
}

impl Instance {
    /// Starts the instance's task.
    pub fn start(
        settings: Arc<McpServerSettings>,
        session_id: Option<String>,
        cwd: PathBuf,
        changed: watch::Sender<u64>,
    ) -> Arc<Instance> {
        let instance = Arc::new(Instance {
            settings,
            session_id,
            cwd,
            routes: Arc::default(),
            state: Mutex::new(State {
                phase: Phase::Starting,
                peer: None,
                pid: None,
                tools: Arc::default(),
                last_error: None,
                restarts: 0,
            }),
            generation: AtomicU64::new(0),
            phase: watch::Sender::new(Phase::Starting),
            changed,
            stop: CancellationToken::new(),
            stopped: tokio::sync::Notify::new(),
        });
        tokio::spawn(instance.clone().supervise());
        instance
    }

    pub fn settings(&self) -> &McpServerSettings {
        &self.settings
    }

    pub fn routes(&self) -> &Arc<Routes> {
        &self.routes
    }

    /// The connection to send a call on, or why there is none.
    pub fn peer(&self) -> Result<Peer<RoleClient>, String> {
        let state = self.lock();
        let mut why = match &state.peer {
            // A connection whose loop ended is stale even before the supervisor notices.
            Some(peer) if peer.is_transport_closed() => {
                "its connection closed; it is being restarted".to_owned()
            }
            Some(peer) => return Ok(peer.clone()),
            None => format!("the server is not ready (state {})", state.phase.as_str()),
        };
        if let Some(error) = &state.last_error {
            why.push_str(&format!("; last error: {error}"));
        }
        Err(why)
    }

    /// The connection to send a call on, waiting (at most the startup timeout, or until
    /// `cancel` fires) while the server starts or restarts.
    pub async fn ready_peer(&self, cancel: &CancellationToken) -> Result<Peer<RoleClient>, String> {
        let deadline =
            tokio::time::Instant::now() + Duration::from_millis(self.settings.startup_timeout_ms);
        let mut phase = self.phase.subscribe();
        loop {
            let current = *phase.borrow_and_update();
            match self.peer() {
                Ok(peer) => return Ok(peer),
                Err(why) if current == Phase::Stopped => return Err(why),
                Err(_) => {}
            }
            // Not ready, or ready on a connection that just closed: wait for the next phase.
            tokio::select! {
                changed = tokio::time::timeout_at(deadline, phase.changed()) => {
                    if !matches!(changed, Ok(Ok(()))) {
                        return self.peer();
                    }
                }
                () = cancel.cancelled() => return self.peer(),
            }
        }
    }

    /// The tools it offers now and their generation.
    pub fn tools(&self) -> (u64, Arc<Vec<Arc<RegisteredTool>>>) {
        let tools = self.lock().tools.clone();
        (self.generation.load(Ordering::Acquire), tools)
    }

    /// Waits until the first start has ended (ready or not), at most the startup timeout.
    pub async fn first_start(&self) {
        let mut phase = self.phase.subscribe();
        let limit = Duration::from_millis(self.settings.startup_timeout_ms);
        let _ = tokio::time::timeout(limit, phase.wait_for(|p| *p != Phase::Starting)).await;
    }

    /// Stops it and waits until its process is gone (at most [`STOP_WAIT`]: a supervisor
    /// that died of a panic would never say so).
    pub async fn stop(&self) {
        let notified = self.stopped.notified();
        self.stop.cancel();
        if self.lock().phase != Phase::Stopped
            && tokio::time::timeout(STOP_WAIT, notified).await.is_err()
        {
            tracing::error!(mcp_server = %self.settings.name, "an MCP server did not stop in time");
        }
    }

    pub fn status(&self) -> ServerStatus {
        let state = self.lock();
        ServerStatus {
            name: self.settings.name.clone(),
            scope: self.settings.scope.as_str(),
            session_id: self.session_id.clone(),
            transport: self.settings.transport(),
            state: state.phase.as_str(),
            pid: state.pid,
            tools: state.tools.iter().map(|t| t.name().to_owned()).collect(),
            last_error: state.last_error.clone(),
            restarts: state.restarts,
        }
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        // Only whole fields are assigned under this lock.
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn set_phase(&self, phase: Phase) {
        self.lock().phase = phase;
        self.phase.send_replace(phase);
    }

    fn set_tools(&self, tools: Vec<Arc<RegisteredTool>>, skipped: Vec<String>) {
        let mut state = self.lock();
        state.tools = Arc::new(tools);
        if !skipped.is_empty() {
            state.last_error = Some(format!("tools left out: {}", skipped.join("; ")));
        }
        drop(state);
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.changed.send_modify(|n| *n += 1);
    }

    async fn supervise(self: Arc<Self>) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            let connected = tokio::select! {
                biased;
                () = self.stop.cancelled() => break,
                connected = self.connect() => connected,
            };
            let started = Instant::now();
            match connected {
                Ok((client, child)) => {
                    let ended = self.serve(client, child).await;
                    if self.stop.is_cancelled() {
                        break;
                    }
                    self.lock().last_error = Some(ended);
                }
                Err(error) => self.lock().last_error = Some(error),
            }
            if started.elapsed() >= STABLE {
                backoff = FIRST_BACKOFF;
            }
            {
                let mut state = self.lock();
                state.peer = None;
                state.pid = None;
                state.restarts += 1;
            }
            tracing::warn!(
                mcp_server = %self.settings.name,
                session = ?self.session_id,
                error = ?self.lock().last_error,
                "an MCP server stopped; restarting in {} ms", backoff.as_millis()
            );
            self.set_phase(Phase::Failed);
            tokio::select! {
                () = tokio::time::sleep(backoff) => {}
                () = self.stop.cancelled() => break,
            }
            backoff = (backoff * 2).min(MAX_BACKOFF);
            self.set_phase(Phase::Restarting);
        }
        {
            let mut state = self.lock();
            state.peer = None;
            state.pid = None;
            state.tools = Arc::default();
        }
        self.generation.fetch_add(1, Ordering::AcqRel);
        self.set_phase(Phase::Stopped);
        self.stopped.notify_waiters();
    }

    /// One connection, its handshake and its first listing, within the startup timeout.
    async fn connect(self: &Arc<Self>) -> Result<(Client, Option<ChildProcess>), String> {
        let limit = Duration::from_millis(self.settings.startup_timeout_ms);
        let attempt = async {
            let (client, mut child) = if self.settings.url.is_some() {
                let client = connection::connect_http(&self.settings, self.routes.clone());
                (client.await.map_err(|e| e.to_string())?, None)
            } else {
                let connected =
                    connection::connect_stdio(&self.settings, &self.cwd, self.routes.clone());
                let (client, child) = connected.await.map_err(|e| e.to_string())?;
                self.lock().pid = Some(child.pid);
                (client, Some(child))
            };
            match self.list_tools(client.peer()).await {
                Ok(()) => Ok((client, child)),
                Err(error) => {
                    if let Some(child) = child.as_mut() {
                        child.stop(STOP_GRACE).await;
                    }
                    Err(error)
                }
            }
        };
        match tokio::time::timeout(limit, attempt).await {
            Ok(result) => result,
            Err(_) => Err(format!(
                "it did not start within {} ms (startup_timeout_ms)",
                limit.as_millis()
            )),
        }
    }

    async fn list_tools(self: &Arc<Self>, peer: &Peer<RoleClient>) -> Result<(), String> {
        let listed = list_raw_tools(peer).await?;
        let settings = &self.settings;
        let offered = |name: &str| {
            (settings.enabled_tools.is_empty() || settings.enabled_tools.iter().any(|t| t == name))
                && !settings.disabled_tools.iter().any(|t| t == name)
        };
        let mut tools: Vec<Arc<RegisteredTool>> = Vec::new();
        let mut skipped = Vec::new();
        for listed in &listed {
            let Some(raw) = listed.get("name").and_then(Value::as_str) else {
                skipped.push("a tool without a name".to_owned());
                continue;
            };
            if !offered(raw) {
                continue;
            }
            let name = bridged_name(&settings.name, raw);
            if tools.iter().any(|tool| tool.name() == name) {
                skipped.push(format!("\"{raw}\": another tool's name is also {name}"));
                continue;
            }
            let registered = BridgedTool::new(self, name, listed)
                .map_err(|err| err.to_string())
                .and_then(|tool| {
                    RegisteredTool::new(Arc::new(tool), ToolSource::External)
                        .map_err(|err| err.to_string())
                });
            match registered {
                Ok(registered) => tools.push(Arc::new(registered)),
                Err(err) => skipped.push(format!("\"{raw}\": {err}")),
            }
        }
        tools.sort_by(|a, b| a.name().cmp(b.name()));
        self.set_tools(tools, skipped);
        Ok(())
    }

    /// Serves until the connection ends or the instance is stopped; why it ended.
    async fn serve(self: &Arc<Self>, client: Client, mut child: Option<ChildProcess>) -> String {
        let peer = client.peer().clone();
        let mut close = Some(client.cancellation_token());
        let (quit_tx, mut quit) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let reason = client.waiting().await;
            let _ = quit_tx.send(reason);
        });
        self.lock().peer = Some(peer.clone());
        self.set_phase(Phase::Ready);
        let mut quit_seen = false;
        let ended = loop {
            tokio::select! {
                () = self.stop.cancelled() => break "stopped".to_owned(),
                () = self.routes.list_changed.notified() => {
                    let limit = Duration::from_millis(self.settings.startup_timeout_ms);
                    let listed = tokio::select! {
                        listed = tokio::time::timeout(limit, self.list_tools(&peer)) => listed,
                        () = self.stop.cancelled() => break "stopped".to_owned(),
                    };
                    let error = match listed {
                        Ok(Ok(())) => continue,
                        Ok(Err(error)) => error,
                        Err(_) => format!("tools/list did not answer within {} ms", limit.as_millis()),
                    };
                    self.lock().last_error = Some(error);
                }
                reason = &mut quit => {
                    quit_seen = true;
                    break match reason {
                        Ok(Ok(rmcp::service::QuitReason::Closed)) | Err(_) => {
                            "the connection closed".to_owned()
                        }
                        Ok(reason) => format!("the connection ended ({reason:?})"),
                    };
                }
            }
        };
        self.lock().peer = None;
        if !self.stop.is_cancelled() {
            // The listing must not show a dead server as ready while it is cleaned up.
            self.set_phase(Phase::Restarting);
        }
        if let Some(close) = close.take() {
            close.cancel();
        }
        if !quit_seen {
            let _ = tokio::time::timeout(STOP_GRACE, quit).await;
        }
        let Some(child) = child.as_mut() else {
            return ended;
        };
        child.stop(STOP_GRACE).await;
        let mut why = match child.child.try_wait().ok().flatten() {
            Some(status) => format!("{ended}: the process ended ({status})"),
            None => ended,
        };
        let tail = child.stderr_tail();
        if !tail.is_empty() {
            why.push_str(&format!("; its stderr ends: {tail}"));
        }
        why
    }
}

/// The most pages and tools a listing may have: a server that pages for ever is refused.
const MAX_PAGES: usize = 100;
const MAX_TOOLS: usize = 10_000;

/// Every tool the server lists, page by page, as JSON. Sent as a custom request and read
/// as JSON rather than as rmcp's `ListToolsResult`, so one tool that does not parse (an
/// input schema that is not an object) is left out alone instead of failing the listing.
async fn list_raw_tools(peer: &Peer<RoleClient>) -> Result<Vec<Value>, String> {
    let mut tools = Vec::new();
    let mut cursor: Option<String> = None;
    for _ in 0..MAX_PAGES {
        let params = cursor.as_ref().map(|cursor| json!({"cursor": cursor}));
        let request = ClientRequest::CustomRequest(CustomRequest::new("tools/list", params));
        let page = match peer.send_request(request).await {
            Ok(ServerResult::ListToolsResult(page)) => {
                serde_json::to_value(page).map_err(|err| err.to_string())?
            }
            Ok(ServerResult::CustomResult(CustomResult(page))) => page,
            Ok(_) => return Err("tools/list answered with something else".into()),
            Err(err) => return Err(format!("tools/list failed: {err}")),
        };
        let Some(listed) = page.get("tools").and_then(Value::as_array) else {
            return Err("tools/list answered without a tools array".into());
        };
        tools.extend(listed.iter().cloned());
        if tools.len() > MAX_TOOLS {
            return Err(format!("tools/list gave more than {MAX_TOOLS} tools"));
        }
        cursor = page
            .get("nextCursor")
            .and_then(Value::as_str)
            .map(str::to_owned);
        if cursor.is_none() {
            return Ok(tools);
        }
    }
    Err(format!("tools/list gave more than {MAX_PAGES} pages"))
}
