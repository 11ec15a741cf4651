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
//! Writes nobody waits on to go on (events, a batch's record, session state saved behind the
//! answer) are *held*: they join the next group the writer thread commits, or commit there on
//! their own once [`HELD_LINGER`] has passed since the first of them was held. Under load the
//! rows requests leave behind thus ride along with queued audit rows, one commit (and one
//! write into the log) instead of several. A caller committing on its own thread does not
//! take them: that commit is on the way to an answer, and carries only the caller's write.
//!
//! Deliberately absent: retries (a failed commit means a failed disk; callers decide), and any
//! knowledge of the tables (each area's file writes its own statements).

use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::mpsc;
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use rusqlite::{Connection, OpenFlags};
use tokio::sync::oneshot;

use super::checkpoint::WRITER_AUTOCHECKPOINT_PAGES;
use crate::store::StoreError;

/// At most this many jobs share a transaction, so a flood of writes still commits (and
/// answers) in steps of bounded latency.
const GROUP_JOBS: usize = 1024;

/// How long a held write waits for another commit to ride along with before it commits on
/// its own.
const HELD_LINGER: Duration = Duration::from_millis(5);

/// Prepared statements kept per connection: every statement the store writes with, with room.
const STATEMENT_CACHE: usize = 64;

/// Called once the group holding the job has committed (or failed to).
type Reply = Box<dyn FnOnce(Result<(), StoreError>) + Send>;

/// A write: runs on the writer thread inside its savepoint, and returns what to tell its
/// caller once the group's fate is known.
type Job = Box<dyn FnOnce(&Connection) -> Reply + Send>;

enum Message {
    Job(Job),
    /// A write was held while none was: commit the held writes within [`HELD_LINGER`].
    Held,
    /// Commit what is queued, close the connection, and end the thread.
    Close(oneshot::Sender<()>),
}

/// The one write connection, shared by the writer thread and callers that find it free;
/// `None` once closed.
type SharedConnection = Arc<Mutex<Option<Connection>>>;

/// Writes waiting for the next commit.
type HeldJobs = Arc<Mutex<Vec<Job>>>;

/// The handle to the write connection and its thread. Cheap to share behind an `Arc`.
pub struct WriteThread {
    connection: SharedConnection,
    held: HeldJobs,
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
        let held = HeldJobs::default();
        let thread_held = held.clone();
        let thread = std::thread::Builder::new()
            .name("toold-sqlite-writer".to_owned())
            .spawn(move || run(&shared, &thread_held, receiver))
            .map_err(|err| {
                StoreError::Unavailable(format!(
                    "cannot start the writer thread of database \"{location}\": {err}"
                ))
            })?;
        Ok(WriteThread {
            connection,
            held,
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

    /// [`WriteThread::write`] for a write nobody waits on to go on: it joins the next
    /// transaction committed for another reason, or commits on its own after [`HELD_LINGER`].
    /// Returns once it is committed, like any write.
    pub async fn write_held<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, answered) = job(move |connection| in_savepoint(connection, work));
        self.push_held(job)?;
        answered.await.map_err(|_| closed())?
    }

    /// [`WriteThread::write_held`] without waiting: `then` is called on the writer thread with
    /// the outcome (`work`'s, once its group has committed, or the commit's error), also if
    /// `work` panics (a bug; with an error). Fails at once only if the store is closed; then,
    /// as for a write dropped unrun, `then` is not called.
    pub fn hold<T, F, D>(&self, work: F, then: D) -> Result<(), StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
        D: FnOnce(Result<T, StoreError>) + Send + 'static,
    {
        let mut then = CalledIfRun {
            then: Some(then),
            running: false,
            _outcome: std::marker::PhantomData,
        };
        let job: Job = Box::new(move |connection: &Connection| {
            then.running = true;
            let outcome = in_savepoint(connection, work);
            Box::new(move |committed: Result<(), StoreError>| then.call(committed.and(outcome)))
                as Reply
        });
        self.push_held(job)
    }

    fn push_held(&self, job: Job) -> Result<(), StoreError> {
        // Under the channel's lock, so `close` cannot slip in between: a write held here
        // is told to the thread before its `Close`, whose last commit then takes it.
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sender = jobs.as_ref().ok_or_else(closed)?;
        let first = {
            let mut held = self.held.lock().unwrap_or_else(|p| p.into_inner());
            held.push(job);
            held.len() == 1
        };
        // The thread is told once per held run, not once per write: it arms its timer then.
        if first {
            sender.send(Message::Held).map_err(|_| closed())?;
        }
        Ok(())
    }

    async fn submit<T, F>(&self, work: F) -> Result<T, StoreError>
    where
        T: Send + 'static,
        F: FnOnce(&Connection) -> Result<T, StoreError> + Send + 'static,
    {
        let (job, answered) = job(work);
        if let Some(job) = self.commit_here(job) {
            self.send(Message::Job(job))?;
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
        // Without the held writes: this commit is on its caller's way to answering.
        commit_group(connection, None, &mut vec![job]);
        None
    }

    fn send(&self, message: Message) -> Result<(), StoreError> {
        let jobs = self.jobs.lock().unwrap_or_else(|p| p.into_inner());
        let sender = jobs.as_ref().ok_or_else(closed)?;
        sender.send(message).map_err(|_| closed())
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

/// A held write's `then`, called once its job has run: with the outcome, or, if the job
/// panicked (it is dropped, running, uncalled), with an error saying so. Without this, a
/// panicking job's `then` would never be called (the journal's rows of a panicked ingest were
/// then left uncommitted until a restart).
struct CalledIfRun<T, D: FnOnce(Result<T, StoreError>)> {
    then: Option<D>,
    running: bool,
    _outcome: std::marker::PhantomData<fn(T)>,
}

impl<T, D: FnOnce(Result<T, StoreError>)> CalledIfRun<T, D> {
    fn call(&mut self, outcome: Result<T, StoreError>) {
        if let Some(then) = self.then.take() {
            then(outcome);
        }
    }
}

impl<T, D: FnOnce(Result<T, StoreError>)> Drop for CalledIfRun<T, D> {
    fn drop(&mut self) {
        if self.running {
            self.call(Err(StoreError::Database(
                "a held write panicked; nothing of it was committed".to_owned(),
            )));
        }
    }
}

/// `work` as a job, and where its caller's answer arrives.
fn job<T, F>(work: F) -> (Job, oneshot::Receiver<Result<T, StoreError>>)
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
    (job, answered)
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
    // Every job runs in a savepoint, whose statement journal (copies of the pages the job
    // changes) SQLite spills to a temporary file past 64 KiB unless temporary data is kept in
    // memory: a file created, written and deleted per group commit under load.
    connection.execute_batch(
        "PRAGMA synchronous = NORMAL; PRAGMA foreign_keys = ON; PRAGMA temp_store = MEMORY;",
    )?;
    // The checkpointer thread copies the log back; the writer only as a safety net.
    let _pages: i64 = connection.query_row(
        &format!("PRAGMA wal_autocheckpoint = {WRITER_AUTOCHECKPOINT_PAGES}"),
        [],
        |row| row.get(0),
    )?;
    connection.set_prepared_statement_cache_capacity(STATEMENT_CACHE);
    Ok(connection)
}

/// The thread: take what is queued, run it (and whatever is held) in one transaction, commit,
/// answer; commit held writes on their own once they have waited [`HELD_LINGER`]; until
/// closed or every handle is gone.
fn run(connection: &SharedConnection, held: &HeldJobs, receiver: mpsc::Receiver<Message>) {
    let mut group: Vec<Job> = Vec::with_capacity(GROUP_JOBS);
    let mut closing = None;
    // When the held writes must be committed, if any are held.
    let mut held_until: Option<Instant> = None;
    while closing.is_none() {
        let received = match held_until {
            Some(until) => receiver.recv_timeout(until.saturating_duration_since(Instant::now())),
            None => receiver
                .recv()
                .map_err(|mpsc::RecvError| mpsc::RecvTimeoutError::Disconnected),
        };
        match received {
            Ok(Message::Job(job)) => group.push(job),
            Ok(Message::Held) => {
                held_until.get_or_insert_with(|| Instant::now() + HELD_LINGER);
                continue;
            }
            Ok(Message::Close(done)) => closing = Some(done),
            // Time for the held writes: committed below, with nothing else.
            Err(mpsc::RecvTimeoutError::Timeout) => {}
            Err(mpsc::RecvTimeoutError::Disconnected) => break,
        }
        while closing.is_none() && group.len() < GROUP_JOBS {
            match receiver.try_recv() {
                Ok(Message::Job(job)) => group.push(job),
                Ok(Message::Held) => {
                    held_until.get_or_insert_with(|| Instant::now() + HELD_LINGER);
                }
                Ok(Message::Close(done)) => closing = Some(done),
                Err(_) => break,
            }
        }
        // Every commit takes what is held, so after this one nothing is waiting for the timer
        // (a write held later tells the thread again).
        held_until = None;
        let guard = connection.lock().unwrap_or_else(|p| p.into_inner());
        match guard.as_ref() {
            Some(connection) => commit_group(connection, Some(held), &mut group),
            // Closed: the callers' answers go with the jobs (the store is closed).
            None => {
                group.clear();
                held.lock().unwrap_or_else(|p| p.into_inner()).clear();
            }
        }
    }
    let closing_connection = connection.lock().unwrap_or_else(|p| p.into_inner()).take();
    if let Some(connection) = closing_connection {
        // Held writes left by a last caller are committed before the connection closes.
        commit_group(&connection, Some(held), &mut group);
        if let Err((_, err)) = connection.close() {
            tracing::warn!(error = %err, "closing the write connection failed");
        }
    }
    if let Some(done) = closing {
        let _ = done.send(());
    }
}

/// Runs `group` (after the held writes, when given) in one transaction and answers every
/// job with the commit's outcome.
fn commit_group(connection: &Connection, held: Option<&HeldJobs>, group: &mut Vec<Job>) {
    if let Some(held) = held {
        let mut held = held.lock().unwrap_or_else(|p| p.into_inner());
        if !held.is_empty() {
            // Held first: they were queued before anything that finds them here.
            group.splice(0..0, held.drain(..));
        }
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_write_connection_logs_ahead_and_keeps_temporary_data_in_memory() {
        let dir = tempfile::tempdir().unwrap();
        let connection = open_connection(&dir.path().join("t.db"), Duration::from_secs(1)).unwrap();
        let pragma = |name: &str| -> String {
            connection
                .query_row(&format!("PRAGMA {name}"), [], |row| {
                    row.get::<_, rusqlite::types::Value>(0)
                })
                .map(|value| format!("{value:?}"))
                .unwrap()
        };
        assert_eq!(pragma("journal_mode"), r#"Text("wal")"#);
        assert_eq!(pragma("synchronous"), "Integer(1)");
        assert_eq!(pragma("foreign_keys"), "Integer(1)");
        // 2 is MEMORY.
        assert_eq!(pragma("temp_store"), "Integer(2)");
    }

    #[tokio::test]
    async fn a_held_write_that_panics_is_still_answered_as_failed() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("t.db");
        let writer =
            WriteThread::open(&path, path.to_str().unwrap(), Duration::from_secs(1)).unwrap();
        let (told, outcome) = oneshot::channel();
        writer
            .hold(
                |_| -> Result<(), StoreError> { panic!("a bug in a held write") },
                move |outcome| {
                    let _ = told.send(outcome);
                },
            )
            .unwrap();
        let outcome = outcome.await.expect("`then` was called");
        assert!(outcome.unwrap_err().to_string().contains("panicked"));
        // The writer carries on.
        writer.write(|_| Ok(())).await.unwrap();
        writer.close().await;
    }
}
