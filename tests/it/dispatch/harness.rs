//! Test tools and a harness that wires a registry, a dispatcher and a session together.

use std::path::PathBuf;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use toold::dispatch::{
    BatchOutcome, DispatchDeps, DispatchSettings, Dispatcher, InMemoryAuditLog, InMemoryResultStore,
};
use toold::event::{Event, EventBus};
use toold::hooks::{HookChain, ToolHook};
use toold::permission::{ModePolicy, PermissionLevel, PermissionPolicy};
use toold::registry::{PoolOptions, RegisteredTool, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec, ToolSpecBuilder};

pub type Run = Arc<
    dyn Fn(Value, ToolContext) -> BoxFuture<'static, Result<ToolOutput, ToolError>> + Send + Sync,
>;

pub type Validate = Arc<dyn Fn(&Value) -> Result<(), ToolError> + Send + Sync>;

/// A tool whose behaviour is a closure.
pub struct FnTool {
    pub spec: ToolSpec,
    pub run: Run,
    pub validate: Option<Validate>,
}

#[async_trait]
impl Tool for FnTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        match &self.validate {
            Some(validate) => validate(input),
            None => Ok(()),
        }
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        (self.run)(input, ctx.clone()).await
    }
}

/// A spec builder for a read-only, concurrency-safe tool with an open object schema.
pub fn safe_spec(name: &str) -> ToolSpecBuilder {
    ToolSpec::builder(name)
        .description(format!("test tool {name}"))
        .max_result_size_chars(Some(100_000))
        .read_only(true)
        .concurrency_safe(true)
        .destructive(false)
        .permission(PermissionLevel::ReadOnly)
}

/// A spec builder with every flag left on its fail-closed default except the permission.
pub fn unsafe_spec(name: &str) -> ToolSpecBuilder {
    ToolSpec::builder(name)
        .description(format!("test tool {name}"))
        .max_result_size_chars(Some(100_000))
        .permission(PermissionLevel::ReadOnly)
}

pub fn tool<F, Fut>(spec: ToolSpecBuilder, run: F) -> Arc<dyn Tool>
where
    F: Fn(Value, ToolContext) -> Fut + Send + Sync + 'static,
    Fut: std::future::Future<Output = Result<ToolOutput, ToolError>> + Send + 'static,
{
    Arc::new(FnTool {
        spec: spec.build().expect("test spec builds"),
        run: Arc::new(move |input, ctx| Box::pin(run(input, ctx))),
        validate: None,
    })
}

/// Counts calls running at once and remembers the most seen.
#[derive(Default)]
pub struct Tracker {
    running: AtomicUsize,
    max: AtomicUsize,
    log: Mutex<Vec<String>>,
}

impl Tracker {
    pub fn enter(&self, label: &str) {
        let now = self.running.fetch_add(1, Ordering::SeqCst) + 1;
        self.max.fetch_max(now, Ordering::SeqCst);
        self.log.lock().unwrap().push(format!("start {label}"));
    }

    pub fn leave(&self, label: &str) {
        self.log.lock().unwrap().push(format!("end {label}"));
        self.running.fetch_sub(1, Ordering::SeqCst);
    }

    pub fn max(&self) -> usize {
        self.max.load(Ordering::SeqCst)
    }

    pub fn log(&self) -> Vec<String> {
        self.log.lock().unwrap().clone()
    }
}

/// A tool that records itself in `tracker` and sleeps `input.ms` milliseconds.
pub fn tracked(spec: ToolSpecBuilder, tracker: Arc<Tracker>) -> Arc<dyn Tool> {
    tool(spec, move |input, _ctx| {
        let tracker = tracker.clone();
        async move {
            let label = input["label"].as_str().unwrap_or("?").to_owned();
            tracker.enter(&label);
            let ms = input["ms"].as_u64().unwrap_or(20);
            tokio::time::sleep(Duration::from_millis(ms)).await;
            tracker.leave(&label);
            Ok(ToolOutput::text(label))
        }
    })
}

pub struct Harness {
    pub registry: ToolRegistry,
    pub external: Vec<Arc<RegisteredTool>>,
    pub dispatcher: Dispatcher,
    pub session: Arc<SessionState>,
    pub audit: InMemoryAuditLog,
    pub results: InMemoryResultStore,
    pub events: EventBus,
    pub options: PoolOptions,
}

pub struct HarnessBuilder {
    permission: Arc<dyn PermissionPolicy>,
    tools: Vec<Arc<dyn Tool>>,
    settings: DispatchSettings,
    hooks: Vec<Arc<dyn ToolHook>>,
    mode: PermissionLevel,
    interactive: bool,
    events: Option<EventBus>,
}

impl HarnessBuilder {
    /// Publish on `events` (shared with something built before the dispatcher).
    pub fn events(mut self, events: EventBus) -> Self {
        self.events = Some(events);
        self
    }

    pub fn tool(mut self, tool: Arc<dyn Tool>) -> Self {
        self.tools.push(tool);
        self
    }

    pub fn max_concurrency(mut self, max: usize) -> Self {
        self.settings.max_concurrency = max;
        self
    }

    pub fn permission(mut self, policy: Arc<dyn PermissionPolicy>) -> Self {
        self.permission = policy;
        self
    }

    pub fn hook(mut self, hook: Arc<dyn ToolHook>) -> Self {
        self.hooks.push(hook);
        self
    }

    pub fn mode(mut self, mode: PermissionLevel) -> Self {
        self.mode = mode;
        self
    }

    pub fn interactive(mut self, interactive: bool) -> Self {
        self.interactive = interactive;
        self
    }

    pub fn build(self) -> Harness {
        let mut registry = ToolRegistry::new();
        for tool in self.tools {
            registry.register(tool).expect("test tool registers");
        }
        let events = self.events.unwrap_or_else(|| EventBus::new(65_536));
        let audit = InMemoryAuditLog::default();
        let results = InMemoryResultStore::default();
        let deps = DispatchDeps {
            permission: self.permission,
            hooks: HookChain::new(self.hooks),
            results: Arc::new(results.clone()),
            audit: Arc::new(audit.clone()),
            events: events.clone(),
        };
        let session = Arc::new(SessionState::new(
            SessionConfig::new("sess_test", PathBuf::from("/tmp"))
                .permission_mode(self.mode)
                .interactive(self.interactive),
        ));
        Harness {
            registry,
            external: Vec::new(),
            dispatcher: Dispatcher::new(deps, self.settings),
            session,
            audit,
            results,
            events,
            options: PoolOptions::for_mode(self.mode),
        }
    }
}

impl Harness {
    pub fn builder() -> HarnessBuilder {
        HarnessBuilder {
            permission: Arc::new(ModePolicy),
            tools: Vec::new(),
            settings: DispatchSettings {
                call_timeout: Duration::from_secs(20),
                cancel_grace: Duration::from_millis(500),
                ..DispatchSettings::default()
            },
            hooks: Vec::new(),
            mode: PermissionLevel::WorkspaceWrite,
            interactive: false,
            events: None,
        }
    }

    pub fn pool(&self) -> Arc<ToolPool> {
        let mut options = self.options.clone();
        options.loaded = self.session.loaded_tools();
        Arc::new(ToolPool::assemble(
            &self.registry,
            &self.external,
            &self.session,
            &options,
        ))
    }

    pub async fn run(&self, calls: Vec<ToolCall>) -> BatchOutcome {
        self.dispatcher
            .execute_batch(self.session.clone(), self.pool(), calls)
            .await
    }

    /// Events published so far on a fresh subscription's view (subscribe before running).
    pub fn drain(receiver: &mut tokio::sync::broadcast::Receiver<Arc<Event>>) -> Vec<Arc<Event>> {
        let mut events = Vec::new();
        while let Ok(event) = receiver.try_recv() {
            events.push(event);
        }
        events
    }
}

pub fn call(id: &str, name: &str, input: Value) -> ToolCall {
    ToolCall::new(id, name, input)
}

pub fn labelled(id: &str, name: &str, ms: u64) -> ToolCall {
    call(id, name, json!({"label": id, "ms": ms}))
}
