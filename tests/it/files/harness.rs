//! A dispatcher wired with the built-in registry and a session on a fresh workspace, so that
//! every call passes through the real pipeline (schema, `validate_input`, permission, hooks,
//! execution) and its context updates reach the session.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toold::dispatch::{DispatchDeps, DispatchSettings, Dispatcher, InMemoryResultStore};
use toold::event::EventBus;
use toold::hooks::{HookChain, ToolHook};
use toold::permission::{ModePolicy, PermissionLevel};
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ErrorKind, ToolCall, ToolResult};
use toold::tools::{SkillSettings, ToolDeps, WebFetchSettings, builtin_registry};

use crate::support::workspace::TempWorkspace;

/// A workspace (`<tmp>/ws`) beside a directory outside it (`<tmp>/outside`), a session on the
/// workspace and a dispatcher.
pub struct Env {
    _temp: TempWorkspace,
    pub workspace: PathBuf,
    pub outside: PathBuf,
    pub session: Arc<SessionState>,
    pub registry: ToolRegistry,
    dispatcher: Dispatcher,
    mode: PermissionLevel,
}

pub fn registry() -> ToolRegistry {
    let deps = ToolDeps {
        results: Arc::new(InMemoryResultStore::default()),
        web_fetch: WebFetchSettings::default(),
        skills: SkillSettings::default(),
        shells: Default::default(),
    };
    builtin_registry(&deps).expect("the built-in registry builds")
}

impl Env {
    pub fn new() -> Env {
        Env::build(PermissionLevel::WorkspaceWrite, Vec::new())
    }

    pub fn with_mode(mode: PermissionLevel) -> Env {
        Env::build(mode, Vec::new())
    }

    pub fn build(mode: PermissionLevel, hooks: Vec<Arc<dyn ToolHook>>) -> Env {
        let temp = TempWorkspace::new();
        let (workspace, outside) = (temp.root.clone(), temp.outside.clone());
        let deps = DispatchDeps {
            permission: Arc::new(ModePolicy),
            hooks: HookChain::new(hooks),
            ..DispatchDeps::in_memory(EventBus::new(1024))
        };
        let settings = DispatchSettings {
            call_timeout: Duration::from_secs(30),
            ..DispatchSettings::default()
        };
        let session = Arc::new(SessionState::new(
            SessionConfig::new("sess_files", &workspace).permission_mode(mode),
        ));
        Env {
            _temp: temp,
            workspace,
            outside,
            session,
            registry: registry(),
            dispatcher: Dispatcher::new(deps, settings),
            mode,
        }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.workspace.join(relative)
    }

    /// Writes a file in the workspace from outside the session.
    pub fn put(&self, relative: &str, content: impl AsRef<[u8]>) -> PathBuf {
        let path = self.path(relative);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).unwrap();
        }
        std::fs::write(&path, content).unwrap();
        path
    }

    pub fn text(&self, relative: &str) -> String {
        std::fs::read_to_string(self.path(relative)).unwrap()
    }

    pub async fn batch(&self, calls: Vec<(&str, Value)>) -> Vec<ToolResult> {
        let pool = Arc::new(ToolPool::assemble(
            &self.registry,
            &[],
            &self.session,
            &PoolOptions::for_mode(self.mode),
        ));
        let calls = calls
            .into_iter()
            .enumerate()
            .map(|(i, (name, input))| ToolCall::new(format!("c{i}"), name, input))
            .collect();
        self.dispatcher
            .execute_batch(self.session.clone(), pool, calls)
            .await
            .results
    }

    pub async fn call(&self, name: &str, input: Value) -> ToolResult {
        self.batch(vec![(name, input)]).await.remove(0)
    }
}

/// The output of a successful result (panics with the output otherwise).
#[track_caller]
pub fn ok(result: &ToolResult) -> &str {
    assert!(!result.is_error, "expected success, got: {}", result.output);
    &result.output
}

/// The output of a failed result of `kind` (panics otherwise).
#[track_caller]
pub fn failed(result: &ToolResult, kind: ErrorKind) -> &str {
    assert!(
        result.is_error,
        "expected {kind}, got success: {}",
        result.output
    );
    assert_eq!(result.error_kind, Some(kind), "{}", result.output);
    &result.output
}

/// Whether anything under `dir` was modified or created: its files and their contents.
pub fn snapshot(dir: &Path) -> Vec<(PathBuf, Vec<u8>)> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let bytes = std::fs::read(&path).unwrap();
                found.push((path, bytes));
            }
        }
    }
    found.sort();
    found
}
