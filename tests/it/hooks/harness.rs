//! A dispatcher with the shell tools and the hooks a test configures, and a session whose
//! workspace is a fresh directory; hook scripts are written into a separate directory.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::{Value, json};
use toold::dispatch::{
    DispatchDeps, DispatchSettings, Dispatcher, InMemoryAuditLog, InMemoryResultStore,
};
use toold::event::EventBus;
use toold::hooks::{HookChain, HookConfig, HookSettings, OnFailure, clean_environment};
use toold::permission::{ModePolicy, PermissionLevel};
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ToolCall, ToolResult};
use toold::tools::BackgroundShells;

pub struct Hooked {
    registry: ToolRegistry,
    dispatcher: Dispatcher,
    pub session: Arc<SessionState>,
    _workspace: tempfile::TempDir,
}

/// Writes an executable hook script and returns a hook running it.
pub fn script(dir: &Path, name: &str, body: &str) -> HookConfig {
    let path = dir.join(name);
    std::fs::write(&path, format!("#!/bin/bash\n{body}\n")).unwrap();
    let mut perms = std::fs::metadata(&path).unwrap().permissions();
    std::os::unix::fs::PermissionsExt::set_mode(&mut perms, 0o755);
    std::fs::set_permissions(&path, perms).unwrap();
    HookConfig {
        matcher: "bash".into(),
        command: Some(path.to_string_lossy().into_owned()),
        url: None,
        timeout_ms: 20_000,
        on_failure: OnFailure::Allow,
    }
}

impl Hooked {
    pub fn new(settings: HookSettings) -> Hooked {
        // The daemon's environment as the hooks' lookup sees it: a secret among the rest.
        let env = clean_environment(|name| match name {
            "PATH" => std::env::var("PATH").ok(),
            "HOME" => Some("/nonexistent-home".into()),
            "TOOLD_AUTH_TOKENS" | "AWS_SECRET_ACCESS_KEY" => Some("top-secret".into()),
            _ => None,
        });
        let hooks = HookChain::from_settings(&settings, env).expect("valid hooks");
        let shells = Arc::new(BackgroundShells::default());
        let mut registry = ToolRegistry::new();
        for tool in shells.tools().unwrap() {
            registry.register(tool).unwrap();
        }
        let deps = DispatchDeps {
            permission: Arc::new(ModePolicy),
            hooks,
            results: Arc::new(InMemoryResultStore::default()),
            audit: Arc::new(InMemoryAuditLog::default()),
            events: EventBus::new(1024),
        };
        let workspace = tempfile::tempdir().unwrap();
        let root = workspace.path().canonicalize().unwrap();
        let session = Arc::new(SessionState::new(
            SessionConfig::new("sess_hooks", root)
                .permission_mode(PermissionLevel::DangerFullAccess),
        ));
        Hooked {
            registry,
            dispatcher: Dispatcher::new(deps, DispatchSettings::default()),
            session,
            _workspace: workspace,
        }
    }

    pub fn path(&self, relative: &str) -> PathBuf {
        self.session.working_directory().join(relative)
    }

    pub async fn call(&self, input: Value) -> ToolResult {
        let pool = Arc::new(ToolPool::assemble(
            &self.registry,
            &[],
            &self.session,
            &PoolOptions::for_mode(PermissionLevel::DangerFullAccess),
        ));
        let calls = vec![ToolCall::new("call_1", "bash", input)];
        let mut results = self
            .dispatcher
            .execute_batch(self.session.clone(), pool, calls)
            .await
            .results;
        results.remove(0)
    }

    pub async fn bash(&self, command: &str) -> ToolResult {
        self.call(json!({"command": command})).await
    }
}

/// Settings with these pre-tool hooks only.
pub fn pre(hooks: Vec<HookConfig>) -> HookSettings {
    HookSettings {
        pre_tool_use: hooks,
        ..HookSettings::default()
    }
}
