//! Wiring: builds the store, the event bus and its persister, the service and the listener
//! both doors share (`api::listener`) from [`Settings`], and shuts them down in order.
//! [`Core`] is the part every command shares (data directory, node id, store, events,
//! service, and its orderly stop); `serve` runs a [`Daemon`] around it, `mcp`
//! ([`run_mcp_stdio`]) one stdio MCP session.
//!
//! Start: create the data directory, read (or create) the node id (a daemon's, held against a
//! second daemon by `daemon.lock`; a stdio MCP process runs under one of its own: [`Occupant`]), open the store the
//! database URL names (`store::open`: SQLite or Postgres; migrations applied), continue the
//! event bus after the last stored seq (on a store several processes write to, SQLite's file
//! as much as Postgres, the store numbers events and `relay` feeds subscribers), start the
//! event persister, mark the calls this node left unfinished as interrupted, restore the sessions it owns, bind, refuse a non-loopback
//! address without auth tokens (and warn about one without TLS; `tls`), record the node
//! (address, heartbeat; `fleet`), and print `toold listening on http://ADDR` (`https://`
//! with TLS) on stdout (logs go to stderr). SIGHUP reloads the TLS certificate. Stop (SIGTERM/SIGINT): new requests get 503 and the listener closes, running
//! batches have `shutdown_grace` to finish, then their calls are cancelled; the queued events
//! are stored, the store is closed (the audit log flushed) and `run` returns. While serving,
//! `retention` prunes events older than `[server] event_retention_hours`.

mod directory;
mod fleet;
mod isolation;
mod persister;
mod relay;
mod retention;
mod tls;

pub use isolation::enter_private_mounts;
use isolation::{environments, sandbox, workspace_settings};

use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::{Duration, SystemTime};

use tokio::net::TcpListener;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

pub use directory::Occupant;
use directory::{create_dir, hold_directory, node_id};
pub use persister::EventPersister;
// The `[server]` settings are config's (settings flow config → components, never back).
pub use crate::config::{ServerFlags, ServerSettings};

use crate::api::forward::FleetHop;
use crate::api::listener::{ServerCertificate, TlsError};
use crate::api::mcp::McpDoorSettings;
use crate::api::{ApiSettings, DaemonStatus};
use crate::config::{HalfTlsError, McpSettings, Settings, TokenPrincipal};
use crate::dispatch::{DispatchDeps, DispatchSettings, Dispatcher};
use crate::event::EventBus;
use crate::hooks::{HookChain, clean_environment};
use crate::mcp::McpBridge;
use crate::permission::{Principal, RuleContext, RulePolicy, RuleSet, RuleSource};
use crate::service::{
    CreateSessionRequest, FleetPolicy, ServiceLimits, ServiceSettings, ToolService, tool_names,
};
use crate::store::{Store, StoreApprovals, StoreError};
use crate::telemetry::metered::{MeteredApprovals, MeteredAudit, MeteredHook};
use crate::tools::{BackgroundShells, ShellLimits, SpillSettings, ToolDeps, builtin_registry};

/// Why the daemon could not start (or stop cleanly).
#[derive(Debug, thiserror::Error)]
pub enum ServerError {
    #[error("data directory \"{path}\": {source}")]
    DataDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },
    #[error(transparent)]
    Store(#[from] StoreError),
    #[error("building the tool registry: {0}")]
    Registry(String),
    #[error("[permissions]: {0}")]
    Permissions(String),
    #[error("hooks: {0}")]
    Hooks(#[from] crate::hooks::HookConfigError),
    #[error("[environments]: {0}")]
    Environments(String),
    #[error("restoring sessions: {0}")]
    Restore(String),
    #[error("cannot listen on \"{address}\": {source}")]
    Bind {
        address: String,
        #[source]
        source: std::io::Error,
    },
    #[error(
        "refusing to listen on non-loopback address {0} without auth tokens (set --auth-token or TOOLD_AUTH_TOKENS)"
    )]
    NoAuthOnPublicAddress(SocketAddr),
    #[error("[auth.oidc]: building the key-set client: {0}")]
    Oidc(String),
    #[error(transparent)]
    HalfTls(#[from] HalfTlsError),
    #[error(transparent)]
    Tls(#[from] TlsError),
    #[error(transparent)]
    Settings(#[from] crate::config::ConfigError),
    #[error("serving HTTP: {0}")]
    Serve(std::io::Error),
    #[error(
        "data directory \"{path}\" is in use by {holder}; a toold serve needs its data directory to itself: stop the other, or give this one its own --data-dir"
    )]
    DataDirInUse { path: PathBuf, holder: String },
    #[error("creating the MCP session: {0}")]
    McpSession(String),
    #[error("serving MCP on stdio: {0}")]
    Stdio(#[from] crate::api::mcp::StdioError),
}

/// The core every command runs on: the store, the event bus and its persister, and the
/// service built on them (registry, dispatcher, permissions, hooks, audit), from [`Settings`].
/// `serve` puts a listener and the fleet around it; `mcp` one stdio MCP session.
pub struct Core {
    pub service: Arc<ToolService>,
    store: Arc<dyn Store>,
    persister: EventPersister,
    /// Feeds subscribers on a store that numbers events.
    relay: Option<tokio::task::JoinHandle<()>>,
    node_id: String,
    data_dir: PathBuf,
    /// The hold on the data directory (`daemon.lock`: a daemon's exclusive, a stdio MCP
    /// process's shared), released when the process ends, however it ends.
    _hold: std::fs::File,
}

impl Core {
    /// Creates the data directory, reads (or creates) the node id, opens the store, continues
    /// the event bus, starts the persister and builds the service. Sessions are not restored:
    /// that is the daemon's to decide.
    pub async fn start(settings: &Settings, occupant: Occupant) -> Result<Core, ServerError> {
        let server = &settings.server;
        // The metrics recorder goes in first, so nothing recorded at start is lost.
        let _ = crate::telemetry::prometheus();
        let data_dir = create_dir(&server.data_dir)?;
        let hold = hold_directory(&data_dir, occupant)?;
        let node_id = match occupant {
            Occupant::Daemon => node_id(&data_dir)?,
            Occupant::Stdio => format!("mcp-{}", uuid::Uuid::now_v7().simple()),
        };
        let store = crate::store::open(&server.database_location(), &node_id).await?;
        let last_seq = store.last_event_seq().await?;
        let (stored, persisted) = watch::channel(last_seq);
        // `toold mcp` processes share the directory with each other, so the store numbers
        // their events (a bus would number alone what another process numbers too); a daemon
        // has an SQLite directory to itself and numbers its own, live, as its subscribers
        // expect; a shared store (Postgres) numbers every daemon's.
        let store_numbers =
            store.numbers_events() && (store.is_shared() || occupant == Occupant::Stdio);
        let (events, persister, relay) = if store_numbers {
            let (events, sink) =
                EventBus::numbered_by_store(server.event_buffer, last_seq).with_sink();
            let persister = EventPersister::spawn(store.clone(), sink, None);
            let relay = relay::spawn(
                store.clone(),
                events.clone(),
                last_seq,
                stored,
                CancellationToken::new(),
            );
            (events, persister, Some(relay))
        } else {
            let (events, sink) = EventBus::continuing(server.event_buffer, last_seq).with_sink();
            let persister = EventPersister::spawn(store.clone(), sink, Some(stored));
            (events, persister, None)
        };
        let service = build_service(settings, &data_dir, &node_id, store.clone(), events).await?;
        service.set_persisted_events(persisted);
        Ok(Core {
            service,
            store,
            persister,
            relay,
            node_id,
            data_dir,
            _hold: hold,
        })
    }

    /// Waits up to `grace` for running batches, then cancels their calls and waits a little
    /// longer (`cancel_grace` and two seconds) for their cancelled results; false when some
    /// still run after that. Only then may the store close: a batch that ends after it would
    /// lose its audit rows.
    pub async fn finish_batches(&self, settings: &Settings, grace: Duration) -> bool {
        if self.service.wait_for_batches(grace).await {
            return true;
        }
        tracing::warn!("shutdown grace period over: cancelling running calls");
        self.service.cancel_running_calls();
        let after_cancel = settings.dispatch.cancel_grace + Duration::from_secs(2);
        self.service.wait_for_batches(after_cancel).await
    }

    /// Stores what is still queued (writes, events) and closes the store, which flushes the
    /// audit log.
    pub async fn stop(self) {
        self.service.stop_mcp_servers().await;
        // Sessions' views come down; the next daemon mounts them again from the store.
        self.service.unmount_views();
        self.service.flush_writes().await;
        self.persister.flush_and_stop().await;
        if let Some(relay) = self.relay {
            relay.abort();
        }
        self.store.close().await;
    }
}

/// A daemon that is listening.
pub struct Daemon {
    pub service: Arc<ToolService>,
    pub status: Arc<DaemonStatus>,
    pub address: SocketAddr,
    core: Core,
    node: fleet::NodeIdentity,
    listener: TcpListener,
    settings: Settings,
    /// The certificate served, when TLS is configured.
    tls: Option<Arc<ServerCertificate>>,
    /// The accepted tokens' digests and principals (checked at start).
    tokens: Vec<TokenPrincipal>,
}

impl Daemon {
    /// Everything up to a bound listener; nothing is served yet.
    pub async fn start(settings: Settings) -> Result<Daemon, ServerError> {
        // First: a certificate that cannot be read is a mistake to report before any work.
        let tls = tls::load(&settings.server)?;
        let core = Core::start(&settings, Occupant::Daemon).await?;
        let server = &settings.server;
        let service = core.service.clone();
        let interrupted = service
            .mark_own_interrupted_calls()
            .await
            .map_err(|err| ServerError::Restore(err.to_string()))?;
        if interrupted > 0 {
            tracing::warn!(
                interrupted,
                "calls left unfinished by the previous run were marked interrupted"
            );
        }
        let restored = service
            .restore_sessions()
            .await
            .map_err(|err| ServerError::Restore(err.to_string()))?;
        let listener =
            TcpListener::bind(&server.listen)
                .await
                .map_err(|source| ServerError::Bind {
                    address: server.listen.clone(),
                    source,
                })?;
        let address = listener.local_addr().map_err(|source| ServerError::Bind {
            address: server.listen.clone(),
            source,
        })?;
        let tokens = settings.auth_principals()?;
        if !address.ip().is_loopback() && tokens.is_empty() && settings.auth.oidc.is_empty() {
            return Err(ServerError::NoAuthOnPublicAddress(address));
        }
        if let Some(warning) = tls::clear_text_warning(address, tls.is_some()) {
            tracing::warn!("{warning}");
        }
        let node = fleet::NodeIdentity {
            node_id: core.node_id.clone(),
            address: server.advertised(address),
            started_at: SystemTime::now(),
        };
        fleet::heartbeat(&*core.store, &node).await?;
        tracing::info!(node_id = %core.node_id, restored, data_dir = %core.data_dir.display(), "toold started");
        let status = Arc::new(DaemonStatus::default());
        status.ready.store(true, Ordering::Release);
        Ok(Daemon {
            service,
            status,
            address,
            core,
            node,
            listener,
            settings,
            tls,
            tokens,
        })
    }

    /// Serves until `stop` fires, then shuts down in order (see the module header).
    pub async fn serve(self, stop: CancellationToken) -> Result<(), ServerError> {
        let Daemon {
            service,
            status,
            core,
            node,
            listener,
            settings,
            tls,
            tokens,
            ..
        } = self;
        let store = core.store.clone();
        let server = &settings.server;
        let draining = CancellationToken::new();
        let pruning = retention::spawn(store.clone(), server.event_retention(), draining.clone());
        let pruning_calls =
            retention::spawn_audit(store.clone(), server.audit_retention(), draining.clone());
        let mut api = api_settings(server, &settings.mcp, &node.node_id, tls, tokens);
        api.requests_per_second_per_principal = settings.limits.requests_per_second_per_principal;
        api.oidc = crate::api::oidc::OidcVerifier::configured(&oidc_issuers(&settings.auth.oidc))
            .map_err(|err| ServerError::Oidc(err.to_string()))?;
        let beating = fleet::spawn(
            store.clone(),
            service.clone(),
            node,
            server.heartbeat_interval,
            server.node_timeout,
            draining.clone(),
        );
        let mut serving = tokio::spawn(crate::api::serve(
            listener,
            service.clone(),
            api,
            status.clone(),
            draining.clone(),
        ));
        let result = tokio::select! {
            joined = &mut serving => joined,
            () = stop.cancelled() => {
                tracing::info!("shutting down: draining requests");
                status.shutting_down.store(true, Ordering::Release);
                service.begin_shutdown();
                draining.cancel();
                drain(&service, &settings, &mut serving).await
            }
        };
        // Stopped with the drain (cancelled here too when serving ended on its own); awaited
        // so no prune runs against a closing store.
        for pruning in [pruning, pruning_calls].into_iter().flatten() {
            draining.cancel();
            let _ = pruning.await;
        }
        draining.cancel();
        let _ = beating.await;
        drop(store);
        core.stop().await;
        tracing::info!("toold stopped");
        match result {
            Ok(served) => served.map_err(ServerError::Serve),
            // The server task was aborted after the deadline or panicked; the store is
            // closed either way.
            Err(err) if err.is_cancelled() => Ok(()),
            Err(err) => Err(ServerError::Serve(std::io::Error::other(err.to_string()))),
        }
    }
}

/// Waits for running requests, and for batches still running on their own (their clients
/// went away), up to the grace period; then cancels their calls and waits for their
/// (cancelled) results a little longer before giving up on them. Only then may the store
/// close: a batch that ends after it would lose its audit rows.
async fn drain(
    service: &ToolService,
    settings: &Settings,
    serving: &mut tokio::task::JoinHandle<std::io::Result<()>>,
) -> Result<std::io::Result<()>, tokio::task::JoinError> {
    let deadline = tokio::time::Instant::now() + settings.server.shutdown_grace;
    let served = tokio::time::timeout_at(deadline, &mut *serving).await.ok();
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    let batches_ended = service.wait_for_batches(left).await;
    if batches_ended && let Some(joined) = served {
        return joined;
    }
    tracing::warn!("shutdown grace period over: cancelling running calls");
    service.cancel_running_calls();
    let after_cancel = settings.dispatch.cancel_grace + Duration::from_secs(2);
    let deadline = tokio::time::Instant::now() + after_cancel;
    // The server task is awaited once: here if it had not ended yet.
    let joined = match served {
        Some(joined) => joined,
        None => match tokio::time::timeout_at(deadline, &mut *serving).await {
            Ok(joined) => joined,
            Err(_) => {
                serving.abort();
                (&mut *serving).await
            }
        },
    };
    let left = deadline.saturating_duration_since(tokio::time::Instant::now());
    if !service.wait_for_batches(left).await {
        tracing::error!(
            "batches still running after the shutdown deadline; their calls may lack audit rows"
        );
    }
    joined
}

/// Runs the daemon until SIGTERM or SIGINT.
pub async fn run(settings: Settings) -> Result<(), ServerError> {
    let daemon = Daemon::start(settings).await?;
    // Handlers first: a SIGTERM sent as soon as the line below is read drains like any other.
    let stop = CancellationToken::new();
    tokio::spawn(wait_for_signal(signals(), stop.clone()));
    if let Some(certificate) = &daemon.tls {
        tls::reload_on_hangup(certificate.clone());
    }
    // The one line scripts and tests wait for; stdout so it never mixes with the logs.
    let scheme = daemon.settings.server.scheme();
    println!("toold listening on {scheme}://{}", daemon.address);
    tracing::info!(address = %daemon.address, "listening");
    daemon.serve(stop).await
}

/// `toold mcp`: one session over stdin/stdout until stdin ends (or SIGTERM/SIGINT), on the
/// same core as the daemon. The store is the embedded one under the data directory, whatever
/// `database_url` says: the process is a client's own. Calls another run left unfinished
/// are not marked, and no sessions are restored: those are a daemon's, which may be running
/// on the same data directory. The session is created from `[mcp]` (with the command's flags
/// applied), and a working directory named there is allowed as a root: the person who wrote
/// the command line is the operator. At the end, running batches get `shutdown_grace` (then
/// are cancelled), the session is closed and the store flushed and closed.
pub async fn run_mcp_stdio(mut settings: Settings) -> Result<(), ServerError> {
    settings.server.database_url = String::new();
    let working_directory = &settings.mcp.working_directory;
    if !working_directory.as_os_str().is_empty() {
        settings
            .server
            .allowed_roots
            .push(working_directory.clone());
    }
    let core = Core::start(&settings, Occupant::Stdio).await?;
    let stop = CancellationToken::new();
    tokio::spawn(wait_for_signal(signals(), stop.clone()));
    // Over stdio the caller is the person who started the process: `local`, an admin.
    let local = Principal::local();
    let session = match core
        .service
        .create_session(&local, mcp_session_template(&settings.mcp))
        .await
    {
        Ok(info) => info.id,
        Err(err) => {
            core.stop().await;
            return Err(ServerError::McpSession(err.to_string()));
        }
    };
    tracing::info!(%session, data_dir = %core.data_dir.display(), "toold mcp: serving one session on stdio");
    let served = crate::api::mcp::serve_stdio(
        core.service.clone(),
        session.clone(),
        settings.server.body_limit_bytes,
        stop,
    )
    .await;
    if !core
        .finish_batches(&settings, settings.server.shutdown_grace)
        .await
    {
        tracing::error!("batches still running at exit; their calls may lack audit rows");
    }
    if let Err(err) = core.service.close_session(&local, &session).await {
        tracing::warn!(%session, %err, "closing the MCP session");
    }
    core.stop().await;
    tracing::info!(%session, "toold mcp stopped");
    served.map_err(ServerError::from)
}

/// SIGTERM and SIGINT, registered now (a signal that arrives before its handler is
/// registered takes its default action: the process would die without draining).
fn signals() -> Vec<tokio::signal::unix::Signal> {
    use tokio::signal::unix::{SignalKind, signal};
    [SignalKind::terminate(), SignalKind::interrupt()]
        .into_iter()
        .filter_map(|kind| {
            signal(kind)
                .map_err(|err| tracing::error!(error = %err, ?kind, "cannot listen for a signal"))
                .ok()
        })
        .collect()
}

async fn wait_for_signal(mut signals: Vec<tokio::signal::unix::Signal>, stop: CancellationToken) {
    let received = signals.iter_mut().map(|signal| Box::pin(signal.recv()));
    if received.len() > 0 {
        futures::future::select_all(received).await;
    } else {
        std::future::pending::<()>().await;
    }
    stop.cancel();
}

async fn build_service(
    settings: &Settings,
    data_dir: &Path,
    node_id: &str,
    store: Arc<dyn Store>,
    events: EventBus,
) -> Result<Arc<ToolService>, ServerError> {
    // Outputs too large for memory spill into the data directory, not the system's /tmp.
    let spill_dir = data_dir.join("spill");
    std::fs::create_dir_all(&spill_dir).map_err(|source| ServerError::DataDir {
        path: spill_dir.clone(),
        source,
    })?;
    let sandbox = sandbox(settings, data_dir).await;
    let environments = environments(settings, data_dir, &sandbox)?;
    let shells = Arc::new(
        BackgroundShells::with_settings(
            SpillSettings {
                directory: spill_dir,
                cap_bytes: settings.sandbox.spill_bytes,
                ..SpillSettings::default()
            },
            sandbox,
        )
        .with_limits(ShellLimits {
            calls_per_session: settings.limits.shell_calls_per_session,
            background_per_session: settings.limits.background_shells_per_session,
        }),
    );
    // Command hooks see only a few of the daemon's variables, captured here once.
    let hooks = HookChain::from_settings(
        &settings.hooks,
        clean_environment(|name| std::env::var(name).ok()),
    )?
    .map(MeteredHook::wrap);
    let registry = builtin_registry(&ToolDeps {
        results: store.clone(),
        web_fetch: settings.web_fetch.clone(),
        skills: settings.skills.clone(),
        shells: shells.clone(),
    })
    .map_err(|err| ServerError::Registry(err.to_string()))?;
    let names = tool_names(&registry);
    // The home directory is read here, at the edge, and handed down as what `~/` means.
    let home = std::env::home_dir();
    // The server's rules are checked now (against a stand-in workspace), so a bad rule stops
    // the start instead of every session's creation.
    let rules = &settings.permissions;
    RuleSet::parse(
        &rules.allow,
        &rules.deny,
        &rules.ask,
        RuleSource::Server,
        &RuleContext {
            workspace: &data_dir.join("workspaces"),
            home: home.as_deref(),
            tools: &names,
        },
    )
    .map_err(|err| ServerError::Permissions(err.to_string()))?;
    let approvals = Arc::new(StoreApprovals::new(store.clone(), events.clone()));
    let policy = RulePolicy::new(
        MeteredApprovals::wrap(approvals.clone()),
        Arc::new(names),
        home.clone(),
        settings.permissions.approval_timeout(),
    );
    let dispatcher = Dispatcher::new(
        DispatchDeps {
            permission: Arc::new(policy),
            hooks,
            results: store.clone(),
            audit: MeteredAudit::wrap(store.clone()),
            events: events.clone(),
        },
        DispatchSettings {
            span_content_limit: settings.telemetry.span_content_limit(),
            ..settings.dispatch.clone()
        },
    );
    // Daemon-scoped MCP servers start now, in the background; a session waits for them.
    let daemon_dir = std::env::current_dir().unwrap_or_else(|_| PathBuf::from("/"));
    let bridge = Arc::new(McpBridge::new(settings.mcp_servers.clone(), daemon_dir));
    bridge.start();
    let service = Arc::new(
        ToolService::new(
            Arc::new(registry),
            dispatcher,
            store,
            events,
            shells,
            approvals,
            ServiceSettings {
                node_id: node_id.to_owned(),
                workspaces_dir: data_dir.join("workspaces"),
                allowed_roots: settings.server.allowed_roots.clone(),
                permissions: settings.permissions.clone(),
                home,
                skill_directories: settings.skills.directories.clone(),
            },
        )
        .with_bridge(bridge)
        .with_limits(ServiceLimits {
            concurrent_batches_per_principal: settings.limits.concurrent_batches_per_principal,
            sessions_per_principal: settings.limits.sessions_per_principal,
        })
        .with_fleet(FleetPolicy {
            node_timeout: settings.server.node_timeout,
            max_sessions: settings.server.max_sessions,
        })
        .with_workspaces(workspace_settings(settings, data_dir))
        .with_environments(environments),
    );
    // The `agent` tool opens its child sessions through the service; weak, as the service owns
    // the hub.
    let weak: std::sync::Weak<ToolService> = Arc::downgrade(&service);
    let children: std::sync::Weak<dyn crate::provider::ChildSessions> = weak;
    service.provider_hub().set_child_sessions(children);
    Ok(service)
}

/// The MCP door's settings: `[mcp]`, the body limit, and the names the daemon is reached by
/// (loopback names and the advertised address; the listener adds its own address).
fn mcp_door_settings(server: &ServerSettings, mcp: &McpSettings) -> McpDoorSettings {
    let mut allowed_hosts: Vec<String> = ["localhost", "127.0.0.1", "::1"]
        .map(str::to_owned)
        .to_vec();
    let advertised = server
        .advertise_address
        .trim_start_matches("http://")
        .trim_start_matches("https://")
        .split('/')
        .next()
        .unwrap_or_default();
    if !advertised.is_empty() {
        allowed_hosts.push(advertised.to_owned());
    }
    McpDoorSettings {
        session_template: mcp_session_template(mcp),
        allowed_origins: mcp.allowed_origins.clone(),
        allowed_hosts,
        body_limit_bytes: server.body_limit_bytes,
    }
}

/// `[auth.oidc]` as the doors take it.
fn oidc_issuers(issuers: &crate::config::OidcIssuers) -> Vec<crate::api::oidc::IssuerSettings> {
    issuers
        .0
        .iter()
        .map(|issuer| crate::api::oidc::IssuerSettings {
            issuer: issuer.issuer.clone(),
            jwks_uri: issuer.jwks_uri.clone(),
            audience: issuer.audience.clone(),
            principal_claim: issuer.principal_claim.clone(),
            roles_claim: issuer.roles_claim.clone(),
            roles: crate::api::oidc::RoleNames {
                admin: issuer.roles.admin.clone(),
                agent: issuer.roles.agent.clone(),
                observer: issuer.roles.observer.clone(),
            },
        })
        .collect()
}

/// What the sessions the MCP door creates itself are created with (`[mcp]`).
fn mcp_session_template(mcp: &McpSettings) -> CreateSessionRequest {
    let working_directory =
        (!mcp.working_directory.as_os_str().is_empty()).then(|| mcp.working_directory.clone());
    CreateSessionRequest {
        working_directory,
        permission_mode: Some(mcp.permission_mode),
        ..CreateSessionRequest::default()
    }
}

/// What the doors and their listener need of the `[server]` and `[mcp]` settings.
fn api_settings(
    server: &ServerSettings,
    mcp: &McpSettings,
    node_id: &str,
    tls: Option<Arc<ServerCertificate>>,
    auth_tokens: Vec<TokenPrincipal>,
) -> ApiSettings {
    ApiSettings {
        fleet: FleetHop {
            secret: Some(server.fleet_secret.clone()).filter(|secret| !secret.is_empty()),
            node_id: node_id.to_owned(),
        },
        mcp: mcp_door_settings(server, mcp),
        auth_tokens,
        // `[auth.oidc]`, set by the caller.
        oidc: None,
        body_limit_bytes: server.body_limit_bytes,
        request_timeout: server.request_timeout,
        max_concurrent_requests: server.max_concurrent_requests,
        // `[limits]`, set by the caller (this reads `[server]` and `[mcp]` only).
        requests_per_second_per_principal: 0,
        event_buffer: server.event_buffer,
        repoll_self_wake: server.repoll_self_wake,
        tls,
    }
}
