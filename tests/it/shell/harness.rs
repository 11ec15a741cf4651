//! A dispatcher with the shell tools and a session whose workspace is a fresh directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde_json::{Value, json};
use toold::dispatch::{
    DispatchDeps, DispatchSettings, Dispatcher, InMemoryAuditLog, InMemoryResultStore,
};
use toold::event::EventBus;
use toold::hooks::HookChain;
use toold::permission::{ModePolicy, PermissionLevel};
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ToolCall, ToolResult};
use toold::tools::BackgroundShells;

/// How long a test waits for something that should happen promptly.
pub const PATIENCE: Duration = Duration::from_secs(20);

pub struct Shell {
    pub registry: ToolRegistry,
    pub dispatcher: Dispatcher,
    pub session: Arc<SessionState>,
    pub shells: Arc<BackgroundShells>,
    pub results: InMemoryResultStore,
    pub mode: PermissionLevel,
    /// Keeps the workspace alive.
    pub _workspace: tempfile::TempDir,
}

impl Shell {
    /// Full access, so that every command may run.
    pub fn new() -> Shell {
        Shell::with_mode(PermissionLevel::DangerFullAccess)
    }

    pub fn with_mode(mode: PermissionLevel) -> Shell {
        let workspace = tempfile::tempdir().expect("a workspace");
        Shell::with_shells(mode, Arc::new(BackgroundShells::default()), workspace)
    }

    /// A session in `workspace` whose shells are `shells` (e.g. sandboxed ones).
    pub fn with_shells(
        mode: PermissionLevel,
        shells: Arc<BackgroundShells>,
        workspace: tempfile::TempDir,
    ) -> Shell {
        Shell::with_network(mode, shells, workspace, false)
    }

    /// [`Shell::with_shells`] for a session that asked for network access (`network`) or not.
    pub fn with_network(
        mode: PermissionLevel,
        shells: Arc<BackgroundShells>,
        workspace: tempfile::TempDir,
        network: bool,
    ) -> Shell {
        let mut registry = ToolRegistry::new();
        for tool in shells.tools().expect("the shell tools build") {
            registry.register(tool).expect("the shell tools register");
        }
        let results = InMemoryResultStore::default();
        let deps = DispatchDeps {
            permission: Arc::new(ModePolicy),
            hooks: HookChain::default(),
            results: Arc::new(results.clone()),
            audit: Arc::new(InMemoryAuditLog::default()),
            events: EventBus::new(1024),
        };
        // A stopped call returns its partial output after the kill grace, the wait for the
        // group and the drain; the cancel grace covers that with room for a loaded machine,
        // so tests never see the dispatcher give up on a call first.
        let settings = DispatchSettings {
            cancel_grace: PATIENCE,
            ..DispatchSettings::default()
        };
        // Canonical, so it compares equal to what `pwd -P` reports.
        let root = workspace
            .path()
            .canonicalize()
            .expect("a canonical workspace");
        let mut config =
            SessionConfig::new(format!("sess_{}", uuid_like()), root).permission_mode(mode);
        config.network = network;
        let session = Arc::new(SessionState::new(config));
        Shell {
            registry,
            dispatcher: Dispatcher::new(deps, settings),
            session,
            shells,
            results,
            mode,
            _workspace: workspace,
        }
    }

    pub fn root(&self) -> &Path {
        self.session.working_directory()
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.root().join(relative)
    }

    pub fn pool(&self) -> Arc<ToolPool> {
        Arc::new(ToolPool::assemble(
            &self.registry,
            &[],
            &self.session,
            &PoolOptions::for_mode(self.mode),
        ))
    }

    pub async fn batch(&self, calls: Vec<ToolCall>) -> Vec<ToolResult> {
        self.dispatcher
            .execute_batch(self.session.clone(), self.pool(), calls)
            .await
            .results
    }

    /// One call, one result.
    pub async fn call(&self, name: &str, input: Value) -> ToolResult {
        let mut results = self.batch(vec![ToolCall::new("call_1", name, input)]).await;
        assert_eq!(results.len(), 1);
        results.remove(0)
    }

    pub async fn bash(&self, command: &str) -> ToolResult {
        self.call("bash", json!({"command": command})).await
    }
}

fn uuid_like() -> String {
    use std::sync::atomic::{AtomicU64, Ordering};
    static NEXT: AtomicU64 = AtomicU64::new(1);
    format!(
        "{}_{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    )
}

/// Whether a process is gone: no such pid, or a zombie (dead, waiting to be reaped by
/// whoever adopted it).
pub fn process_gone(pid: i32) -> bool {
    match std::fs::read_to_string(format!("/proc/{pid}/stat")) {
        Err(_) => true,
        Ok(stat) => {
            // The state follows the parenthesised command name.
            let state = stat
                .rsplit(')')
                .next()
                .and_then(|rest| rest.split_whitespace().next());
            state == Some("Z") || state == Some("X")
        }
    }
}

/// Waits until `pid` is gone, up to [`PATIENCE`].
pub async fn wait_gone(pid: i32) -> bool {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    while tokio::time::Instant::now() < deadline {
        if process_gone(pid) {
            return true;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    false
}

/// Waits until `path` holds a pid, up to [`PATIENCE`].
pub async fn read_pid(path: &Path) -> i32 {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    loop {
        if let Ok(text) = std::fs::read_to_string(path)
            && let Ok(pid) = text.trim().parse()
        {
            return pid;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no pid in {}",
            path.display()
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}
