//! Wiring for the misc tools' tests: the built-in registry with test settings, sessions,
//! detached execution, and a dispatcher over the same result store.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use toold::dispatch::{
    BatchOutcome, DispatchDeps, DispatchSettings, Dispatcher, InMemoryResultStore,
};
use toold::event::EventBus;
use toold::permission::PermissionLevel;
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolResult, ToolSpec};
use toold::tools::{SkillSettings, ToolDeps, WebFetchSettings, builtin_registry};

/// What a test environment is built from.
#[derive(Default)]
pub struct EnvOptions {
    pub web_fetch: WebFetchSettings,
    pub skill_dirs: Vec<PathBuf>,
    pub interactive: bool,
    pub output_schema: Option<Value>,
    /// Extra tools registered beside the built-ins (e.g. deferred ones for `tool_search`).
    pub extra: Vec<Arc<dyn Tool>>,
}

pub struct Env {
    pub registry: ToolRegistry,
    pub results: InMemoryResultStore,
    pub events: EventBus,
    pub dispatcher: Dispatcher,
    pub session: Arc<SessionState>,
}

impl Env {
    pub fn new() -> Env {
        Env::with(EnvOptions::default())
    }

    pub fn with(options: EnvOptions) -> Env {
        let results = InMemoryResultStore::default();
        let deps = ToolDeps {
            results: Arc::new(results.clone()),
            web_fetch: options.web_fetch,
            skills: SkillSettings {
                directories: options.skill_dirs,
            },
            shells: Default::default(),
        };
        let mut registry = builtin_registry(&deps).expect("the built-in registry builds");
        for tool in options.extra {
            registry.register(tool).expect("test tool registers");
        }
        let events = EventBus::new(4_096);
        let mut dispatch_deps = DispatchDeps::in_memory(events.clone());
        dispatch_deps.results = Arc::new(results.clone());
        let settings = DispatchSettings {
            call_timeout: Duration::from_secs(30),
            cancel_grace: Duration::from_millis(500),
            ..DispatchSettings::default()
        };
        let mut config =
            SessionConfig::new("sess_misc", std::env::temp_dir()).interactive(options.interactive);
        config.output_schema = options.output_schema;
        Env {
            registry,
            results,
            events,
            dispatcher: Dispatcher::new(dispatch_deps, settings),
            session: Arc::new(SessionState::new(config)),
        }
    }

    /// The registered tool called `name`.
    pub fn tool(&self, name: &str) -> Arc<dyn Tool> {
        self.registry
            .get(name)
            .unwrap_or_else(|| panic!("tool {name} is registered"))
            .tool
            .clone()
    }

    /// Runs `name` outside a dispatcher: semantic validation, then execution.
    pub async fn run(&self, name: &str, input: Value) -> Result<ToolOutput, ToolError> {
        run_detached(self.tool(name).as_ref(), &self.session, input).await
    }

    pub fn pool(&self) -> Arc<ToolPool> {
        let mut options = PoolOptions::for_mode(PermissionLevel::WorkspaceWrite);
        options.loaded = self.session.loaded_tools();
        Arc::new(ToolPool::assemble(
            &self.registry,
            &[],
            &self.session,
            &options,
        ))
    }

    /// Runs one batch through the dispatcher.
    pub async fn batch(&self, calls: &[(&str, Value)]) -> BatchOutcome {
        let calls = calls
            .iter()
            .enumerate()
            .map(|(i, (name, input))| ToolCall::new(format!("c{i}"), *name, input.clone()))
            .collect();
        self.dispatcher
            .execute_batch(self.session.clone(), self.pool(), calls)
            .await
    }

    /// Runs one call through the dispatcher.
    pub async fn call(&self, name: &str, input: Value) -> ToolResult {
        self.batch(&[(name, input)]).await.results.remove(0)
    }
}

/// `validate_input` then `execute`, as the dispatcher would after the schema passed.
pub async fn run_detached(
    tool: &dyn Tool,
    session: &Arc<SessionState>,
    input: Value,
) -> Result<ToolOutput, ToolError> {
    let ctx = ToolContext::detached(session.clone());
    tool.validate_input(&input, &ctx).await?;
    tool.execute(input, &ctx).await
}

/// The validation message of a refused call, panicking on anything else.
pub fn validation_message(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Validation(message)) => message,
        other => panic!("expected a validation error, got {other:?}"),
    }
}

pub fn execution_message(result: Result<ToolOutput, ToolError>) -> String {
    match result {
        Err(ToolError::Execution(message)) => message,
        other => panic!("expected an execution error, got {other:?}"),
    }
}

pub use crate::support::DeferredEcho;

/// Writes `text` to `dir/relative`, creating parents.
pub fn write(dir: &Path, relative: &str, text: &str) -> PathBuf {
    let path = dir.join(relative);
    std::fs::create_dir_all(path.parent().unwrap()).unwrap();
    std::fs::write(&path, text).unwrap();
    path
}

/// A tool whose output is `count` characters cycling through `abcdefghij`, offloaded above
/// 1 000 characters (to give `read_result` something to page through).
pub struct EmitTool {
    spec: ToolSpec,
}

impl EmitTool {
    pub fn tool() -> Arc<dyn Tool> {
        let spec = ToolSpec::builder("emit")
            .description("emits count characters")
            .input_schema(json!({
                "type": "object",
                "properties": {"count": {"type": "integer", "minimum": 0}},
                "required": ["count"]
            }))
            .read_only(true)
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .max_result_size_chars(Some(1_000))
            .build()
            .expect("test spec builds");
        Arc::new(EmitTool { spec })
    }

    pub fn text(count: usize) -> String {
        "abcdefghij".chars().cycle().take(count).collect()
    }
}

#[async_trait]
impl Tool for EmitTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let count = input["count"].as_u64().unwrap_or(0) as usize;
        Ok(ToolOutput::text(EmitTool::text(count)))
    }
}
