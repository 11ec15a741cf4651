//! The one write connection, on a thread of its own, committing in groups.
//!
//! SQLite admits one writer at a time, so every write of the store goes to one connection.
//! A write is a closure over that connection. A caller that finds the connection free runs
//! its write at once, on its own thread, in a transaction of its own: the commonest case on
//! a lightly loaded daemon, and the cheapest (no hand-off between threads at all; the cost is
//! a small transaction's blocking write into the page cache, tens of microseconds). A caller
//! that finds it busy sends the closure down a channel to the writer thread, which takes
//! everything queued (up to [`GROUP_JOBS`]), runs it in one transaction, commits, and only
//! then answers each caller. Under load one commit thus serves every concurrent caller
//! (audit rows of parallel calls, events, a batch's bookkeeping). Either way a caller is
//! answered only after its write is committed. Writes of different callers may commit in
//! either order; a caller's own writes are sequential (each awaits the last).
//!
//! Why a thread and rusqlite rather than sqlx's connection: sqlx's SQLite driver runs each
//! statement on a worker thread of its own and answers through a channel, so a transaction of
//! n statements costs 2n cross-thread hand-offs; on a loaded two-core machine those context
//! switches, not SQLite, were most of the time of a call. Here a whole group costs one hand-off
//! in and one wake-up per caller out. Reads stay on sqlx's pool (they are independent and
//! parallel); migrations run through sqlx before this thread opens the file.
//!
//! Each job runs inside a savepoint: a job that fails (a unique key taken, a missing parent)
//! undoes its own statements and reports its error, and the rest of the group still commits.
//! If the group's commit fails, every caller in it gets that error.
//!
//! Deliberately absent: retries (a failed commit means a failed disk; callers decide), and any
//! knowledge of the tables (each area's file writes its own statements).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::Duration;

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use super::checkpoint::WRITER_AUTOCHECKPOINT_PAGES;
use crate::store::StoreError;

/// At most this many jobs share a transaction, so a flood of writes still commits (and
/// answers) in steps of bounded latency.
const GROUP_JOBS: usize = 1024;

/// Prepared statements kept per connection: every statement the store writes with, with room.
const STATEMENT_CACHE: usize = 64;

/// Called once the group holding the job has committed (or failed to).
type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A write: runs on the writer thread inside its savepoint, and returns what to tell its
/// caller once the group's fate is known.
type Job = Box<dyn FnOnce(&Connection) -> Reply + Send>;

enum Message {
    Job(Job),
    /// Commit what is queued, close the connection, and end the thread.
    Close(oneshot::Sender<()>),
}

/// The one write connection, shared by the writer thread and callers that find it free;
/// `None` once closed.
type SharedConnection = Arc<Mutex<Option<Connection>>>;

/// The handle to the write connection and its thread. Cheap to share behind an `Arc`.
pub struct WriteThread {
    connection: SharedConnection,
    /// `None` once closed: writes after `close` fail.
    jobs: Mutex<Option<mpsc::Sender<Message>>>,
    thread: Mutex<Option<JoinHandle<()>>>,
}

impl WriteThread {
    /// Opens the database file for writing (WAL, `synchronous = NORMAL`, foreign keys on; see
    /// the module header of `sqlite`) and starts the thread.
    pub fn open(file: &Path, location: &str, busy_timeout: Duration) -> Result<Self, StoreError> {
        let connection = open_connection(file, busy_timeout).map_err(|err| {
            StoreError::Unavailable(format!("cannot open database \"{location}\": {err}"))
        })?;
        let connection: SharedConnection = Arc::new(Mutex::new(Some(connection)));
        let (sender, receiver) = mpsc::channel();
        let shared = connection.clone();
        let thread = std::thread::Builder::new()
            .name("toold-sqlite-writer".to_owned())
            .spawn(move || run(&shared, receiver))
            .map_err(|err| {
                StoreError::Unavailable(format!(
                    "cannot start the writer thread of database \"{location}\": {err}"
                ))
            })?;
        Ok(WriteThread {
            connection,
            jobs: Mutex::new(Some(sender)),
            thread: Mutex::new(Some(thread)),
        })
    }

    /// Runs `work` on the write connection and returns its outcome once it is committed. The
    /// work runs in a savepoint: if it fails, none of its statements stand.
    pub async fn write<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(move |connection| in_savepoint(connection, work))
            .await
    }

    /// [`WriteThread::write`] for work that changes the database with one statement at most,
    /// which SQLite makes all-or-nothing by itself: no savepoint around it (two statements
    /// saved per audit row, the commonest write).
    pub async fn write_one<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        self.submit(work).await
    }

    async fn submit<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (answer, answered) = oneshot::channel();
        let job: Job = Box::new(move |connection: &Connection| {
            let outcome = work(connection);
            Box::new(move |committed: Result<(), StoreError>| {
                // The caller may have stopped waiting (its task was cancelled): the write
                // stands all the same, as a statement already sent to a server would.
                let _ = answer.send(committed.and(outcome));
            }) as Reply
        });
        if let Some(job) = self.commit_here(job) {
            self.send(job)?;
        }
        answered.await.map_err(|_| closed())?
    }

    /// Commits `job` on this thread if the connection is free; gives it back otherwise (or
    /// once closed, when sending it fails with the store's closed error).
    fn commit_here(&self, job: Job) -> Option<Job> {
        let Ok(guard) = self.connection.try_lock() else {
            return Some(job);
        };
        let Some(connection) = guard.as_ref() else {
            return Some(job);
        };
        commit_group(connection, &mut vec![job]);
        None
    }

    fn send(&self, job: Job) -> Result<(), StoreError> {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sender = jobs.as_ref().ok_or_else(closed)?;
        sender.send(Message::Job(job)).map_err(|_| closed())
    }

    /// Commits every write queued so far, closes the connection (checkpointing the WAL) and
    /// waits for the thread to end. Idempotent.
    pub async fn close(&self) {
        let sender = self.jobs.lock().unwrap_or_else(|p| p.into_inner()).take();
        let Some(sender) = sender else {
            return;
        };
        let (done, finished) = oneshot::channel();
        if sender.send(Message::Close(done)).is_ok() {
            let _ = finished.await;
        }
        let thread = self.thread.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(thread) = thread
            && thread.join().is_err()
        {
            tracing::error!("the sqlite writer thread panicked");
        }
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable("the store is closed".to_owned())
}

fn open_connection(file: &Path, busy_timeout: Duration) -> rusqlite::Result<Connection> {
    let connection = Connection::open_with_flags(
        file,
        OpenFlags::SQLITE_OPEN_READ_WRITE
            | OpenFlags::SQLITE_OPEN_CREATE
            | OpenFlags::SQLITE_OPEN_NO_MUTEX,
    )?;
    connection.busy_timeout(busy_timeout)?;
    // `journal_mode` answers with a row, so it is read rather than executed.
    let _mode: String = connection.query_row("PRAGMA journal_mode = WAL", [], |row| row.get(0))?;
    connection.execute_batch("PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON;")?;
    // The checkpointer thread copies the log back; the writer only as a safety net.
    let _pages: i64 = connection.query_row(
        &format!("PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}"),
        [],
        |row| row.get(0),
    )?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(connection)
}

/// The thread: take what is queued, run it in one transaction, commit, answer; until closed
/// or every handle is gone.
fn run(connection: &SharedConnection, receiver: mpsc::Receiver<Message>) {
    let mut group: Vec<Job> = Vec::with_capacity(GROUP_JOBS);
    let mut closing = None;
    while closing.is_none() {
        match receiver.recv() {
            Ok(Message::Job(job)) => group.push(job),
            Ok(Message::Close(done)) => closing = Some(done),
            Err(mpsc::RecvError) => break,
        }
        while closing.is_none() && group.len() < GROUP_JOBS {
            match receiver.try_recv() {
                Ok(Message::Job(job)) => group.push(job),
                Ok(Message::Close(done)) => closing = Some(done),
                Err(_) => break,
            }
        }
        let guard = connection.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(connection) => commit_group(connection, &mut group),
            // Closed: the callers' answers go with the jobs (the store is closed).
            None => group.clear(),
        }
    }
    let closing_connection = connection.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(connection) = closing_connection
        && let Err((_, err)) = connection.close()
    {
        tracing::warn!(error = %err, "closing the write connection failed");
    }
    if let Some(done) = closing {
        let _ = done.send(());
    }
}

/// Runs `group` in one transaction and answers every job with the commit's outcome.
fn commit_group(connection: &Connection, group: &mut Vec<Job>) {
    if group.is_empty() {
        return;
    }
    // A transaction left open by an earlier failure would swallow this group's writes.
    if !connection.is_autocommit() {
        let _ = execute(connection, "ROLLBACK");
    }
    // If the transaction cannot begin (another process holds the lock past the busy timeout),
    // each job is a transaction of its own: slower, but every write still lands or fails on
    // its own.
    let began = execute(connection, "BEGIN IMMEDIATE").is_ok();
    let mut replies: Vec<Reply> = Vec::with_capacity(group.len());
    // SQLite rolls a whole transaction back by itself on some errors (a full disk, I/O
    // errors), savepoints notwithstanding: the writes before were lost, and those after ran
    // (and committed) on their own.
    let mut rolled_back_before = None;
    for job in group.drain(..) {
        replies.extend(run_job(connection, job));
        if began && rolled_back_before.is_none() && connection.is_autocommit() {
            rolled_back_before = Some(replies.len());
        }
    }
    let committed = match (began, rolled_back_before) {
        (false, _) => Ok(()),
        (true, None) => execute(connection, "COMMIT").map(drop).map_err(|err| {
            let _ = execute(connection, "ROLLBACK");
            StoreError::Unavailable(format!("committing {} writes failed: {err}", replies.len()))
        }),
        (true, Some(lost)) => {
            let rolled_back = StoreError::Unavailable(format!(
                "the database rolled back a transaction of {lost} writes"
            ));
            for (index, reply) in replies.drain(..).enumerate() {
                reply(if index < lost {
                    Err(rolled_back.clone())
                } else {
                    Ok(())
                });
            }
            return;
        }
    };
    for reply in replies {
        reply(committed.clone());
    }
}

/// Runs one job. A job that panics (a bug) is undone and its caller's answer dropped, which
/// the caller sees as an unavailable store; the thread and the rest of the group carry on.
fn run_job(connection: &Connection, job: Job) -> Option<Reply> {
    match std::panic::catch_unwind(AssertUnwindSafe(|| job(connection))) {
        Ok(reply) => Some(reply),
        Err(_) => {
            // A `write` job is undone to its savepoint; a `write_one` job's single statement,
            // if it ran, stands (there is no savepoint to return to).
            tracing::error!("a store write panicked; its caller is answered with an error");
            let _ = execute(connection, "ROLLBACK TO job");
            let _ = execute(connection, "RELEASE job");
            None
        }
    }
}

/// Runs a statement without parameters from the cache (`execute_batch` would prepare it anew
/// every time).
fn execute(connection: &Connection, sql: &str) -> rusqlite::Result<usize> {
    connection
        .prepare_cached(sql)
        .and_then(|mut statement| statement.execute([]))
}

/// Runs `work` inside a savepoint: its statements stand only if it succeeds.
fn in_savepoint<T>(
    connection: &Connection,
    work: impl FnOnce(&Connection) -> Result<T, StoreError>,
) -> Result<T, StoreError> {
    let statement = |sql: &str| {
        execute(connection, sql).map_err(|err| StoreError::Database(format!("{sql}: {err}")))
    };
    statement("SAVEPOINT job")?;
    let outcome = work(connection);
    if outcome.is_err() {
        statement("ROLLBACK TO job")?;
    }
    statement("RELEASE job")?;
    outcome
}
