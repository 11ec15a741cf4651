//! Persistence: the [`Store`] trait the daemon keeps its state behind, and its implementations
//! (SQLite, the embedded default, for one daemon; Postgres, for several daemons sharing one
//! database). [`open`] picks one by the database URL's scheme.
//!
//! The store holds sessions (with the state calls leave behind, so sessions outlive a
//! restart), the audit log (one row per call, durable before the call's result is returned),
//! offloaded results (readable by character range), events (for replay by seq), batches (for
//! status, results and idempotent retries) and approvals. Only this module knows SQL; the core
//! reaches it through [`Store`], the umbrella of one trait per area ([`SessionStore`],
//! [`BatchStore`], [`AuditStore`], [`EventStore`], [`ApprovalStore`], [`NodeStore`]) and the
//! two dispatch ports ([`AuditSink`], [`ResultStore`], in `dispatch/ports.rs`).
//!
//! What the dialects share is written once here: `reads` holds every read query (one SQL for
//! both), `rows` decodes every record from its row, `columns` converts values to and from
//! columns, `results` streams and pages offloaded outputs over each dialect's write
//! statements; each dialect only says what differs (`Dialect`, in its `convert.rs`).
//! What differs stays in `sqlite/` and `postgres/`: the write SQL, the write paths (SQLite's writer
//! thread and audit journal, Postgres' group-committed multi-row inserts) and the column types
//! (Postgres keeps text a model chose as BYTEA).

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::watch;

use crate::dispatch::{AuditRecord, AuditSink, ResultStore};
use crate::event::{Event, EventType};
use crate::permission::PermissionLevel;
use crate::registry::calls::BatchFormat;
use crate::tool::ToolResult;

mod approval_ledger;
mod call_query;
mod columns;
pub mod postgres;
mod reads;
mod results;
mod rows;
mod snapshots;
pub mod sqlite;

pub use approval_ledger::StoreApprovals;
pub use call_query::{CallDecision, CallFilter, CallOrder, CallQuery, MAX_CALL_PAGE};
pub use postgres::PostgresStore;
pub use sqlite::SqliteStore;

/// Opens the store `url` names: `postgres://` or `postgresql://` is [`PostgresStore`],
/// anything else (`sqlite://…` or a path) [`SqliteStore`]. `node_id` is this daemon's.
pub async fn open(url: &str, node_id: &str) -> Result<Arc<dyn Store>, StoreError> {
    if url.starts_with("postgres://") || url.starts_with("postgresql://") {
        Ok(Arc::new(PostgresStore::open(url, node_id).await?))
    } else {
        Ok(Arc::new(SqliteStore::open(url, node_id).await?))
    }
}

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
    /// The principal the session belongs to: the one that created it (DESIGN §10); `None`
    /// for sessions created before principals were recorded.
    pub principal: Option<String>,
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
    /// The call never finished: the daemon running it stopped (see
    /// [`NodeStore::mark_interrupted_calls`]). Such a row is an error of kind `cancelled` with
    /// no output.
    pub interrupted: bool,
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
    /// The request's shape; stored by its name (`toold`, `anthropic`, `openai`,
    /// `openai_chat`), and a stored name that is none of these reads back as corruption.
    pub format: BatchFormat,
    pub idempotency_key: Option<String>,
    /// A hash of the request body, to tell a retry from a different request with the same key.
    pub request_hash: String,
    pub status: BatchStatus,
    pub call_count: usize,
    /// In request order, once the batch completes and when they were kept (a batch without an
    /// idempotency key is recorded without its results: see
    /// `docs/decisions/service-and-store.md`, "Batch results").
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
    /// Sessions whose events match as `session_id`'s do (its children, whose events reach
    /// its subscribers); ignored without `session_id`.
    pub also_sessions: Vec<String>,
    pub tool: Option<String>,
    pub event_type: Option<EventType>,
}

impl EventFilter {
    pub fn matches(&self, event: &Event) -> bool {
        self.session_id.as_deref().is_none_or(|id| {
            &*event.session_id == id || self.also_sessions.iter().any(|s| **s == *event.session_id)
        }) && self.matches_besides_session(event)
    }

    /// Whether `event` passes the filter's conditions other than the session.
    pub fn matches_besides_session(&self, event: &Event) -> bool {
        self.tool
            .as_deref()
            .is_none_or(|tool| event.tool.as_deref() == Some(tool))
            && self.event_type.is_none_or(|t| event.event_type == t)
    }
}

/// An approval as stored: created when a call asks, resolved by a person or its timeout.
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

/// A daemon using the store: where to reach it and whether it is alive.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NodeRecord {
    pub id: String,
    /// Where clients reach it (`http://host:port`), shown as a session's owner address.
    pub address: String,
    pub started_at: SystemTime,
    /// The last sign of life; a node silent for long is taken for dead.
    pub heartbeat_at: SystemTime,
}

/// What finished batches leave to be written behind their answers ([`BatchStore::write_behind`]).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct BehindWrites {
    /// Completed batches without an idempotency key.
    pub batches: Vec<BatchRecord>,
    /// Session ids with the state to save.
    pub states: Vec<(String, Value)>,
}

impl BehindWrites {
    pub fn is_empty(&self) -> bool {
        self.batches.is_empty() && self.states.is_empty()
    }
}

/// Audit rows deleted per transaction when pruning ([`AuditStore::prune_calls`]): small, so
/// that the audit writes waiting behind a chunk wait for one short transaction at most.
pub const PRUNE_CHUNK_CALLS: u64 = 1_000;

/// Events deleted per statement when pruning ([`EventStore::prune_events`]).
pub const PRUNE_CHUNK_EVENTS: u64 = 10_000;

/// Runs `delete_chunk` (one statement deleting at most [`PRUNE_CHUNK_EVENTS`] old events)
/// until a chunk comes back short; the events deleted in all. Both stores prune through it.
async fn delete_in_chunks<F, D>(mut delete_chunk: F) -> Result<u64, StoreError>
where
    F: FnMut() -> D,
    D: std::future::Future<Output = Result<u64, StoreError>>,
{
    let mut pruned = 0;
    loop {
        let deleted = delete_chunk().await?;
        pruned += deleted;
        if deleted < PRUNE_CHUNK_EVENTS {
            return Ok(pruned);
        }
    }
}

/// Everything the daemon persists: one trait per area, each implemented by each dialect in
/// the file of that area (`sqlite/sessions.rs`, `postgres/events.rs`, …), plus the two
/// dispatch ports the audit log and the offload store implement ([`AuditSink`],
/// [`ResultStore`]) and what concerns the store as a whole ([`StoreLifecycle`]). Every type
/// that implements them all is a `Store` (a blanket impl), so the core holds one
/// `Arc<dyn Store>` and calls any area through it.
///
/// What every area promises: implementations are safe to call concurrently; every method
/// that writes returns once the write is durable. Times are kept to the millisecond: a
/// `SystemTime` read back is the one written, truncated to whole milliseconds since the epoch.
/// Writes naming a session, batch or approval that does not exist fail with
/// [`StoreError::NotFound`]; writes repeating an identity (a session id, a batch id, an event
/// seq) fail with [`StoreError::Conflict`].
pub trait Store:
    SessionStore
    + SnapshotStore
    + BatchStore
    + AuditStore
    + EventStore
    + ApprovalStore
    + NodeStore
    + ResultStore
    + StoreLifecycle
{
}

impl<T> Store for T where
    T: SessionStore
        + SnapshotStore
        + BatchStore
        + AuditStore
        + EventStore
        + ApprovalStore
        + NodeStore
        + ResultStore
        + StoreLifecycle
{
}

/// Sessions: what each was created with and the state its calls leave behind.
#[async_trait]
pub trait SessionStore: Send + Sync + 'static {
    /// Records a new session; [`StoreError::Conflict`] if its id is taken.
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError>;
    /// Replaces a session's state (closed sessions too); [`StoreError::NotFound`] if unknown.
    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError>;
    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError>;
    /// Sessions in creation order; closed ones only when asked.
    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError>;
    /// Marks a session closed; `false` if it was unknown or already closed.
    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError>;
}

/// A snapshot as stored (DESIGN §12): who took it of which session, and the layers a session
/// made from it stacks.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SnapshotRecord {
    pub id: String,
    /// The principal that took it (it belongs to it, DESIGN §10).
    pub principal: Option<String>,
    pub session_id: String,
    pub name: Option<String>,
    /// Absolute directories, topmost first.
    pub layers: Vec<PathBuf>,
    pub size_bytes: u64,
    /// `cow` or `full`.
    pub copy: String,
    pub created_at: SystemTime,
}

/// Snapshots and the layers each session's view stacks.
#[async_trait]
pub trait SnapshotStore: Send + Sync + 'static {
    /// Records a snapshot; [`StoreError::Conflict`] if its id is taken.
    async fn insert_snapshot(&self, snapshot: &SnapshotRecord) -> Result<(), StoreError>;
    async fn get_snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>, StoreError>;
    /// Every snapshot, oldest first.
    async fn list_snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError>;
    /// Sets a snapshot's size (measured after it was recorded); `false` if it is unknown.
    async fn set_snapshot_size(&self, id: &str, size_bytes: u64) -> Result<bool, StoreError>;
    /// Removes a snapshot's row; `false` if it was unknown.
    async fn delete_snapshot(&self, id: &str) -> Result<bool, StoreError>;
    /// Replaces the layers session `session_id`'s view stacks (empty: none).
    async fn set_session_layers(
        &self,
        session_id: &str,
        layers: &[PathBuf],
    ) -> Result<(), StoreError>;
    /// The layers session `session_id`'s view stacks (empty when none were set).
    async fn session_layers(&self, session_id: &str) -> Result<Vec<PathBuf>, StoreError>;
}

/// Batches and idempotency. A batch belongs to a session, and what a finished batch leaves
/// behind includes its session's state, hence the supertrait.
#[async_trait]
pub trait BatchStore: SessionStore {
    /// Records a new running batch, unless `batch.idempotency_key` is already used in the
    /// session: then the earlier batch (same request hash) or a conflict (different hash).
    /// Atomic: two concurrent claims with one key give one `New`. A batch without a key is
    /// always `New`. [`StoreError::NotFound`] if the session is unknown,
    /// [`StoreError::Conflict`] if the batch id is taken.
    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError>;
    /// Writes what finished batches leave behind their answers, which nobody waits on: the
    /// records of batches without an idempotency key (as [`BatchStore::claim_batch`] would)
    /// and session states (as [`SessionStore::save_session_state`] would; a session no longer
    /// stored is skipped). A store may hold these for its next commit. Each item stands or
    /// fails on its own; the failures come back, an empty list when everything was written.
    async fn write_behind(&self, writes: &BehindWrites) -> Vec<StoreError> {
        let mut failures = Vec::new();
        for batch in &writes.batches {
            if let Err(err) = self.claim_batch(batch).await {
                failures.push(err);
            }
        }
        for (id, state) in &writes.states {
            match self.save_session_state(id, state).await {
                Ok(()) | Err(StoreError::NotFound(_)) => {}
                Err(err) => failures.push(err),
            }
        }
        failures
    }
    /// Marks a batch completed with its results; [`StoreError::NotFound`] if unknown.
    async fn complete_batch(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError>;
    /// Gives up a running batch's claim (its completion could not be stored): its record is
    /// deleted, so a retry with its idempotency key claims the key anew and runs. A completed
    /// or unknown batch is left as it is.
    async fn release_batch(&self, batch_id: &str) -> Result<(), StoreError>;
    /// A batch of `session_id`'s; another session's batch is `None`.
    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError>;
}

/// The audit log read back; its rows arrive through the [`AuditSink`] port.
#[async_trait]
pub trait AuditStore: AuditSink {
    /// A session's audit rows in the order they were recorded, after cursor `after`, at most
    /// `limit` (0 gives an empty page whose `next_cursor` says whether rows remain).
    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError>;
    /// The audit rows of one batch of a session, in the order they were recorded (a batch
    /// holds as many as its request had calls); empty for an unknown batch.
    async fn batch_calls(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Vec<CallRow>, StoreError>;
    /// The rows `query` selects across sessions, a page at a time (see [`CallQuery`]): every
    /// row recorded before the call is visible to it, and a cursor stays valid while rows are
    /// inserted (nothing is skipped or repeated between pages).
    async fn query_calls(&self, query: &CallQuery) -> Result<CallPage, StoreError>;
    /// Deletes the audit rows of calls started before `before`, with their offloaded results;
    /// returns how many rows went. Deletes [`PRUNE_CHUNK_CALLS`] rows per transaction, so that
    /// a long backlog never holds the writer for long.
    async fn prune_calls(&self, before: SystemTime) -> Result<u64, StoreError>;
}

/// Runs `delete_chunk` (one transaction deleting at most [`PRUNE_CHUNK_CALLS`] old rows with
/// their results) until a chunk comes back short; the rows deleted in all.
async fn prune_calls_in_chunks<F, D>(mut delete_chunk: F) -> Result<u64, StoreError>
where
    F: FnMut() -> D,
    D: std::future::Future<Output = Result<u64, StoreError>>,
{
    let mut pruned = 0;
    loop {
        let deleted = delete_chunk().await?;
        pruned += deleted;
        if deleted < PRUNE_CHUNK_CALLS {
            return Ok(pruned);
        }
    }
}

/// Events kept for replay.
#[async_trait]
pub trait EventStore: Send + Sync + 'static {
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
    /// Stores events all or none, numbering them itself after every seq already stored (by
    /// any daemon sharing the store): the seqs the events carry are ignored. Returns the seqs
    /// given, consecutive and in the order of `events`. Concurrent appends are numbered in
    /// the order they commit, so a reader that sees seq `n` stored never later finds a smaller
    /// one appearing (replay by seq misses nothing).
    async fn append_events_numbered(&self, events: &[Arc<Event>])
    -> Result<Range<u64>, StoreError>;
    /// Whether the daemon has this store number its events ([`EventStore::append_events_numbered`],
    /// the bus fed back by the relay) rather than numbering them itself: a store several
    /// processes write to (Postgres' fleet; SQLite's file, which several `toold mcp` and a
    /// `toold serve` may share).
    fn numbers_events(&self) -> bool {
        false
    }
    /// Wakes whenever events may have been stored (by this daemon or another sharing the
    /// store; the value is the highest seq known to be stored, or a bump after a lost
    /// notification channel); `None` when only polling finds them.
    fn event_wakeups(&self) -> Option<watch::Receiver<u64>> {
        None
    }
    /// The highest seq stored (0 when none): the event bus continues after it.
    async fn last_event_seq(&self) -> Result<u64, StoreError>;
    /// Deletes events older than `before`, except the newest event of all; returns how many.
    /// Deletes in statements of at most [`PRUNE_CHUNK_EVENTS`] rows, so that a long backlog
    /// of old events does not hold the database's writer for the whole deletion.
    /// Seqs are given in time order, so an implementation may delete the events before the
    /// first one at or after `before`. The newest is kept because the bus numbers on from the
    /// highest stored seq: with every event gone, a restart would number from 1 again, and a
    /// subscriber resuming with `Last-Event-ID` would skip the new events as already seen.
    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError>;
}

/// Approvals: calls waiting for a person's decision.
#[async_trait]
pub trait ApprovalStore: Send + Sync + 'static {
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
}

/// Daemons using the store, and the sessions and calls a stopped one leaves behind.
#[async_trait]
pub trait NodeStore: Send + Sync + 'static {
    /// Whether several daemons may use this store at once (events are then numbered by the
    /// store, and sessions belong to the daemon that created them).
    fn is_shared(&self) -> bool {
        false
    }
    /// Records `node` (address, start) or refreshes its heartbeat; clears an earlier claim
    /// on it ([`NodeStore::claim_silent_node`]), since it is alive again.
    async fn heartbeat(&self, node: &NodeRecord) -> Result<(), StoreError>;
    async fn get_node(&self, node_id: &str) -> Result<Option<NodeRecord>, StoreError>;
    /// Every node that has ever used the store, by id.
    async fn list_nodes(&self) -> Result<Vec<NodeRecord>, StoreError>;
    /// Claims a node silent since before `silent_since` for cleaning up after it: `true` for
    /// exactly one claimant until the node's next heartbeat.
    async fn claim_silent_node(
        &self,
        node_id: &str,
        silent_since: SystemTime,
        by: &str,
    ) -> Result<bool, StoreError>;
    /// Makes `to` the owner of open session `session_id` if `from` still owns it; `false`
    /// otherwise (closed, unknown, or taken by someone else first).
    async fn adopt_session(
        &self,
        session_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError>;
    /// Writes an interrupted audit row for every call of `session_id` that was queued (its
    /// `tool:queued` event is stored) but has none: the daemon running it stopped before the
    /// call finished. Only for a session whose calls cannot be running (its owner is gone,
    /// or the owner itself is starting). Returns how many rows were written.
    async fn mark_interrupted_calls(&self, session_id: &str) -> Result<u64, StoreError>;
}

/// What concerns the store as a whole rather than one area.
#[async_trait]
pub trait StoreLifecycle: Send + Sync + 'static {
    /// Finishes the writes in flight and releases the database (graceful shutdown). Calls
    /// after it fail. The default has nothing to release.
    async fn close(&self) {}
}
