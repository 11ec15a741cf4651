//! `ToolContext`: everything a tool may know about the call it is running, immutable per call
//! but for its path-check memo.
//!
//! It carries the cancellation token the dispatcher fires on timeout, interrupt or sibling
//! abort, and the progress sink whose updates reach subscribers immediately.
//!
//! Decisions:
//! - **A view, not the session.** A tool sees its session through [`SessionView`], a trait of
//!   read-only facts (workspace, mode, shell directory, file-state cache, settings…) that
//!   `session::SessionState` implements, the way it sees the pool through [`ToolCatalog`]. The
//!   contract so depends on nothing concrete (the session and permission sit above it), and
//!   what changes a session (`apply`, `remember_rule`, `interrupt`, `close`) is out of a
//!   tool's reach: a tool asks for changes by returning [`super::ContextUpdate`]s, which the
//!   dispatcher applies when the call completes.
//! - **The path-check memo is per call.** A call's validation resolves its path
//!   (`tools::paths::check_input`) and its permission check, a moment later in the same
//!   pipeline, needs the same answer; [`PathChecks`] on the call's context carries it from one
//!   to the other, so the path is canonicalised once. Kept on the context rather than the
//!   session, an answer can never reach another call or outlive its own.

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use super::{FileStateEntry, PermissionLevel};

/// What a tool may read of its session. Read-only: changes travel as
/// [`super::ContextUpdate`]s in the call's output.
pub trait SessionView: std::fmt::Debug + Send + Sync + 'static {
    fn id(&self) -> &str;

    /// The id, shared without copying.
    fn shared_id(&self) -> Arc<str>;

    /// The session's workspace; relative paths resolve against it.
    fn working_directory(&self) -> &Path;

    /// The working directory with its symlinks resolved (as written if it cannot be): path
    /// checks compare against it and walk only what lies below it.
    fn real_working_directory(&self) -> &Path;

    /// The session's permission mode.
    fn permission_mode(&self) -> PermissionLevel;

    /// Whether a user can answer questions in this session.
    fn interactive(&self) -> bool;

    /// The shell's working directory, the workspace until a `cd` moves it.
    fn shell_cwd(&self) -> PathBuf;

    /// What this session knows of a file (after its own reads and writes).
    fn file_state(&self, path: &Path) -> Option<FileStateEntry>;

    /// The session's task list.
    fn todos(&self) -> Value;

    /// Deferred tools this session has loaded.
    fn loaded_tools(&self) -> BTreeSet<String>;

    /// A runtime setting, if the session has set it (the `config` tool).
    fn runtime_setting(&self, key: &str) -> Option<Value>;

    /// Whether the session asked for network access for its sandboxed shells.
    fn network_requested(&self) -> bool;

    /// The schema `structured_output` validates against, when the session supplies one.
    fn output_schema(&self) -> Option<&Value>;

    /// The session's environment (DESIGN §12), when it runs in one: its paths are the
    /// environment's, rooted at [`EnvironmentView::root`] on the host.
    fn environment(&self) -> Option<&EnvironmentView> {
        None
    }
}

/// What the tools need of a session's environment.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct EnvironmentView {
    /// The environment's `/` as the daemon sees it (its copy-on-write view).
    pub root: PathBuf,
    /// Where the workspace appears inside (`/workspace`); on the host, the working directory.
    pub workdir: PathBuf,
    /// `NAME=value` for every command (the image's `Env`, the request's over it).
    pub env: Vec<String>,
    /// The shell commands run in: `/bin/bash`, or `/bin/sh` when the image has no bash.
    pub shell: PathBuf,
    /// The isolation tier (`bwrap`, `landlock`, `gvisor`).
    pub isolation: &'static str,
    /// Whether commands may write outside `workdir` (a `danger_full_access` session).
    pub writable_root: bool,
    /// `environment.limits` the sandbox applies to the session's processes (over `[sandbox]`'s).
    pub limits: EnvironmentLimits,
}

/// The limits of an environment's processes (DESIGN §12); 0: not set (`[sandbox]`'s apply).
/// `disk_mb` is not here: it bounds the session's filesystem, made before any tool runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct EnvironmentLimits {
    pub memory_mb: u64,
    pub pids: u64,
    /// CPUs in thousandths (`cpus = 1.5` is 1500): a bandwidth quota, not a time limit.
    pub cpu_millis: u64,
}

impl EnvironmentView {
    /// A path inside the environment as the host sees it (`None`: it climbs out with `..`).
    pub fn to_host(&self, inside: &Path) -> Option<PathBuf> {
        let mut out = self.root.clone();
        let mut depth = 0usize;
        for part in inside.components() {
            match part {
                std::path::Component::Normal(p) => {
                    out.push(p);
                    depth += 1;
                }
                std::path::Component::ParentDir => {
                    if depth == 0 {
                        return None;
                    }
                    out.pop();
                    depth -= 1;
                }
                _ => {}
            }
        }
        Some(out)
    }

    /// A host path under the root as the environment sees it.
    pub fn to_inside(&self, host: &Path) -> Option<PathBuf> {
        host.strip_prefix(&self.root)
            .ok()
            .map(|rest| Path::new("/").join(rest))
    }

    /// `text` with the host's path of the environment's root written as the environment sees
    /// it (`/…/environments/sess_…/root/etc/x` as `/etc/x`, the root alone as `/`): an answer
    /// speaks of the environment's paths, never of the host's.
    pub fn inside_paths<'t>(&self, text: &'t str) -> std::borrow::Cow<'t, str> {
        let Some(root) = self.root.to_str().filter(|root| text.contains(*root)) else {
            return std::borrow::Cow::Borrowed(text);
        };
        let root = root.trim_end_matches('/');
        std::borrow::Cow::Owned(text.replace(&format!("{root}/"), "/").replace(root, "/"))
    }

    /// [`EnvironmentView::inside_paths`] of an owned text (not copied when nothing changes).
    pub fn into_inside_paths(&self, text: String) -> String {
        match self.inside_paths(&text) {
            std::borrow::Cow::Owned(inside) => inside,
            std::borrow::Cow::Borrowed(_) => text,
        }
    }

    /// [`EnvironmentView::inside_paths`] of every string in `value`.
    pub fn inside_paths_of(&self, value: &mut Value) {
        match value {
            Value::String(text) => *text = self.into_inside_paths(std::mem::take(text)),
            Value::Array(items) => items.iter_mut().for_each(|item| self.inside_paths_of(item)),
            Value::Object(fields) => fields
                .values_mut()
                .for_each(|field| self.inside_paths_of(field)),
            _ => {}
        }
    }
}

/// A shared session is a view of it (so `&Arc<SessionState>` passes where a view is asked).
impl<T: SessionView + ?Sized> SessionView for Arc<T> {
    fn id(&self) -> &str {
        (**self).id()
    }
    fn shared_id(&self) -> Arc<str> {
        (**self).shared_id()
    }
    fn working_directory(&self) -> &Path {
        (**self).working_directory()
    }
    fn real_working_directory(&self) -> &Path {
        (**self).real_working_directory()
    }
    fn permission_mode(&self) -> PermissionLevel {
        (**self).permission_mode()
    }
    fn interactive(&self) -> bool {
        (**self).interactive()
    }
    fn shell_cwd(&self) -> PathBuf {
        (**self).shell_cwd()
    }
    fn file_state(&self, path: &Path) -> Option<FileStateEntry> {
        (**self).file_state(path)
    }
    fn todos(&self) -> Value {
        (**self).todos()
    }
    fn loaded_tools(&self) -> BTreeSet<String> {
        (**self).loaded_tools()
    }
    fn runtime_setting(&self, key: &str) -> Option<Value> {
        (**self).runtime_setting(key)
    }
    fn network_requested(&self) -> bool {
        (**self).network_requested()
    }
    fn output_schema(&self) -> Option<&Value> {
        (**self).output_schema()
    }
    fn environment(&self) -> Option<&EnvironmentView> {
        (**self).environment()
    }
}

/// Paths a call's validation resolved (as written, inside the workspace or not), newest last,
/// each waiting for the same call's permission check. See the module header for why it lives
/// on the call's context.
#[derive(Debug, Default)]
pub struct PathChecks {
    checks: Mutex<Vec<(String, bool)>>,
}

impl PathChecks {
    /// Keeps what validation found about the path `raw`: whether it lies inside the workspace.
    pub fn keep(&self, raw: &str, inside_workspace: bool) {
        self.lock().push((raw.to_owned(), inside_workspace));
    }

    /// Takes the newest answer [`PathChecks::keep`] kept for `raw`.
    pub fn take(&self, raw: &str) -> Option<bool> {
        let mut checks = self.lock();
        let at = checks.iter().rposition(|(kept, _)| kept == raw)?;
        Some(checks.remove(at).1)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(String, bool)>> {
        // Only whole entries are pushed or removed under this lock; a panic cannot leave one
        // half-written.
        self.checks.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Clone for PathChecks {
    /// A copy of the answers kept so far (a cloned context is the same call).
    fn clone(&self) -> PathChecks {
        PathChecks {
            checks: Mutex::new(self.lock().clone()),
        }
    }
}

/// A deferred tool as `tool_search` sees it.
#[derive(Clone, Debug, PartialEq)]
pub struct DeferredTool {
    pub name: String,
    pub description: String,
    /// Provider-ready (references inlined).
    pub input_schema: Value,
}

/// What a tool may know of the pool its batch runs with. A narrow view, so the contract does
/// not depend on the registry.
pub trait ToolCatalog: std::fmt::Debug + Send + Sync + 'static {
    /// Deferred tools not loaded yet, by name.
    fn deferred_tools(&self) -> Vec<DeferredTool>;
}

/// A catalog with no deferred tools (for running a tool outside a dispatcher).
#[derive(Debug, Default)]
pub struct EmptyCatalog;

impl ToolCatalog for EmptyCatalog {
    fn deferred_tools(&self) -> Vec<DeferredTool> {
        Vec::new()
    }
}

/// A progress report from a running call.
#[derive(Clone, Debug, PartialEq)]
pub struct ProgressUpdate {
    pub call_id: Arc<str>,
    pub tool: Arc<str>,
    pub data: Value,
}

/// Where a tool's progress goes. Reporting never blocks and never fails.
#[derive(Clone)]
pub struct ProgressSink {
    call_id: Arc<str>,
    tool: Arc<str>,
    deliver: Arc<dyn Fn(ProgressUpdate) + Send + Sync>,
}

impl ProgressSink {
    pub fn new(
        call_id: impl Into<Arc<str>>,
        tool: impl Into<Arc<str>>,
        deliver: Arc<dyn Fn(ProgressUpdate) + Send + Sync>,
    ) -> ProgressSink {
        ProgressSink {
            call_id: call_id.into(),
            tool: tool.into(),
            deliver,
        }
    }

    /// A sink that drops every report (for running a tool outside a dispatcher).
    pub fn discard() -> ProgressSink {
        ProgressSink::new("", "", Arc::new(|_| {}))
    }

    pub fn report(&self, data: Value) {
        (self.deliver)(ProgressUpdate {
            call_id: self.call_id.clone(),
            tool: self.tool.clone(),
            data,
        });
    }
}

impl std::fmt::Debug for ProgressSink {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ProgressSink")
            .field("call_id", &self.call_id)
            .finish()
    }
}

/// The per-call context handed to `validate_input` and `execute`.
#[derive(Clone, Debug)]
pub struct ToolContext {
    pub session_id: Arc<str>,
    pub call_id: Arc<str>,
    /// The session's workspace; relative paths resolve against it.
    pub working_directory: Arc<Path>,
    /// Whether a user can answer questions in this session.
    pub interactive: bool,
    /// Fired when the call must stop (timeout, interrupt, sibling abort, session close).
    pub cancellation: CancellationToken,
    pub progress: ProgressSink,
    /// Read access to session state (file-state cache, shell cwd). Tools change it only by
    /// returning [`crate::tool::ContextUpdate`]s.
    pub session: Arc<dyn SessionView>,
    /// The batch's frozen tool pool, seen through what tools may ask of it (`tool_search`
    /// searches its deferred tools).
    pub tools: Arc<dyn ToolCatalog>,
    /// The permission level this call was authorised at (set by the permission phase; the
    /// lowest level until then). A tool that re-resolves a path at execution refuses one that
    /// now needs more than this.
    pub authorized: PermissionLevel,
    /// What this call's validation found about its paths, for its permission check.
    pub path_checks: PathChecks,
}

impl ToolContext {
    /// A context for running a tool outside a dispatcher (tests, benchmarks, embedding): a
    /// fresh call id, progress discarded, no deferred tools, authorised at the session's mode.
    pub fn detached(session: Arc<dyn SessionView>) -> ToolContext {
        ToolContext {
            session_id: session.shared_id(),
            call_id: Arc::from(format!("call_{}", uuid::Uuid::now_v7().simple())),
            working_directory: Arc::from(session.working_directory()),
            interactive: session.interactive(),
            cancellation: CancellationToken::new(),
            progress: ProgressSink::discard(),
            tools: Arc::new(EmptyCatalog),
            authorized: session.permission_mode(),
            path_checks: PathChecks::default(),
            session,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn path_checks_are_taken_newest_first_and_once() {
        let checks = PathChecks::default();
        checks.keep("a", false);
        checks.keep("a", true);
        assert_eq!(checks.take("a"), Some(true));
        assert_eq!(checks.take("a"), Some(false));
        assert_eq!(checks.take("a"), None);
    }
}
