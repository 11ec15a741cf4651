//! A dispatcher with the built-in registry, over a fresh workspace in a temporary directory,
//! and access to the real `rg` binary for comparisons.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::Arc;
use std::time::Duration;

use serde_json::Value;
use toold::dispatch::{DispatchDeps, DispatchSettings, Dispatcher, InMemoryResultStore};
use toold::event::EventBus;
use toold::hooks::{HookChain, ToolHook};
use toold::permission::{ModePolicy, PermissionLevel};
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ToolCall, ToolResult};
use toold::tools::{SkillSettings, ToolDeps, WebFetchSettings, builtin_registry};

use crate::support::deadline::{OutputWithin, STEP};
use crate::support::workspace::TempWorkspace;

/// A session whose workspace is `<tmp>/ws`; `<tmp>/outside` is a sibling outside it.
pub struct Workspace {
    _temp: TempWorkspace,
    /// The workspace, canonical.
    pub root: PathBuf,
    /// A directory next to the workspace, outside it.
    pub outside: PathBuf,
    registry: ToolRegistry,
    dispatcher: Dispatcher,
    session: Arc<SessionState>,
    mode: PermissionLevel,
}

impl Workspace {
    pub fn new(mode: PermissionLevel) -> Workspace {
        Workspace::with_hooks(mode, Vec::new())
    }

    pub fn with_hooks(mode: PermissionLevel, hooks: Vec<Arc<dyn ToolHook>>) -> Workspace {
        let temp = TempWorkspace::new();
        let (root, outside) = (temp.root.clone(), temp.outside.clone());
        let results = InMemoryResultStore::default();
        let deps = ToolDeps {
            results: Arc::new(results.clone()),
            web_fetch: WebFetchSettings::default(),
            skills: SkillSettings::default(),
            shells: Default::default(),
        };
        let registry = builtin_registry(&deps).expect("built-in tools register");
        let mut dispatch = DispatchDeps::in_memory(EventBus::new(1024));
        dispatch.permission = Arc::new(ModePolicy);
        dispatch.hooks = HookChain::new(hooks);
        dispatch.results = Arc::new(results);
        let settings = DispatchSettings {
            call_timeout: Duration::from_secs(60),
            ..DispatchSettings::default()
        };
        let session = Arc::new(SessionState::new(
            SessionConfig::new("sess_search", &root).permission_mode(mode),
        ));
        Workspace {
            _temp: temp,
            root,
            outside,
            registry,
            dispatcher: Dispatcher::new(dispatch, settings),
            session,
            mode,
        }
    }

    /// Writes `contents` at `relative` (under the workspace), creating directories.
    pub fn write(&self, relative: &str, contents: impl AsRef<[u8]>) -> PathBuf {
        let path = self.root.join(relative);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, contents).unwrap();
        path
    }

    /// Runs one call through the whole pipeline and returns its result.
    pub async fn call(&self, name: &str, input: Value) -> ToolResult {
        let pool = Arc::new(ToolPool::assemble(
            &self.registry,
            &[],
            &self.session,
            &PoolOptions::for_mode(self.mode),
        ));
        let mut outcome = self
            .dispatcher
            .execute_batch(
                self.session.clone(),
                pool,
                vec![ToolCall::new("call_1", name, input)],
            )
            .await;
        assert_eq!(outcome.results.len(), 1);
        outcome.results.remove(0)
    }

    /// A call that must succeed; its output.
    pub async fn ok(&self, name: &str, input: Value) -> String {
        let result = self.call(name, input.clone()).await;
        assert!(
            !result.is_error,
            "{name} {input} failed: {:?} {}",
            result.error_kind, result.output
        );
        result.output
    }
}

/// The `rg` binary, or `None` outside CI when it is missing (the comparison is then skipped
/// with a message). In CI (`CI=true`) a missing `rg` fails the test: `.ci/run` installs it.
pub fn ripgrep() -> Option<PathBuf> {
    let found = std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|dir| dir.join("rg"))
            .find(|candidate| candidate.is_file())
    });
    if found.is_none() {
        crate::support::skip_unless_ci("rg is not installed (the comparison with ripgrep)");
    }
    found
}

/// `rg ARGS` run in `cwd` with no configuration file; its stdout.
pub fn run_rg(rg: &Path, cwd: &Path, args: &[String]) -> String {
    let output = Command::new(rg)
        .args(args)
        .current_dir(cwd)
        .env_remove("RIPGREP_CONFIG_PATH")
        .output_within(STEP, "rg")
        .expect("rg runs");
    assert!(
        output.status.code().is_some_and(|code| code <= 1),
        "rg {args:?} failed: {}",
        String::from_utf8_lossy(&output.stderr)
    );
    String::from_utf8(output.stdout).expect("rg output is UTF-8 for the fixture")
}
