//! Session state: the workspace, the mode, and what calls leave behind for later calls.
//!
//! The dispatcher reads it (mode, interactivity, interrupt token) and applies the
//! [`ContextUpdate`]s calls return. Persisting it is the store's business; this module keeps
//! it in memory behind short-lived locks that are never held across an await.
//!
//! Decisions:
//! - **Others see it through narrow views.** Tools get [`SessionView`] (the contract's
//!   read-only facts) and permission policies [`PermissionSession`] (rules, remembered
//!   answers, the tokens that end a wait); both are traits implemented here, so the contract
//!   and permission sit below the session and name nothing of it. The mutators (`apply`,
//!   `remember_rule`, `interrupt`, `close`) are inherent methods for those holding the
//!   concrete state: the dispatcher, the service, and (through `PermissionSession`) a policy.
//! - **A batch can be interrupted alone.** Each running batch holds a [`BatchInterrupt`], a
//!   child of the session's interrupt token registered under its batch id: the session's
//!   interrupt fires every batch's, [`SessionState::cancel_batch`] only that one's (an MCP
//!   client cancelling its `tools/call`, which is a one-call batch). The batch's interrupt
//!   remembers who cancelled it alone, for the audit row; one fired through the session's
//!   interrupt names nobody (`batches`).
//! - **No per-call scratch state.** What one call's validation found about its paths is kept
//!   on that call's context (`tool::PathChecks`), not here, so it cannot leak between calls.

mod batches;
pub mod gate;

pub use batches::{BatchInterrupt, QueuedBatch, RunningBatch};
pub use gate::{CallGate, GateAccess, GatePass};

use std::collections::{BTreeMap, BTreeSet, HashMap};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard, OnceLock};

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::permission::{PermissionSession, RememberedRule, SessionRules};
use crate::tool::{ContextUpdate, FileStateEntry, PermissionLevel, SessionView};

/// Fixed facts of a session, given when it is created.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    pub id: String,
    pub working_directory: PathBuf,
    pub permission_mode: PermissionLevel,
    pub interactive: bool,
    /// The schema `structured_output` validates against, when the session supplies one.
    pub output_schema: Option<Value>,
    /// The server's and the session's permission rules, compiled against the workspace.
    pub rules: Arc<SessionRules>,
    /// The session asked for network access for its sandboxed shells (granted only where the
    /// server's `[sandbox] network` allows it).
    pub network: bool,
    /// The session's environment, when it runs in one (DESIGN §12).
    pub environment: Option<crate::tool::EnvironmentView>,
}

impl SessionConfig {
    /// A non-interactive `workspace_write` session without an output schema.
    pub fn new(id: impl Into<String>, working_directory: impl Into<PathBuf>) -> SessionConfig {
        SessionConfig {
            id: id.into(),
            working_directory: working_directory.into(),
            permission_mode: PermissionLevel::WorkspaceWrite,
            interactive: false,
            output_schema: None,
            rules: Arc::default(),
            network: false,
            environment: None,
        }
    }

    pub fn permission_mode(mut self, mode: PermissionLevel) -> SessionConfig {
        self.permission_mode = mode;
        self
    }

    pub fn interactive(mut self, interactive: bool) -> SessionConfig {
        self.interactive = interactive;
        self
    }
}

/// The state that calls read and change.
#[derive(Debug, Default)]
struct MutableState {
    file_state: BTreeMap<PathBuf, FileStateEntry>,
    shell_cwd: Option<PathBuf>,
    loaded_tools: BTreeSet<String>,
    /// Bumped whenever `loaded_tools` gains a name, so a pool assembled from them is known to
    /// be current without comparing sets.
    loaded_tools_version: u64,
    todos: Value,
    /// Settings the `config` tool reads and changes (e.g. the default shell timeout).
    runtime_settings: BTreeMap<String, Value>,
    /// Rules added by approvals resolved with "remember", oldest first.
    remembered_rules: Vec<RememberedRule>,
}

/// What calls left behind, in a form the store can keep: a session restored from it carries
/// on where it stopped (its file-state cache, shell directory, loaded tools, todos, settings).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default)]
pub struct SessionSnapshot {
    pub file_state: Vec<FileStateEntry>,
    pub shell_cwd: Option<PathBuf>,
    pub loaded_tools: BTreeSet<String>,
    pub todos: Value,
    pub runtime_settings: BTreeMap<String, Value>,
    pub remembered_rules: Vec<RememberedRule>,
}

/// A live session.
#[derive(Debug)]
pub struct SessionState {
    config: SessionConfig,
    /// The id, shared into every event and context without copying.
    id: Arc<str>,
    state: Mutex<MutableState>,
    /// Replaced after each interrupt so that later batches start uninterrupted.
    interrupt: Mutex<CancellationToken>,
    /// Fired once, when the session closes: every running call stops, whatever its tool's
    /// interrupt behaviour.
    closed: CancellationToken,
    /// The running batches' own interrupts, by batch id.
    batches: Mutex<HashMap<Arc<str>, BatchInterrupt>>,
    /// Batches waiting for their turn, each with what cancelling it alone recorded: a token
    /// of its own, not the session's, so a session interrupt leaves them to start as before.
    queued: Mutex<HashMap<Arc<str>, BatchInterrupt>>,
    /// The working directory with its symlinks resolved, worked out on first use.
    real_working_directory: OnceLock<PathBuf>,
    /// Carries `loaded_tools_version` to those watching the session's offered tools change.
    loaded_tools_watch: tokio::sync::watch::Sender<u64>,
    /// Which of the session's calls execute together, across its batches (`gate`).
    call_gate: OnceLock<CallGate>,
}

impl SessionState {
    pub fn new(config: SessionConfig) -> SessionState {
        SessionState {
            id: Arc::from(config.id.as_str()),
            config,
            state: Mutex::new(MutableState::default()),
            interrupt: Mutex::new(CancellationToken::new()),
            closed: CancellationToken::new(),
            batches: Mutex::new(HashMap::new()),
            queued: Mutex::new(HashMap::new()),
            real_working_directory: OnceLock::new(),
            loaded_tools_watch: tokio::sync::watch::Sender::new(0),
            call_gate: OnceLock::new(),
        }
    }

    /// The session's call gate, made on first use with `max_shared`, the cap of the
    /// dispatcher that runs the session's calls (one per daemon, so one cap).
    pub fn call_gate(&self, max_shared: usize) -> &CallGate {
        self.call_gate.get_or_init(|| CallGate::new(max_shared))
    }

    /// The working directory with its symlinks resolved (as written if it cannot be), worked
    /// out once: path checks compare against it and walk only what lies below it. Sessions
    /// are created with a canonical directory, so this is normally the same path; the
    /// workspace's own ancestors are outside what a session can change.
    pub fn real_working_directory(&self) -> &Path {
        self.real_working_directory.get_or_init(|| {
            std::fs::canonicalize(&self.config.working_directory)
                .unwrap_or_else(|_| self.config.working_directory.clone())
        })
    }

    pub fn id(&self) -> &str {
        &self.id
    }

    pub fn shared_id(&self) -> Arc<str> {
        self.id.clone()
    }

    pub fn working_directory(&self) -> &Path {
        &self.config.working_directory
    }

    pub fn permission_mode(&self) -> PermissionLevel {
        self.config.permission_mode
    }

    pub fn interactive(&self) -> bool {
        self.config.interactive
    }

    fn state(&self) -> MutexGuard<'_, MutableState> {
        // A poisoned lock means a panic while applying a plain data update; the data is still
        // consistent (each update is a single insert or replace), so carry on with it.
        self.state
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// The token that the next interrupt fires; a batch takes it when it starts.
    pub fn interrupt_token(&self) -> CancellationToken {
        self.interrupt
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }

    /// Cancels what is running now; batches started afterwards are unaffected.
    pub fn interrupt(&self) {
        let mut token = self.interrupt.lock().unwrap_or_else(|p| p.into_inner());
        token.cancel();
        *token = CancellationToken::new();
    }

    /// Closes the session: running calls are cancelled and queued ones never start.
    pub fn close(&self) {
        self.closed.cancel();
        self.interrupt();
    }

    /// The token that fires when the session closes.
    pub fn close_token(&self) -> CancellationToken {
        self.closed.clone()
    }

    pub fn is_closed(&self) -> bool {
        self.closed.is_cancelled()
    }

    /// What this session knows of a file (after its own reads and writes).
    pub fn file_state(&self, path: &Path) -> Option<FileStateEntry> {
        self.state().file_state.get(path).cloned()
    }

    /// The shell's working directory, the workspace until a `cd` moves it.
    pub fn shell_cwd(&self) -> PathBuf {
        self.state()
            .shell_cwd
            .clone()
            .unwrap_or_else(|| self.config.working_directory.clone())
    }

    /// Deferred tools this session has loaded.
    pub fn loaded_tools(&self) -> BTreeSet<String> {
        self.state().loaded_tools.clone()
    }

    /// A number that changes whenever the loaded tools do (it only grows): what a pool
    /// assembled from them is checked against.
    pub fn loaded_tools_version(&self) -> u64 {
        self.state().loaded_tools_version
    }

    /// Sees [`SessionState::loaded_tools_version`] each time it changes (the pool a session
    /// offers changes with it); it closes when the session is dropped.
    pub fn watch_loaded_tools(&self) -> tokio::sync::watch::Receiver<u64> {
        self.loaded_tools_watch.subscribe()
    }

    /// The loaded tools and their [`SessionState::loaded_tools_version`], read together.
    pub fn versioned_loaded_tools(&self) -> (u64, BTreeSet<String>) {
        let state = self.state();
        (state.loaded_tools_version, state.loaded_tools.clone())
    }

    pub fn todos(&self) -> Value {
        self.state().todos.clone()
    }

    pub fn output_schema(&self) -> Option<&Value> {
        self.config.output_schema.as_ref()
    }

    /// Whether the session asked for network access for its sandboxed shells.
    pub fn network_requested(&self) -> bool {
        self.config.network
    }

    /// A runtime setting, if the session has set it.
    pub fn runtime_setting(&self, key: &str) -> Option<Value> {
        self.state().runtime_settings.get(key).cloned()
    }

    pub fn runtime_settings(&self) -> BTreeMap<String, Value> {
        self.state().runtime_settings.clone()
    }

    /// The server's and the session's permission rules.
    pub fn permission_rules(&self) -> &SessionRules {
        &self.config.rules
    }

    /// Rules remembered from approvals, oldest first.
    pub fn remembered_rules(&self) -> Vec<RememberedRule> {
        self.state().remembered_rules.clone()
    }

    /// Remembers an approval's answer for the rest of the session (a repeat is kept once).
    pub fn remember_rule(&self, rule: RememberedRule) {
        let mut state = self.state();
        if !state.remembered_rules.contains(&rule) {
            state.remembered_rules.push(rule);
        }
    }

    /// What calls have left behind so far.
    pub fn snapshot(&self) -> SessionSnapshot {
        let state = self.state();
        SessionSnapshot {
            file_state: state.file_state.values().cloned().collect(),
            shell_cwd: state.shell_cwd.clone(),
            loaded_tools: state.loaded_tools.clone(),
            todos: state.todos.clone(),
            runtime_settings: state.runtime_settings.clone(),
            remembered_rules: state.remembered_rules.clone(),
        }
    }

    /// A session that carries on from `snapshot`.
    pub fn restore(config: SessionConfig, snapshot: SessionSnapshot) -> SessionState {
        let session = SessionState::new(config);
        {
            let mut state = session.state();
            state.file_state = snapshot
                .file_state
                .into_iter()
                .map(|entry| (entry.path.clone(), entry))
                .collect();
            state.shell_cwd = snapshot.shell_cwd;
            state.loaded_tools = snapshot.loaded_tools;
            state.todos = snapshot.todos;
            state.runtime_settings = snapshot.runtime_settings;
            state.remembered_rules = snapshot.remembered_rules;
        }
        session
    }

    /// Applies one call's updates.
    pub fn apply(&self, updates: &[ContextUpdate]) {
        self.apply_owned(updates.to_vec());
    }

    /// [`SessionState::apply`] for updates the caller is done with (the dispatcher's): they
    /// move into the state instead of being copied.
    pub fn apply_owned(&self, updates: Vec<ContextUpdate>) {
        if updates.is_empty() {
            return;
        }
        let mut state = self.state();
        let version = state.loaded_tools_version;
        for update in updates {
            match update {
                ContextUpdate::FileState(entry) => {
                    state.file_state.insert(entry.path.clone(), entry);
                }
                ContextUpdate::ShellCwd { path } => state.shell_cwd = Some(path),
                ContextUpdate::LoadTools { names } => {
                    for name in names {
                        if state.loaded_tools.insert(name) {
                            state.loaded_tools_version += 1;
                        }
                    }
                }
                ContextUpdate::Todos { todos } => state.todos = todos,
                ContextUpdate::RuntimeSetting { key, value } => {
                    state.runtime_settings.insert(key, value);
                }
            }
        }
        if state.loaded_tools_version != version {
            self.loaded_tools_watch
                .send_replace(state.loaded_tools_version);
        }
    }
}

/// The tools' view: the read-only facts, delegated to the inherent methods above.
impl SessionView for SessionState {
    fn id(&self) -> &str {
        SessionState::id(self)
    }
    fn shared_id(&self) -> Arc<str> {
        SessionState::shared_id(self)
    }
    fn working_directory(&self) -> &Path {
        SessionState::working_directory(self)
    }
    fn real_working_directory(&self) -> &Path {
        SessionState::real_working_directory(self)
    }
    fn permission_mode(&self) -> PermissionLevel {
        SessionState::permission_mode(self)
    }
    fn interactive(&self) -> bool {
        SessionState::interactive(self)
    }
    fn shell_cwd(&self) -> PathBuf {
        SessionState::shell_cwd(self)
    }
    fn file_state(&self, path: &Path) -> Option<FileStateEntry> {
        SessionState::file_state(self, path)
    }
    fn todos(&self) -> Value {
        SessionState::todos(self)
    }
    fn loaded_tools(&self) -> BTreeSet<String> {
        SessionState::loaded_tools(self)
    }
    fn runtime_setting(&self, key: &str) -> Option<Value> {
        SessionState::runtime_setting(self, key)
    }
    fn network_requested(&self) -> bool {
        SessionState::network_requested(self)
    }
    fn environment(&self) -> Option<&crate::tool::EnvironmentView> {
        self.config.environment.as_ref()
    }
    fn output_schema(&self) -> Option<&Value> {
        SessionState::output_schema(self)
    }
}

/// A policy's view: the rules, the remembered answers and the tokens that end a wait.
impl PermissionSession for SessionState {
    fn working_directory(&self) -> &Path {
        SessionState::working_directory(self)
    }
    fn permission_rules(&self) -> &SessionRules {
        SessionState::permission_rules(self)
    }
    fn remembered_rules(&self) -> Vec<RememberedRule> {
        SessionState::remembered_rules(self)
    }
    fn remember_rule(&self, rule: RememberedRule) {
        SessionState::remember_rule(self, rule);
    }
    fn close_token(&self) -> CancellationToken {
        SessionState::close_token(self)
    }
    fn interrupt_token(&self) -> CancellationToken {
        SessionState::interrupt_token(self)
    }
    fn batch_interrupt_token(&self, batch_id: &str) -> CancellationToken {
        match self.running_batches().get(batch_id) {
            Some(interrupt) => interrupt.token().clone(),
            None => SessionState::interrupt_token(self),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn session() -> SessionState {
        SessionState::new(SessionConfig::new("s1", "/ws"))
    }

    #[test]
    fn updates_are_applied() {
        let session = session();
        assert_eq!(session.shell_cwd(), PathBuf::from("/ws"));
        let entry = FileStateEntry {
            path: PathBuf::from("/ws/a"),
            size: 3,
            modified: None,
            content_hash: "h".into(),
            partial: false,
        };
        session.apply(&[
            ContextUpdate::FileState(entry.clone()),
            ContextUpdate::ShellCwd {
                path: PathBuf::from("/ws/sub"),
            },
            ContextUpdate::LoadTools {
                names: vec!["t".into()],
            },
            ContextUpdate::Todos {
                todos: serde_json::json!([1]),
            },
            ContextUpdate::RuntimeSetting {
                key: "k".into(),
                value: serde_json::json!(5),
            },
        ]);
        assert_eq!(session.runtime_setting("k"), Some(serde_json::json!(5)));
        assert_eq!(session.file_state(Path::new("/ws/a")), Some(entry));
        assert_eq!(session.shell_cwd(), PathBuf::from("/ws/sub"));
        assert!(session.loaded_tools().contains("t"));
        assert_eq!(session.todos(), serde_json::json!([1]));
    }

    #[test]
    fn the_loaded_tools_version_changes_only_with_the_loaded_tools() {
        let session = session();
        let load = |names: &[&str]| ContextUpdate::LoadTools {
            names: names.iter().map(|name| (*name).to_owned()).collect(),
        };
        let initial = session.loaded_tools_version();
        let mut watch = session.watch_loaded_tools();
        session.apply(&[load(&[])]);
        assert_eq!(session.loaded_tools_version(), initial);
        assert!(
            !watch.has_changed().unwrap(),
            "nothing loaded, nothing seen"
        );
        session.apply(&[load(&["t"])]);
        let (after_t, loaded) = session.versioned_loaded_tools();
        assert!(after_t > initial && loaded.contains("t"));
        assert!(watch.has_changed().unwrap());
        assert_eq!(*watch.borrow_and_update(), after_t);
        session.apply(&[
            load(&["t"]),
            ContextUpdate::Todos {
                todos: serde_json::json!([]),
            },
        ]);
        assert_eq!(
            session.loaded_tools_version(),
            after_t,
            "a repeat loads nothing new"
        );
        assert!(!watch.has_changed().unwrap(), "a repeat is not a change");
        session.apply(&[load(&["t", "u"])]);
        assert!(session.loaded_tools_version() > after_t);
    }

    #[test]
    fn a_snapshot_restores_what_calls_left_behind() {
        let session = session();
        session.apply(&[
            ContextUpdate::ShellCwd {
                path: PathBuf::from("/ws/sub"),
            },
            ContextUpdate::LoadTools {
                names: vec!["t".into()],
            },
            ContextUpdate::Todos {
                todos: serde_json::json!([{"content": "x"}]),
            },
        ]);
        let snapshot = session.snapshot();
        let json = serde_json::to_value(&snapshot).unwrap();
        let back: SessionSnapshot = serde_json::from_value(json).unwrap();
        let restored = SessionState::restore(SessionConfig::new("s1", "/ws"), back);
        assert_eq!(restored.snapshot(), snapshot);
        assert_eq!(restored.shell_cwd(), PathBuf::from("/ws/sub"));
        // An empty or partial stored state is a fresh session, not an error.
        let partial: SessionSnapshot = serde_json::from_value(serde_json::json!({})).unwrap();
        assert_eq!(partial, SessionSnapshot::default());
    }

    #[test]
    fn an_interrupt_fires_the_current_token_only() {
        let session = session();
        let before = session.interrupt_token();
        session.interrupt();
        assert!(before.is_cancelled());
        assert!(!session.interrupt_token().is_cancelled());
    }
}
