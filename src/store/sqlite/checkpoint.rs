//! The checkpointer: copies the write-ahead log back into the database file on a thread of
//! its own, so the writer thread never does it inside a commit.
//!
//! SQLite's default is to checkpoint in the commit that pushes the WAL past 1 000 pages,
//! which stalls every caller waiting on that commit. Here the writer's automatic checkpoint
//! is raised to a safety net ([`WRITER_AUTOCHECKPOINT_PAGES`]) and this thread runs a
//! `PASSIVE` checkpoint every [`INTERVAL`]: passive checkpoints never wait for the writer or
//! readers, they copy what they can; once everything is copied, the writer's next transaction
//! starts the WAL over from its beginning. An idle daemon's checkpoint finds nothing to do.
//!
//! Deliberately absent: `FULL`/`TRUNCATE` checkpoints (they wait on readers and writers); the
//! writer's final checkpoint on close does the last copy.

use std::path::Path;
use std::sync::Mutex;
use std::sync::mpsc;
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};

use crate::store::StoreError;

/// How often the log is copied back.
const INTERVAL: Duration = Duration::from_millis(200);

/// The writer checkpoints by itself only past this many pages (40 MiB of 4 KiB pages): only
/// if this thread cannot keep up.
pub const WRITER_AUTOCHECKPOINT_PAGES: u32 = 10_000;

pub struct Checkpointer {
    /// Dropping the sender (on `stop`) ends the thread at its next wake-up, at once.
    stop: Mutex<Option<mpsc::Sender<()>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl Checkpointer {
    pub fn start(file: &Path, location: &str, busy_timeout: Duration) -> Result<Self, StoreError> {
        let unavailable = |err: &dyn std::fmt::Display| {
            StoreError::Unavailable(format!(
                "cannot start the checkpointer of database \"{location}\": {err}"
            ))
        };
        let connection = Connection::open_with_flags(
            file,
            OpenFlags::SQLITE_OPEN_READ_WRITE | OpenFlags::SQLITE_OPEN_NO_MUTEX,
        )
        .and_then(|connection| {
            connection.busy_timeout(busy_timeout)?;
            Ok(connection)
        })
        .map_err(|err| unavailable(&err))?;
        let (stop, stopped) = mpsc::channel::<()>();
        let thread = std::thread::Builder::new()
            .name("toold-sqlite-checkpoint".to_owned())
            .spawn(move || run(connection, stopped))
            .map_err(|err| unavailable(&err))?;
        Ok(Checkpointer {
            stop: Mutex::new(Some(stop)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Ends the thread and waits for it (at most one checkpoint in progress). Idempotent.
    pub fn stop(&self) {
        self.stop.lock().unwrap_or_else(|p| p.into_inner()).take();
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the sqlite checkpoint thread panicked");
        }
    }
}

fn run(connection: Connection, stopped: mpsc::Receiver<()>) {
    while let Err(mpsc::RecvTimeoutError::Timeout) = stopped.recv_timeout(INTERVAL) {
        let checkpoint = connection.query_row("PRAGMA wal_checkpoint(PASSIVE)", [], |row| {
            row.get::<_, i64>(0)
        });
        if let Err(err) = checkpoint {
            tracing::warn!(error = %err, "checkpointing the write-ahead log failed");
        }
    }
}
