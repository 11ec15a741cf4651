//! [`SqliteStore`]: the embedded default [`Store`](super::Store), on one SQLite file through
//! sqlx.
//!
//! This file owns opening the database (connection settings, migrations, the writer thread
//! and the read pool) and closing it ([`StoreLifecycle`]); each area trait is implemented
//! once, in the file of its area: `sessions`, `batches` (claims and the writes left behind
//! answers), `audit` (audit rows through the journal, read back by cursor), `results` (the
//! statements for offloaded outputs), `events`, `approvals`, `nodes` (daemons, adoption,
//! interrupted calls). Rows read back are decoded by `store::rows`, shared with Postgres.
//! `writer` runs every write on one connection with group commit, `journal` makes audit rows
//! durable before they reach the table, `checkpoint` copies the write-ahead log back beside
//! it, `convert` holds SQLite's column access and error mapping.
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
//! - Several processes may share the file (a `toold mcp` per editor window, a `toold serve`):
//!   whatever must be unique is numbered by SQLite inside the writer's transaction (`BEGIN
//!   IMMEDIATE` takes the database's write lock, so max + 1 there is unique and in commit
//!   order): audit cursors (`journal`), event seqs (the store numbers events, and the bus's
//!   subscribers get them from the relay, `server/relay.rs`, as on Postgres). Each process's
//!   audit journal is its own, locked while it lives and replayed by another once it died.
//!   Migrations run under an exclusive `flock` on `<database file>.lock`, so two processes
//!   starting at once on a new directory do not both create the tables.
//! - A busy timeout, for the other processes writing to the file (and a backup, the `sqlite3`
//!   shell): a writer waits for another's commit instead of failing.
//! - Foreign keys on: batches and approvals must name a stored session.
//!
//! Times are stored as INTEGER milliseconds since the Unix epoch; JSON as TEXT.
//!
//! Deliberately absent: in-memory databases (the writer and the readers are separate
//! connections, so each would see its own empty database), and any SQL outside this folder.

mod approvals;
mod audit;
mod batches;
mod checkpoint;
mod convert;
mod events;
mod journal;
mod nodes;
mod results;
mod sessions;
mod snapshots;
mod writer;

use std::fs::{File, OpenOptions};
use std::os::fd::AsRawFd;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use sqlx::{ConnectOptions, Connection};
use tokio::sync::watch;
use tokio::task::JoinHandle;

use super::{StoreError, StoreLifecycle};
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
    writer: Arc<WriteThread>,
    /// Where audit rows are durable before the writer puts them in `calls`.
    journal: Arc<AuditJournal>,
    /// Copies the write-ahead log back into the database, beside the writer.
    checkpointer: Checkpointer,
    /// Read-only connections.
    readers: SqlitePool,
    /// This daemon's node id, written into every audit row.
    node_id: Arc<str>,
    /// The highest event seq this process stored: its relay's wake-up (other processes'
    /// events are found by the relay's poll).
    events_stored: watch::Sender<u64>,
    /// Replays, every `journal::REPLAY_EVERY`, the journals of processes that died.
    replayer: JoinHandle<()>,
}

impl SqliteStore {
    /// Opens (creating if missing) the database at `path_or_url` (a file path, or a
    /// `sqlite://` URL) and applies the migrations in `migrations/sqlite`.
    pub async fn open(path_or_url: &str, node_id: &str) -> Result<SqliteStore, StoreError> {
        let options = connect_options(path_or_url)?;
        check_directory(path_or_url, options.get_filename())?;
        migrate(&options, path_or_url).await?;
        let writer = Arc::new(WriteThread::open(
            options.get_filename(),
            path_or_url,
            BUSY_TIMEOUT,
        )?);
        let node_id: Arc<str> = Arc::from(node_id);
        let journal = Arc::new(
            AuditJournal::recover(options.get_filename(), node_id.clone(), &writer).await?,
        );
        let replayer = tokio::spawn(replay_dead_journals(
            Arc::downgrade(&journal),
            Arc::downgrade(&writer),
        ));
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
            events_stored: watch::Sender::new(0),
            replayer,
        })
    }

    /// The node id written into audit rows.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }
}

/// Every [`journal::REPLAY_EVERY`], replays the journals of processes that died while this one
/// runs, until the store is gone.
async fn replay_dead_journals(journal: Weak<AuditJournal>, writer: Weak<WriteThread>) {
    loop {
        tokio::time::sleep(journal::REPLAY_EVERY).await;
        let (Some(journal), Some(writer)) = (journal.upgrade(), writer.upgrade()) else {
            return;
        };
        if let Err(err) = journal.replay_dead(&writer).await {
            tracing::warn!(error = %err, "replaying the audit journal of a stopped process failed");
        }
    }
}

/// Creates the file if missing and applies the migrations, on a connection of its own that
/// is closed before the writer thread opens the file; under an exclusive `flock` on
/// `<file>.lock`, so that processes starting at once migrate one after the other (SQLite's
/// own locks do not make "is this migration applied? apply it" atomic: the second found the
/// tables half made, `table sessions already exists`).
async fn migrate(options: &SqliteConnectOptions, path_or_url: &str) -> Result<(), StoreError> {
    let _lock = lock_for_migrations(options.get_filename(), path_or_url).await?;
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

/// Waits (on a blocking thread) for the exclusive `flock` on `<database>.lock`, held until the
/// file returned is dropped.
async fn lock_for_migrations(database: &Path, path_or_url: &str) -> Result<File, StoreError> {
    let mut path = database.as_os_str().to_owned();
    path.push(".lock");
    let failed = move |err: std::io::Error| {
        StoreError::Unavailable(format!(
            "cannot lock database \"{path_or_url}\" for its migrations: {err}"
        ))
    };
    let file = OpenOptions::new()
        .create(true)
        .truncate(false)
        .write(true)
        .open(&path)
        .map_err(failed)?;
    tokio::task::spawn_blocking(move || {
        // SAFETY: `flock` on a descriptor this `File` owns; no memory is passed.
        let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX) };
        if locked == 0 {
            Ok(file)
        } else {
            Err(std::io::Error::last_os_error())
        }
    })
    .await
    .map_err(|err| failed(std::io::Error::other(err)))?
    .map_err(failed)
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

impl Drop for SqliteStore {
    fn drop(&mut self) {
        self.replayer.abort();
    }
}

#[async_trait]
impl StoreLifecycle for SqliteStore {
    /// Idempotent: each step does nothing the second time.
    async fn close(&self) {
        // The writer thread commits everything queued before the close, so every write that
        // was waiting gets its answer.
        // Readers first: the writer's close checkpoints the log and removes it only when no
        // other connection has the database open.
        self.replayer.abort();
        self.checkpointer.stop();
        self.readers.close().await;
        self.journal.close(&self.writer).await;
        self.writer.close().await;
    }
}
