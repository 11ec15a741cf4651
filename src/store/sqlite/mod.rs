//! [`SqliteStore`]: the embedded default [`Store`], on one SQLite file through sqlx.
//!
//! This file owns opening the database (connection settings, migrations, the writer thread
//! and the read pool) and the `Store` impl, which delegates to one file per area: `audit`
//! (audit rows), `results` (offloaded outputs in chunks), `sessions` (sessions and batches),
//! `events`, `approvals`, `nodes` (daemons, adoption, interrupted calls); `writer` runs every write on one connection with group commit,
//! `checkpoint` copies the write-ahead log back beside it, `convert` holds the shared
//! conversions and error mapping.
//!
//! Settings and why:
//! - WAL journal: readers never block the writer or each other.
//! - `synchronous = NORMAL`: in WAL mode a commit is appended to the WAL with `write(2)`
//!   before it returns, and the WAL is fsynced only at checkpoints. A committed transaction
//!   therefore survives the process crashing or being killed (the OS holds the pages); only an
//!   OS crash or power loss can lose the last commits. That is the durability the audit log
//!   promises ("durable before its result is returned" against a `kill -9`), at a fraction of
//!   `FULL`'s cost (an fsync per commit).
//! - One writer connection (SQLite admits one writer at a time anyway) owned by one thread
//!   that commits whatever is queued as one transaction (`writer`), so contention is a queue,
//!   not `SQLITE_BUSY` retries, and concurrent writes share a commit; a small pool of
//!   read-only connections (sqlx).
//! - A busy timeout, for other processes touching the file (a backup, the `sqlite3` shell).
//! - Foreign keys on: batches and approvals must name a stored session.
//!
//! Times are stored as INTEGER milliseconds since the Unix epoch; JSON as TEXT.
//!
//! Deliberately absent: in-memory databases (the writer and the readers are separate
//! connections, so each would see its own empty database), and any SQL outside this folder.

mod approvals;
mod audit;
mod checkpoint;
mod convert;
mod events;
mod journal;
mod nodes;
mod results;
mod sessions;
mod writer;

use std::ops::Range;
use std::path::Path;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};

use super::{
    ApprovalRecord, BatchClaim, BatchRecord, BehindWrites, CallPage, EventFilter, NodeRecord,
    SessionRecord, Store, StoreError,
};
use crate::event::Event;
use crate::tool::ToolResult;
use checkpoint::Checkpointer;
use journal::AuditJournal;
use writer::WriteThread;

/// How long a connection waits for another process's lock before failing with `SQLITE_BUSY`.
const BUSY_TIMEOUT: Duration = Duration::from_secs(5);

/// Read connections. Reads are short; a few cover the doors' concurrent readers.
const READ_CONNECTIONS: u32 = 4;

/// How long a caller waits for a pooled connection before the store reports itself
/// unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The store on one SQLite file. Cheap to share behind an `Arc`; safe to call concurrently.
pub struct SqliteStore {
    /// The single writer connection, on its own thread.
    writer: WriteThread,
    /// Where audit rows are durable before the writer puts them in `calls`.
    journal: Arc<AuditJournal>,
    /// Copies the write-ahead log back into the database, beside the writer.
    checkpointer: Checkpointer,
    /// Read-only connections.
    readers: SqlitePool,
    /// This daemon's node id, written into every audit row.
    node_id: Arc<str>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path_or_url` (a file path, or a
    /// `sqlite://` URL) and applies the migrations in `migrations/sqlite`.
    pub async fn open(path_or_url: &str, node_id: &str) -> Result<SqliteStore, StoreError> {
        let options = connect_options(path_or_url)?;
        check_directory(path_or_url, options.get_filename())?;
        migrate(&options, path_or_url).await?;
        let writer = WriteThread::open(options.get_filename(), path_or_url, BUSY_TIMEOUT)?;
        let node_id: Arc<str> = Arc::from(node_id);
        let journal = Arc::new(
            AuditJournal::recover(options.get_filename(), node_id.clone(), &writer).await?,
        );
        let checkpointer = Checkpointer::start(options.get_filename(), path_or_url, BUSY_TIMEOUT)?;
        // Readers open after the writer so the file, the WAL and the shared memory exist.
        // No liveness ping before each acquire: an SQLite connection is a file in this process.
        let readers = SqlitePoolOptions::new()
            .test_before_acquire(false)
            .max_connections(READ_CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options.read_only(true))
            .await
            .map_err(|err| open_error(path_or_url, err))?;
        Ok(SqliteStore {
            writer,
            journal,
            checkpointer,
            readers,
            node_id,
        })
    }

    /// The node id written into audit rows.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }
}

/// Creates the file if missing and applies the migrations, on a connection of its own that
/// is closed before the writer thread opens the file.
async fn migrate(options: &SqliteConnectOptions, path_or_url: &str) -> Result<(), StoreError> {
    let mut connection = options
        .connect()
        .await
        .map_err(|err| open_error(path_or_url, err))?;
    sqlx::migrate!("./migrations/sqlite")
        .run(&mut connection)
        .await
        .map_err(|err| StoreError::Migration(format!("database \"{path_or_url}\": {err}")))?;
    connection
        .close()
        .await
        .map_err(|err| open_error(path_or_url, err))
}

/// Connection settings for `path_or_url`, with the pragmas described in the header.
fn connect_options(path_or_url: &str) -> Result<SqliteConnectOptions, StoreError> {
    if path_or_url.contains(":memory:") || path_or_url.contains("mode=memory") {
        return Err(StoreError::Invalid(format!(
            "database \"{path_or_url}\" is in memory; the store needs a file (its writer and \
             readers are separate connections)"
        )));
    }
    let options = if path_or_url.starts_with("sqlite:") {
        SqliteConnectOptions::from_str(path_or_url)
            .map_err(|err| StoreError::Invalid(format!("database URL \"{path_or_url}\": {err}")))?
    } else {
        SqliteConnectOptions::new().filename(path_or_url)
    };
    Ok(options
        .create_if_missing(true)
        .journal_mode(SqliteJournalMode::Wal)
        .synchronous(SqliteSynchronous::Normal)
        .busy_timeout(BUSY_TIMEOUT)
        .foreign_keys(true))
}

/// SQLite's own message for a missing directory is "unable to open database file"; say which.
fn check_directory(path_or_url: &str, file: &Path) -> Result<(), StoreError> {
    let Some(parent) = file.parent().filter(|p| !p.as_os_str().is_empty()) else {
        return Ok(());
    };
    if parent.is_dir() {
        return Ok(());
    }
    Err(StoreError::Unavailable(format!(
        "cannot open database \"{path_or_url}\": directory \"{}\" does not exist",
        parent.display()
    )))
}

fn open_error(path_or_url: &str, err: sqlx::Error) -> StoreError {
    StoreError::Unavailable(format!("cannot open database \"{path_or_url}\": {err}"))
}

#[async_trait]
impl Store for SqliteStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.insert_session_row(session).await
    }

    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError> {
        self.save_session_state_row(session_id, state).await
    }

    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.get_session_row(session_id).await
    }

    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError> {
        self.list_session_rows(include_closed).await
    }

    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError> {
        self.close_session_row(session_id).await
    }

    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        self.list_call_rows(session_id, after, limit).await
    }

    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError> {
        self.claim_batch_row(batch).await
    }

    async fn write_behind(&self, writes: &BehindWrites) -> Vec<StoreError> {
        self.write_behind_rows(writes).await
    }

    async fn complete_batch(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError> {
        self.complete_batch_row(batch_id, results).await
    }

    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        self.get_batch_row(session_id, batch_id).await
    }

    async fn append_events(&self, events: &[Arc<Event>]) -> Result<(), StoreError> {
        self.append_event_rows(events).await
    }

    async fn append_events_numbered(
        &self,
        events: &[Arc<Event>],
    ) -> Result<Range<u64>, StoreError> {
        self.append_numbered_event_rows(events).await
    }

    async fn read_events(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        self.read_event_rows(filter, after_seq, limit).await
    }

    async fn last_event_seq(&self) -> Result<u64, StoreError> {
        self.last_event_seq_row().await
    }

    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError> {
        self.prune_event_rows(before).await
    }

    async fn insert_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError> {
        self.insert_approval_row(approval).await
    }

    async fn pending_approvals(&self, session_id: &str) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.pending_approval_rows(session_id).await
    }

    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        self.resolve_approval_row(approval_id, decision, decided_by)
            .await
    }

    async fn heartbeat(&self, node: &NodeRecord) -> Result<(), StoreError> {
        self.heartbeat_row(node).await
    }

    async fn get_node(&self, node_id: &str) -> Result<Option<NodeRecord>, StoreError> {
        self.get_node_row(node_id).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        self.list_node_rows().await
    }

    async fn claim_silent_node(
        &self,
        node_id: &str,
        silent_since: SystemTime,
        by: &str,
    ) -> Result<bool, StoreError> {
        self.claim_silent_node_row(node_id, silent_since, by).await
    }

    async fn adopt_session(
        &self,
        session_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError> {
        self.adopt_session_row(session_id, from, to).await
    }

    async fn mark_interrupted_calls(&self, session_id: &str) -> Result<u64, StoreError> {
        self.mark_interrupted_call_rows(session_id).await
    }

    /// Idempotent: each step does nothing the second time.
    async fn close(&self) {
        // The writer thread commits everything queued before the close, so every write that
        // was waiting gets its answer.
        // Readers first: the writer's close checkpoints the log and removes it only when no
        // other connection has the database open.
        self.checkpointer.stop();
        self.readers.close().await;
        self.journal.close(&self.writer).await;
        self.writer.close().await;
    }
}
