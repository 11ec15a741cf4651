//! `ToolContext`: everything a tool may know about the call it is running, immutable per call.
//!
//! It carries the cancellation token the dispatcher fires on timeout, interrupt or sibling
//! abort, and the progress sink whose updates reach subscribers immediately.

use std::path::Path;
use std::sync::Arc;

use serde_json::Value;
use tokio_util::sync::CancellationToken;

use crate::permission::PermissionLevel;
use crate::session::SessionState;

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
    pub session: Arc<SessionState>,
    /// The batch's frozen tool pool, seen through what tools may ask of it (`tool_search`
    /// searches its deferred tools).
    pub tools: Arc<dyn ToolCatalog>,
    /// The permission level this call was authorised at (set by the permission phase; the
    /// lowest level until then). A tool that re-resolves a path at execution refuses one that
    /// now needs more than this.
    pub authorized: PermissionLevel,
}

impl ToolContext {
    /// A context for running a tool outside a dispatcher (tests, benchmarks, embedding): a
    /// fresh call id, progress discarded, no deferred tools, authorised at the session's mode.
    pub fn detached(session: Arc<SessionState>) -> ToolContext {
        ToolContext {
            session_id: session.shared_id(),
            call_id: Arc::from(format!("call_{}", uuid::Uuid::now_v7().simple())),
            working_directory: Arc::from(session.working_directory()),
            interactive: session.interactive(),
            cancellation: CancellationToken::new(),
            progress: ProgressSink::discard(),
            tools: Arc::new(EmptyCatalog),
            authorized: session.permission_mode(),
            session,
        }
    }
}
