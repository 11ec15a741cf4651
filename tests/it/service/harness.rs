//! Builds a service the way the daemon does, over a SQLite file in a temp directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toold::dispatch::{DispatchDeps, DispatchSettings, Dispatcher};
use toold::event::EventBus;
use toold::hooks::HookChain;
use toold::permission::{Approvals, PermissionSettings, Principal, RulePolicy};
use toold::registry::calls::{BatchRequest, results_json};
use toold::service::{
    CreateSessionRequest, ServiceError, ServiceSettings, SessionInfo, ToolService, tool_names,
};
use toold::store::Store;
use toold::store::sqlite::SqliteStore;
use toold::tool::Tool;
use toold::tools::{BackgroundShells, SkillSettings, ToolDeps, WebFetchSettings, builtin_registry};

pub struct Daemon {
    pub service: Arc<ToolService>,
    /// The service's own store (to set up what only a crash leaves behind).
    pub store: Arc<dyn Store>,
    pub data: PathBuf,
    pub allowed: PathBuf,
    _dir: Arc<tempfile::TempDir>,
}

impl Daemon {
    pub async fn start() -> Daemon {
        Daemon::start_with_tools(Vec::new()).await
    }

    /// A daemon whose registry has `extra` tools besides the built-ins.
    pub async fn start_with_tools(extra: Vec<Arc<dyn Tool>>) -> Daemon {
        let dir = Arc::new(tempfile::tempdir().expect("temp dir"));
        Daemon::start_in(dir, "node-a", extra).await
    }

    /// A daemon over the same data directory (a graceful restart: what the service writes
    /// behind its answers is flushed first, as shutdown does).
    pub async fn restart(&self) -> Daemon {
        self.service.flush_writes().await;
        Daemon::start_in(self._dir.clone(), "node-a", Vec::new()).await
    }

    async fn start_in(
        dir: Arc<tempfile::TempDir>,
        node: &str,
        extra: Vec<Arc<dyn Tool>>,
    ) -> Daemon {
        let data = dir.path().join("data");
        let allowed = dir.path().join("projects");
        std::fs::create_dir_all(&data).unwrap();
        std::fs::create_dir_all(&allowed).unwrap();
        let store: Arc<dyn Store> = Arc::new(
            SqliteStore::open(&data.join("toold.db").to_string_lossy(), node)
                .await
                .expect("store opens"),
        );
        let events = EventBus::new(4096);
        let shells = Arc::new(BackgroundShells::default());
        let mut registry = builtin_registry(&ToolDeps {
            results: store.clone(),
            web_fetch: WebFetchSettings::default(),
            skills: SkillSettings::default(),
            shells: shells.clone(),
        })
        .expect("registry");
        for tool in extra {
            registry.register(tool).expect("extra tool registers");
        }
        let approvals = Arc::new(Approvals::new(store.clone(), events.clone()));
        let dispatcher = Dispatcher::new(
            DispatchDeps {
                permission: Arc::new(RulePolicy::new(
                    approvals.clone(),
                    Arc::new(tool_names(&registry)),
                    None,
                    Duration::from_secs(60),
                )),
                hooks: HookChain::default(),
                results: store.clone(),
                audit: store.clone(),
                events: events.clone(),
            },
            DispatchSettings {
                cancel_grace: Duration::from_secs(2),
                ..DispatchSettings::default()
            },
        );
        let service = Arc::new(ToolService::new(
            Arc::new(registry),
            dispatcher,
            store.clone(),
            events,
            shells,
            approvals,
            ServiceSettings {
                node_id: node.into(),
                workspaces_dir: data.join("workspaces"),
                allowed_roots: vec![allowed.clone()],
                permissions: PermissionSettings::default(),
                home: None,
                skill_directories: Vec::new(),
            },
        ));
        service.restore_sessions().await.expect("sessions restore");
        Daemon {
            service,
            store,
            data,
            allowed,
            _dir: dir,
        }
    }

    pub async fn session(&self, body: Value) -> SessionInfo {
        let request: CreateSessionRequest = serde_json::from_value(body).expect("request parses");
        self.service
            .create_session(&admin(), request)
            .await
            .expect("session created")
    }

    /// Starts a minute's `sleep` as a batch of `session` in a task of its own and returns once
    /// it runs (its `tool:pre` was published): the task answers the batch.
    pub async fn running_sleep(
        &self,
        session: &str,
    ) -> tokio::task::JoinHandle<Result<Answered, ServiceError>> {
        let mut events = self.service.events().subscribe();
        let service = self.service.clone();
        let id = session.to_owned();
        let running = tokio::spawn(async move {
            service
                .execute_body(
                    &id,
                    &calls(json!([{"id": "s", "name": "sleep", "input": {"duration_ms": 60000}}])),
                )
                .await
        });
        loop {
            let event = crate::support::deadline::within(
                crate::support::deadline::STEP,
                "tool:pre",
                events.recv(),
            )
            .await
            .unwrap();
            if event.event_type == toold::event::EventType::ToolPre && *event.session_id == *session
            {
                return running;
            }
        }
    }

    pub async fn batch(&self, session: &str, body: Value) -> Value {
        self.service
            .execute_body(session, &body)
            .await
            .expect("batch runs")
            .json()
    }
}

/// A batch answered as the HTTP door answers it: the body parsed into the service's typed
/// request, the outcome rendered in the body's shape.
#[derive(Debug)]
pub struct Answered {
    pub batch_id: String,
    pub replayed: bool,
    pub body: Value,
}

impl Answered {
    pub fn json(&self) -> Value {
        self.body.clone()
    }
}

/// Runs a JSON batch body through the service the way the HTTP door does.
pub trait ExecuteBody {
    fn execute_body(
        &self,
        session: &str,
        body: &Value,
    ) -> impl Future<Output = Result<Answered, ServiceError>> + Send;
}

impl ExecuteBody for Arc<ToolService> {
    fn execute_body(
        &self,
        session: &str,
        body: &Value,
    ) -> impl Future<Output = Result<Answered, ServiceError>> + Send {
        let parsed = BatchRequest::from_json(body).map_err(ServiceError::from);
        let (service, session) = (self.clone(), session.to_owned());
        async move {
            let outcome = service.execute_batch(&admin(), &session, parsed?).await?;
            Ok(Answered {
                // The bytes the HTTP door sends (`results_json`), read back.
                body: serde_json::from_slice(&results_json(
                    outcome.format,
                    &outcome.batch_id,
                    &outcome.results,
                ))
                .expect("results_json writes JSON"),
                batch_id: outcome.batch_id,
                replayed: outcome.replayed,
            })
        }
    }
}

pub fn write(path: &Path, text: &str) {
    std::fs::write(path, text).unwrap();
}

pub fn calls(calls: Value) -> Value {
    json!({ "calls": calls })
}

pub use crate::support::DeferredEcho;

/// The caller of every service call here: the local user, an admin (roles are the `auth`
/// area's).
pub fn admin() -> Principal {
    Principal::local()
}
