//! Persistence: the [`Store`] trait the daemon keeps its state behind, and its implementations
//! (SQLite, the embedded default; Postgres arrives with its issue).
//!
//! The store holds sessions (with the state calls leave behind, so sessions outlive a
//! restart), the audit log (one row per call, durable before the call's result is returned),
//! offloaded results (readable by character range), events (for replay by seq), batches (for
//! status, results and idempotent retries) and approvals. Only this module knows SQL; the core
//! reaches it through [`Store`] and the two sink traits it extends ([`AuditSink`],
//! [`ResultStore`]).

use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::dispatch::{AuditRecord, AuditSink, ResultStore};
use crate::event::{Event, EventType};
use crate::permission::PermissionLevel;
use crate::tool::ToolResult;

pub mod sqlite;

pub use sqlite::SqliteStore;

/// Why a store operation failed. Callers map these to the one error table at the doors.
#[derive(Clone, Debug, thiserror::Error)]
pub enum StoreError {
    #[error("the database is unavailable: {0}")]
    Unavailable(String),
    #[error("database error: {0}")]
    Database(String),
    #[error("migrations failed: {0}")]
    Migration(String),
    #[error("stored data is corrupt: {0}")]
    Corrupt(String),
    /// A write named a row that does not exist (`session "s1" not found`).
    #[error("{0} not found")]
    NotFound(String),
    /// A write would duplicate a row's identity (a session id, a batch id, an event seq).
    #[error("{0} already exists")]
    Conflict(String),
    /// A value the store cannot hold (a non-UTF-8 path, a number out of range, an unknown
    /// decision).
    #[error("invalid value: {0}")]
    Invalid(String),
}

/// A session as stored.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SessionRecord {
    pub id: String,
    pub working_directory: PathBuf,
    pub permission_mode: PermissionLevel,
    pub interactive: bool,
    /// The daemon (node id) that runs the session.
    pub owner: String,
    pub created_at: SystemTime,
    pub closed_at: Option<SystemTime>,
    /// What the session was created with besides the columns above (rules, tool filters,
    /// MCP servers, metadata, output schema): the create request's JSON.
    pub options: Value,
    /// What calls left behind (loaded tools, file-state cache, shell cwd, todos, runtime
    /// settings), saved after each batch so the session carries on after a restart.
    pub state: Value,
}

/// One audit row as read back, with its position in the log.
#[derive(Clone, Debug, PartialEq)]
pub struct CallRow {
    /// Increasing in insertion order; the cursor for paging.
    pub cursor: i64,
    /// The daemon that ran the call.
    pub node: String,
    pub record: AuditRecord,
}

/// A page of the audit log.
#[derive(Clone, Debug, PartialEq)]
pub struct CallPage {
    pub rows: Vec<CallRow>,
    /// Pass as `after` to get the next page; `None` when this page is the last.
    pub next_cursor: Option<i64>,
}

/// Where a batch is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchStatus {
    Running,
    Completed,
}

/// A batch as stored: what was asked, and its results once complete.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchRecord {
    pub batch_id: String,
    pub session_id: String,
    /// The request's shape (`toold`, `anthropic`, `openai`, `openai_chat`).
    pub format: String,
    pub idempotency_key: Option<String>,
    /// A hash of the request body, to tell a retry from a different request with the same key.
    pub request_hash: String,
    pub status: BatchStatus,
    pub call_count: usize,
    /// In request order, once the batch completes and when they were kept (a batch without an
    /// idempotency key is recorded without its results: see ARCHITECTURE.md, "Batch results").
    pub results: Option<Vec<ToolResult>>,
    pub created_at: SystemTime,
    pub completed_at: Option<SystemTime>,
}

/// What claiming a batch found.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchClaim {
    /// No batch with this idempotency key: the new one is recorded as running.
    New,
    /// A batch with this key and the same request hash exists: return it, run nothing.
    Existing(BatchRecord),
    /// A batch with this key exists for a different request.
    Conflict { batch_id: String },
}

/// Which events a reader wants.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct EventFilter {
    pub session_id: Option<String>,
    pub tool: Option<String>,
    pub event_type: Option<EventType>,
}

impl EventFilter {
    pub fn matches(&self, event: &Event) -> bool {
        self.session_id
            .as_deref()
            .is_none_or(|id| &*event.session_id == id)
            && self
                .tool
                .as_deref()
                .is_none_or(|tool| event.tool.as_deref() == Some(tool))
            && self.event_type.is_none_or(|t| event.event_type == t)
    }
}

/// An approval as stored (the permissions issue creates and resolves them).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalRecord {
    pub id: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    pub reason: String,
    pub created_at: SystemTime,
    /// `None` while pending; `Some("allow" | "deny")` once resolved.
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub decided_at: Option<SystemTime>,
}

/// Everything the daemon persists. Implementations must be safe to call concurrently; every
/// method that writes returns once the write is durable.
///
/// Times are kept to the millisecond: a `SystemTime` read back is the one written, truncated
/// to whole milliseconds since the epoch. Writes naming a session, batch or approval that does
/// not exist fail with [`StoreError::NotFound`]; writes repeating an identity (a session id, a
/// batch id, an event seq) fail with [`StoreError::Conflict`].
#[async_trait]
pub trait Store: AuditSink + ResultStore + Send + Sync + 'static {
    // Sessions.
    /// Records a new session; [`StoreError::Conflict`] if its id is taken.
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// Replaces a session's state (closed sessions too); [`StoreError::NotFound`] if unknown.
    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError>;
    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Sessions in creation order; closed ones only when asked.
    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError>;
    /// Marks a session closed; `false` if it was unknown or already closed.
    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError>;

    // The audit log (rows arrive through `AuditSink::record`).
    /// A session's audit rows in the order they were recorded, after cursor `after`, at most
    /// `limit` (0 gives an empty page whose `next_cursor` says whether rows remain).
    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError>;

    // Batches and idempotency.
    /// Records a new running batch, unless `batch.idempotency_key` is already used in the
    /// session: then the earlier batch (same request hash) or a conflict (different hash).
    /// Atomic: two concurrent claims with one key give one `New`. A batch without a key is
    /// always `New`. [`StoreError::NotFound`] if the session is unknown,
    /// [`StoreError::Conflict`] if the batch id is taken.
    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError>;
    /// Marks a batch completed with its results; [`StoreError::NotFound`] if unknown.
    async fn complete_batch(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError>;
    /// A batch of `session_id`'s; another session's batch is `None`.
    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError>;

    // Events.
    /// Stores events (seqs as the bus numbered them) all or none; [`StoreError::Conflict`] if
    /// a seq is already stored.
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<(), StoreError>;
    /// Events with `seq > after_seq` matching `filter`, in seq order, at most `limit`.
    async fn read_events(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError>;
    /// The highest seq stored (0 when none): the event bus continues after it.
    async fn last_event_seq(&self) -> Result<u64, StoreError>;
    /// Deletes events older than `before`; returns how many. Seqs are given in time order, so
    /// an implementation may delete the events before the first one at or after `before`.
    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError>;

    // Approvals.
    /// Records an approval; [`StoreError::NotFound`] if its session is unknown,
    /// [`StoreError::Conflict`] if its id is taken.
    async fn insert_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError>;
    /// A session's unresolved approvals, oldest first.
    async fn pending_approvals(&self, session_id: &str) -> Result<Vec<ApprovalRecord>, StoreError>;
    /// Resolves a pending approval; `false` if it was unknown or already resolved (exactly one
    /// of two concurrent resolutions wins). `decision` must be `allow` or `deny`
    /// ([`StoreError::Invalid`] otherwise).
    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError>;

    /// Finishes the writes in flight and releases the database (graceful shutdown). Calls
    /// after it fail. The default has nothing to release.
    async fn close(&self) {}
}
