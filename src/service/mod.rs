//! The core façade every door calls: one method per operation, no wire types.
//!
//! `ToolService` owns the live sessions, assembles each batch's frozen pool, runs batches
//! through the dispatcher (with idempotent retries), keeps the store up to date (sessions and
//! their state, batches) and answers reads (tools, batches, calls, results, events). The doors
//! (HTTP, gRPC and MCP) translate their wire formats into these typed calls and back; a
//! feature exists here once. Errors carry an [`ErrorCode`]; the doors map each code through
//! one table. Every operation on a session takes the caller's [`Principal`] and is authorised
//! here, once for every door (`access`).

mod access;
mod approvals;
mod audit;
mod batches;
mod children;
mod default_sessions;
mod environments;
mod error;
mod events;
mod limits;
mod ownership;
mod placement;
mod providers;
mod recent_batches;
mod run_to_completion;
mod sessions;
mod snapshots;
mod streams;
mod transfers;
mod write_behind;

use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::SystemTime;

pub use crate::environment::{EnvironmentRequest, ImageInfo};
pub use crate::registry::tool_names;
pub use crate::workspace::files::RangeAnswer;
pub use crate::workspace::transfer_tools::UploadBody;
pub use approvals::{PendingApproval, ResolveApprovalRequest};
pub use audit::{EXPORT_PAGE, ExportedCall};
pub use batches::{BatchOutcome, BatchStatusView};
pub use children::SessionTokens;
pub use environments::{EnvironmentInfo, Environments};
pub use error::{ErrorCode, ServiceError};
pub use events::{EventItem, EventStart};
pub use limits::ServiceLimits;
pub use ownership::{TakeOver, nobody_runs};
pub use placement::{FleetPolicy, SessionPlace};
pub use sessions::{CreateSessionRequest, SessionInfo, SessionRuleTexts, ToolFilter};
pub use snapshots::{ForkInfo, ForkRequest, MAX_FORKS, SnapshotInfo, SnapshotRequest};
pub use streams::{BatchItem, BatchStream, CallStream, StreamDetail, StreamRequest};
pub use transfers::{ArchiveDownload, BodyStream, FileDownload};

use crate::dispatch::Dispatcher;
use crate::dispatch::ResultPage;
use crate::event::EventBus;
use crate::mcp::McpBridge;
pub use crate::mcp::ServerStatus;
use crate::permission::{PermissionSettings, Principal, ToolNames};
pub use crate::provider::{
    ChildSession, ChildSessions, ConnectionStatus, Invocation, MAX_NAME_CHARS, Outbound,
    ProviderConnection, ProviderHub, ProviderStatus, Registration, ToolDeclaration, Transport,
};
use crate::registry::{PoolCache, PoolOptions, ToolFormat, ToolPool, ToolRegistry, definitions};
use crate::session::SessionState;
use crate::store::{CallPage, CallRow, Store, StoreApprovals};
pub use crate::tools::SkillSummary;
use crate::tools::{BackgroundShells, skill_catalog};
use access::{Access, unknown_session};
use tokio_util::sync::CancellationToken;

/// What the service needs to know about where it runs.
#[derive(Clone, Debug)]
pub struct ServiceSettings {
    /// This daemon's id, recorded as the owner of its sessions and on every audit row.
    pub node_id: String,
    /// Where sessions created without a working directory get a fresh one.
    pub workspaces_dir: PathBuf,
    /// Roots a session's working directory may lie under (the workspaces directory always is).
    pub allowed_roots: Vec<PathBuf>,
    /// The server's permission rules (compiled against each session's workspace).
    pub permissions: PermissionSettings,
    /// What `~/` means in path rules: the daemon's home directory.
    pub home: Option<PathBuf>,
    /// Where the `skill` tool finds skills (`[skills] directories`), listed by [`ToolService::skills`].
    pub skill_directories: Vec<PathBuf>,
}

/// Whether a read of a session's history accepts a closed session. A closed session's own
/// resources (its batches, approvals, event stream, audit log *as a resource of the session*)
/// are gone, as after any delete; its history stays readable through the queries that name
/// it (`GET /v1/calls?session=`, `GET /v1/events?session=`, gRPC `Subscribe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Closed {
    /// A closed session is `not_found`.
    Gone,
    /// A closed session's history is read like an open one's.
    Readable,
}

/// The tool whose skills [`ToolService::skills`] lists.
pub const SKILL_TOOL: &str = "skill";

/// A session the daemon is running.
pub struct LiveSession {
    pub state: Arc<SessionState>,
    pub info: SessionInfo,
    /// The pool's shape besides the loaded tools (mode filter, denied tools).
    pool_options: PoolOptions,
    /// Held shared by each batch while it runs (batches run side by side; their calls meet
    /// in the session's call gate, `session::gate`); closing the session takes it exclusive
    /// to wait, with a deadline, for the running batches to answer.
    batches_running: tokio::sync::RwLock<()>,
    /// When this daemon began running the session (created, restored or adopted): a batch
    /// stored as running from before then was cut off by a restart or a takeover.
    live_since: SystemTime,
    /// Its place in its principal's `sessions_per_principal`, given back when it is dropped
    /// (`None` without that limit).
    _open: Option<limits::LimitSlot>,
    /// Its hold on its environment's image, if any (the image cannot be deleted meanwhile).
    _image: Option<crate::environment::ImageLease>,
    /// Its environment's mounted filesystem, taken down when the session closes.
    environment_view: Option<crate::workspace::MountedView>,
}

/// The core service.
pub struct ToolService {
    registry: Arc<ToolRegistry>,
    /// The registry's names and aliases, for the tools permission rules name.
    tool_names: ToolNames,
    dispatcher: Dispatcher,
    store: Arc<dyn Store>,
    events: EventBus,
    shells: Arc<BackgroundShells>,
    /// Pending approvals; the same one the dispatcher's permission policy waits on.
    approvals: Arc<StoreApprovals>,
    settings: ServiceSettings,
    sessions: Mutex<HashMap<String, Arc<LiveSession>>>,
    /// Each session's pool, reused by its batches until it loads another tool.
    pools: PoolCache,
    /// The persister's progress (highest stored seq), when events are persisted.
    persisted_events: Mutex<Option<tokio::sync::watch::Receiver<u64>>>,
    /// Fires when the daemon starts shutting down: subscriptions end.
    stopping: CancellationToken,
    /// Running and recently completed batches, with their results.
    recent: recent_batches::RecentBatches,
    /// Session state and batch records, written behind the answers.
    behind: write_behind::WriteBehind,
    /// When this service started: a batch stored as running from before then was cut off.
    started_at: SystemTime,
    /// Every batch's task, so shutdown can wait for them (their audit rows and bookkeeping)
    /// before the store closes.
    batch_tasks: tokio_util::task::TaskTracker,
    /// Each principal's default session (by name).
    default_sessions: tokio::sync::Mutex<HashMap<std::sync::Arc<str>, String>>,
    /// External MCP servers' tools ([`ToolService::with_bridge`]; none by default).
    bridge: Arc<McpBridge>,
    /// Which daemon of the fleet runs a session ([`ToolService::with_fleet`]).
    placement: placement::Placement,
    /// Which session is whose child (`children`).
    children: children::Children,
    /// The child sessions' tokens, shared with the doors' gate.
    session_tokens: Arc<SessionTokens>,
    /// Tools provided by connected programs ([`ToolService::with_providers`]).
    providers: Arc<ProviderHub>,
    /// `[limits]` per principal ([`ToolService::with_limits`]; none by default).
    limits: limits::PrincipalLimits,
    /// Sessions' views, snapshots' layers, upload limits ([`ToolService::with_workspaces`]).
    workspaces: Arc<crate::workspace::Workspaces>,
    /// Images and environments ([`ToolService::with_environments`]; none by default).
    environments: environments::Environments,
}

impl ToolService {
    /// `approvals` must be the one the dispatcher's [`crate::permission::RulePolicy`] waits
    /// on, so that resolutions reach the waiting calls. Must be called inside a Tokio runtime:
    /// it starts the write-behind task.
    pub fn new(
        registry: Arc<ToolRegistry>,
        dispatcher: Dispatcher,
        store: Arc<dyn Store>,
        events: EventBus,
        shells: Arc<BackgroundShells>,
        approvals: Arc<StoreApprovals>,
        settings: ServiceSettings,
    ) -> ToolService {
        let builtins = registry
            .tools()
            .map(|tool| tool.name().to_owned())
            .chain(registry.aliases().map(|(alias, _)| alias.to_owned()))
            .collect::<Vec<_>>();
        // The workspaces directory lies in the data directory (views and snapshots beside it).
        let data_dir = settings
            .workspaces_dir
            .parent()
            .map_or_else(|| settings.workspaces_dir.clone(), PathBuf::from);
        ToolService {
            providers: ProviderHub::new(builtins),
            tool_names: tool_names(&registry),
            registry,
            dispatcher,
            behind: write_behind::WriteBehind::spawn(store.clone()),
            store,
            events,
            shells,
            approvals,
            settings,
            sessions: Mutex::new(HashMap::new()),
            pools: PoolCache::default(),
            persisted_events: Mutex::new(None),
            stopping: CancellationToken::new(),
            recent: recent_batches::RecentBatches::default(),
            started_at: SystemTime::now(),
            batch_tasks: tokio_util::task::TaskTracker::new(),
            default_sessions: tokio::sync::Mutex::new(HashMap::new()),
            bridge: Arc::new(McpBridge::none()),
            placement: placement::Placement::default(),
            children: children::Children::default(),
            session_tokens: Arc::default(),
            limits: limits::PrincipalLimits::default(),
            workspaces: Arc::new(crate::workspace::Workspaces::new(
                crate::workspace::WorkspaceSettings::under(&data_dir),
            )),
            environments: environments::Environments::default(),
        }
    }

    /// Enforces `limits` (see `limits`); 0 in either is no limit.
    pub fn with_limits(mut self, limits: ServiceLimits) -> ToolService {
        self.limits = limits::PrincipalLimits::new(limits);
        self
    }

    /// Keeps sessions' views, snapshots and upload limits as `settings` say.
    pub fn with_workspaces(mut self, settings: crate::workspace::WorkspaceSettings) -> ToolService {
        self.workspaces = Arc::new(crate::workspace::Workspaces::new(settings));
        self
    }

    /// Mounts `bridge`'s servers: their tools join the pools of the sessions that see them.
    pub fn with_bridge(mut self, bridge: Arc<McpBridge>) -> ToolService {
        self.bridge = bridge;
        self
    }

    /// Stops every MCP server the bridge runs (shutdown, once the batches have ended).
    pub async fn stop_mcp_servers(&self) {
        self.bridge.shutdown().await;
    }

    /// Every configured MCP server (`GET /v1/mcp/servers`): each running instance the
    /// bridge has, the daemon's and those of sessions `caller` sees (an agent learns no
    /// other's session id here), and each session-scoped server none of those runs, in state
    /// `not_started`; by name, then session.
    pub fn mcp_servers(&self, caller: &Principal) -> Vec<ServerStatus> {
        let live = self.live();
        let sees = |id: &String| {
            live.get(id)
                .is_some_and(|session| Self::sees(caller, id, session.info.principal.as_deref()))
        };
        let mut servers: Vec<ServerStatus> = self
            .bridge
            .status()
            .into_iter()
            .filter(|server| server.session_id.as_ref().is_none_or(sees))
            .collect();
        let unseen: Vec<ServerStatus> = self
            .bridge
            .configured()
            .into_iter()
            .filter(|configured| servers.iter().all(|server| server.name != configured.name))
            .collect();
        servers.extend(unseen);
        servers.sort_by(|a, b| (&a.name, &a.session_id).cmp(&(&b.name, &b.session_id)));
        servers
    }

    /// What a request may name: every tool name and alias (rules), and the configured MCP
    /// servers' names (`mcp_servers`), for the HTTP door's OpenAPI document.
    pub fn nameable(&self) -> (Vec<String>, Vec<String>) {
        let tools = self
            .tool_names
            .all()
            .into_iter()
            .map(str::to_owned)
            .collect();
        (tools, self.bridge.names())
    }

    /// Waits up to `within` for every batch still running (a client that went away leaves its
    /// batch running on its own); whether they all ended.
    pub async fn wait_for_batches(&self, within: std::time::Duration) -> bool {
        self.batch_tasks.close();
        tokio::time::timeout(within, self.batch_tasks.wait())
            .await
            .is_ok()
    }

    /// Waits until the writes queued behind earlier answers (session state, batch records)
    /// are in the store: graceful shutdown calls this before closing the store.
    pub async fn flush_writes(&self) {
        self.behind.flush().await;
    }

    /// Starts shutting down: event subscriptions end (so connections can drain).
    pub fn begin_shutdown(&self) {
        self.stopping.cancel();
    }

    /// Fires when the daemon starts shutting down, for what a door keeps open beyond a request
    /// (the MCP door's sessions and streams) to end with it.
    pub fn shutting_down(&self) -> CancellationToken {
        self.stopping.child_token()
    }

    /// Cancels every running call of every live session (the shutdown deadline passed). The
    /// sessions stay open in the store and carry on after a restart.
    pub fn cancel_running_calls(&self) {
        for session in self.live().values() {
            session.state.close();
        }
    }

    /// `not_found` unless the session is live or stored; a closed one counts only when
    /// `closed` is [`Closed::Readable`].
    async fn ensure_session_known(
        &self,
        session_id: &str,
        closed: Closed,
    ) -> Result<(), ServiceError> {
        if self.live().contains_key(session_id) {
            return Ok(());
        }
        match self.store.get_session(session_id).await? {
            Some(record) if record.closed_at.is_none() || closed == Closed::Readable => Ok(()),
            Some(_) => Err(ServiceError::not_found(format!(
                "session \"{session_id}\" is closed (its audit log and events stay readable \
                 by session id)"
            ))),
            None => Err(unknown_session(session_id)),
        }
    }

    pub fn events(&self) -> &EventBus {
        &self.events
    }

    pub fn store(&self) -> &Arc<dyn Store> {
        &self.store
    }

    fn live(&self) -> MutexGuard<'_, HashMap<String, Arc<LiveSession>>> {
        // Only inserts and removes happen under this lock; a panic cannot leave it half-done.
        self.sessions.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// The live session `id`, or `not_found`.
    fn session(&self, id: &str) -> Result<Arc<LiveSession>, ServiceError> {
        self.live()
            .get(id)
            .cloned()
            .ok_or_else(|| unknown_session(id))
    }

    /// The live session `id` if `caller` may `access` it (see `access`), else the refusal.
    fn session_for(
        &self,
        caller: &Principal,
        id: &str,
        access: Access,
    ) -> Result<Arc<LiveSession>, ServiceError> {
        if access == Access::Write {
            self.authorize_write(caller)?;
        }
        let live = self.session(id)?;
        if !Self::sees(caller, id, live.info.principal.as_deref()) {
            return Err(unknown_session(id));
        }
        Ok(live)
    }

    /// `Ok` when session `id` is live here and `caller` may read it: the MCP door checks this
    /// before serving a session's own endpoint.
    pub fn check_session(&self, caller: &Principal, id: &str) -> Result<(), ServiceError> {
        self.session_for(caller, id, Access::Read).map(|_| ())
    }

    /// `Ok` when `caller` may read session `id` and it is open (live here or on another
    /// daemon): the HTTP door checks this before serving a session's own event stream.
    pub async fn check_session_open(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<(), ServiceError> {
        self.authorize(caller, id, Access::Read).await?;
        self.ensure_session_known(id, Closed::Gone).await
    }

    /// The pool a batch of `session` runs with, frozen now: the one its previous batch had
    /// unless the session has loaded a tool since or its bridged tools changed.
    fn pool(&self, session: &LiveSession) -> Arc<ToolPool> {
        let id = session.info.id.as_str();
        // Either part changing changes the version (the hub's counter only grows).
        let external_version = self
            .bridge
            .generation(id)
            .wrapping_mul(0x9E37_79B9_7F4A_7C15)
            ^ self.providers.generation();
        self.pools.get_or_assemble(
            &session.state,
            &session.pool_options,
            external_version,
            |options| {
                let mut external = self.bridge.tools(id);
                external.extend(
                    self.providers
                        .tools(session.info.principal.as_deref(), &session.info.providers),
                );
                ToolPool::assemble(&self.registry, &external, &session.state, options)
            },
        )
    }

    /// The session's tool definitions in `format`.
    pub fn list_tools(
        &self,
        caller: &Principal,
        session_id: &str,
        format: &str,
    ) -> Result<Vec<serde_json::Value>, ServiceError> {
        let format: ToolFormat =
            format
                .parse()
                .map_err(|err: crate::registry::UnknownFormat| {
                    ServiceError::invalid(err.to_string())
                })?;
        let session = self.session_for(caller, session_id, Access::Read)?;
        Ok(definitions(&self.pool(&session), format))
    }

    /// Sees a number change each time the tools `session_id` offers may have changed (a
    /// deferred tool loaded, a bridged server's listing, a provider connecting or leaving); it
    /// closes when the session ends. Must be called inside a Tokio runtime.
    pub fn watch_tool_list(
        &self,
        caller: &Principal,
        session_id: &str,
    ) -> Result<tokio::sync::watch::Receiver<u64>, ServiceError> {
        let mut loaded = self
            .session_for(caller, session_id, Access::Read)?
            .state
            .watch_loaded_tools();
        // Any server's listing or provider counts: a change another session does not see is a
        // spurious "may have changed", which costs a client one tools/list.
        let mut bridged = self.bridge.has_servers().then(|| self.bridge.watch());
        let mut provided = self.providers.watch();
        let (merged, changes) = tokio::sync::watch::channel(0u64);
        tokio::spawn(async move {
            loop {
                let bridge_changed = async {
                    match bridged.as_mut() {
                        Some(bridged) => bridged.changed().await.is_ok(),
                        None => std::future::pending().await,
                    }
                };
                let open = tokio::select! {
                    changed = loaded.changed() => changed.is_ok(),
                    open = bridge_changed => open,
                    changed = provided.changed() => changed.is_ok(),
                    () = merged.closed() => false,
                };
                if !open {
                    return;
                }
                merged.send_modify(|n| *n += 1);
            }
        });
        Ok(changes)
    }

    /// Whether the daemon has skill directories: the MCP door then offers prompts.
    pub fn skills_configured(&self) -> bool {
        !self.settings.skill_directories.is_empty()
    }

    /// The skills `session_id` can load, sorted by name: none unless its pool offers the
    /// `skill` tool (the MCP door lists them as prompts and gets one by calling that tool).
    pub async fn skills(
        &self,
        caller: &Principal,
        session_id: &str,
    ) -> Result<Vec<SkillSummary>, ServiceError> {
        let session = self.session_for(caller, session_id, Access::Read)?;
        let offered = self.pool(&session).resolve(SKILL_TOOL).is_ok();
        if !offered || self.settings.skill_directories.is_empty() {
            return Ok(Vec::new());
        }
        let directories = self.settings.skill_directories.clone();
        tokio::task::spawn_blocking(move || skill_catalog(&directories))
            .await
            .map_err(|err| ServiceError::internal(format!("listing the skills failed: {err}")))
    }

    /// Every built-in tool with all its metadata (`GET /v1/tools`).
    pub fn catalogue(&self) -> Vec<serde_json::Value> {
        self.registry
            .tools()
            .map(|tool| crate::registry::definition(tool, ToolFormat::Toold))
            .collect()
    }

    /// Cancels the session's running calls whose tools allow it, and its children's.
    pub fn interrupt(&self, caller: &Principal, session_id: &str) -> Result<(), ServiceError> {
        let session = self.session_for(caller, session_id, Access::Write)?;
        // Children first: their calls stop as interrupted before the parent's `agent` call,
        // cancelled, closes them.
        self.interrupt_children(session_id);
        session.state.interrupt();
        Ok(())
    }

    /// Cancels batch `batch_id` of the session alone, as an interrupt would (its calls whose
    /// tools allow it stop, queued ones never start), recording `by` as who cancelled it in
    /// their audit rows; `not_found` unless the batch is running or waiting for its turn.
    pub fn cancel_batch(
        &self,
        caller: &Principal,
        session_id: &str,
        batch_id: &str,
        by: &str,
    ) -> Result<(), ServiceError> {
        let session = self.session_for(caller, session_id, Access::Write)?;
        if session.state.cancel_batch(batch_id, by) {
            return Ok(());
        }
        Err(ServiceError::not_found(format!(
            "batch \"{batch_id}\" of session \"{session_id}\" is neither running nor queued"
        )))
    }

    /// A session's audit log, a page at a time.
    pub async fn list_calls(
        &self,
        caller: &Principal,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
        closed: Closed,
    ) -> Result<CallPage, ServiceError> {
        self.authorize(caller, session_id, Access::Read).await?;
        self.ensure_session_known(session_id, closed).await?;
        Ok(self
            .store
            .list_calls(session_id, after, limit.clamp(1, 1000))
            .await?)
    }

    /// The audit rows of one batch of the session (empty for a batch it does not have).
    pub async fn batch_calls(
        &self,
        caller: &Principal,
        session_id: &str,
        batch_id: &str,
        closed: Closed,
    ) -> Result<Vec<CallRow>, ServiceError> {
        self.authorize(caller, session_id, Access::Read).await?;
        self.ensure_session_known(session_id, closed).await?;
        Ok(self.store.batch_calls(session_id, batch_id).await?)
    }

    /// A page of an offloaded output by character range. A result of a session the caller
    /// may not read is unknown to it, with the message of a missing one.
    pub async fn read_result(
        &self,
        caller: &Principal,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, ServiceError> {
        let page = self
            .store
            .read(result_id, offset, limit)
            .await
            .map_err(|err| ServiceError::not_found(err.to_string()))?;
        if self
            .authorize(caller, &page.session_id, Access::Read)
            .await
            .is_err()
        {
            return Err(ServiceError::not_found(format!(
                "unknown result \"{result_id}\""
            )));
        }
        Ok(page)
    }
}
