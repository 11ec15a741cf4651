//! The audit journal: an audit row is durable once it is appended, with one `write(2)`, to a
//! file beside the database; the `calls` table takes it behind the answer.
//!
//! Why: committing a row to SQLite on the request's way to its answer cost a transaction
//! (locks, WAL frames for the table and its index) per call, the largest single step of a
//! call. The journal gives the same durability as that commit did: SQLite's WAL with
//! `synchronous = NORMAL` is written with `write(2)` and not fsynced, so it survives the
//! process being killed but not the machine losing power, and so does an appended record.
//!
//! Several processes may use one database (two `toold mcp` of two editor windows, beside a
//! `toold serve`), so nothing a process numbers alone may need to be unique in the table
//! (decision, 2026-12-02; it lost rows to `UNIQUE constraint failed: calls.cursor` before):
//! - Each process's journal has an id of its own, handed out by the database when the store
//!   opens (`journals`, an `AUTOINCREMENT` table). Its rows are numbered 1, 2, … in append
//!   order, and a row's *journal key* is the id in the high 32 bits and that number in the
//!   low 32. The key is what makes putting a row in the table idempotent (`INSERT OR IGNORE`,
//!   a unique index on `calls.journal_key`): an ingest retried after a commit that had in fact
//!   happened, or a replay of a journal partly committed, inserts exactly the missing rows.
//! - The row's `cursor` is given by SQLite as it is inserted (`INTEGER PRIMARY KEY`: max + 1,
//!   inside the writer's transaction, which holds the database's write lock), so cursors are
//!   unique across processes and increase in commit order: paging by cursor misses nothing.
//!   Marking interrupted calls inserts rows of its own the same way, after every appended row.
//! - The journal is a series of segment files `<database file>.audit.<journal id>.<n>`.
//!   Appends go to the newest; past [`SEGMENT_BYTES`] a new one starts. A segment is deleted
//!   once every row in it is committed to the table and it is no longer appended to; a clean
//!   close deletes them all. Each segment is held with an exclusive `flock` for as long as its
//!   process has it (the lock goes with the process, however it ends).
//! - A segment whose lock is free belongs to a process that died: whoever opens the store
//!   next replays it (every record up to the first torn or corrupt one; a `kill -9` mid-`write`
//!   leaves at most one, and its call had not been answered) under that lock, then deletes it.
//!   Each process also looks for such segments every [`REPLAY_EVERY`] while it runs, so the
//!   rows of a process that died beside it do not wait for a restart. A segment of the format
//!   before journal ids (`<database file>.audit.<n>`, its records carrying their cursors) is
//!   replayed the old way: inserted under its cursor if that is free.
//! - Appending schedules one *held* ingest on the writer thread (`writer`): it takes every row
//!   appended so far and inserts them in the writer's next group (with queued writes and
//!   events), or on its own within the writer's linger.
//! - Anything reading the audit log first *flushes* the journal: it commits every row appended
//!   before the read began.
//! - A record is framed as payload length (u32), CRC-32 of key and payload (u32), journal key
//!   (i64), payload (the node and the row as JSON).
//! - A failed ingest puts its rows back to be retried with the next one; they stay in the
//!   journal, which a restart replays, until they are committed. So does one that panics (a
//!   bug): its rows are in its `Taken` before it inserts anything, and the writer settles a
//!   held write whose job panicked as failed (`WriteThread::hold`), so they are retried, and
//!   their segment deleted once they are committed, rather than left until a restart.
//! - A journal holds at most 2^32 - 1 rows (a process appending more is refused further
//!   appends: billions of calls without a restart).

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::{Read, Write};
use std::os::fd::AsRawFd;
use std::os::unix::fs::{MetadataExt, OpenOptionsExt};
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use rusqlite::Connection;

use super::convert::sqlite_error;
use super::writer::WriteThread;
use crate::store::StoreError;
use crate::store::columns::AuditRow;

/// A segment past this many bytes is closed and a new one started (and the old one deleted
/// once its rows are committed), which bounds what a restart after a crash replays.
const SEGMENT_BYTES: u64 = 1 << 20;

/// Length, checksum, key.
const FRAME_HEAD: usize = 16;

/// Rows appended and not yet committed beyond which an append waits for them to be
/// committed ([`AuditJournal::needs_flush`]): memory stays bounded when the table cannot keep
/// up, and the calls appending slow down to its pace.
const BACKLOG_ROWS: usize = 16 * 1024;

/// How often a running store looks for the journals of processes that died beside it.
pub(super) const REPLAY_EVERY: Duration = Duration::from_secs(10);

/// The journal of one store.
pub(super) struct AuditJournal {
    /// Segment paths are `<prefix><id>.<generation>`; other processes' are beside them.
    prefix: PathBuf,
    /// This journal's id (`journals.id`), the high half of its rows' keys.
    id: i64,
    /// Written into every row appended by this daemon.
    node: Arc<str>,
    state: Mutex<State>,
    /// The next ingest panics once its rows are taken (a bug, simulated).
    #[cfg(test)]
    pub(super) panic_next_ingest: std::sync::atomic::AtomicBool,
}

struct State {
    /// The segment appended to; `None` once closed.
    current: Option<Segment>,
    /// The number (low half of the key) the next appended row takes.
    next_number: i64,
    /// Appended, not yet taken by an ingest; in key order.
    pending: Vec<Entry>,
    /// An ingest is held on the writer and has not yet taken `pending`.
    ingest_held: bool,
    /// Ingests that took rows and have not settled.
    in_flight: usize,
    /// Rows appended and not yet committed to the table (pending or taken).
    uncommitted: usize,
    /// Rows appended and committed, per live segment (with the locked file of each segment
    /// no longer appended to).
    counts: BTreeMap<u64, Counts>,
    /// The current segment took a failed write: start a new one before the next append.
    rotate: bool,
}

struct Segment {
    generation: u64,
    /// Open and locked for as long as the segment exists.
    file: File,
    length: u64,
}

#[derive(Default)]
struct Counts {
    appended: u64,
    committed: u64,
    /// A segment no longer appended to keeps its lock until it is deleted.
    locked: Option<File>,
}

/// A row appended and not yet known to be committed.
pub(super) struct Entry {
    generation: u64,
    key: i64,
    node: Arc<str>,
    row: AuditRow,
}

/// Rows an ingest took, kept until its commit's outcome is known.
pub(super) type Taken = Arc<Mutex<Vec<Entry>>>;

/// A segment file's name after the prefix: this format's, or the one before journal ids.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum SegmentName {
    /// `<n>`: records carry their cursors.
    Unkeyed(u64),
    /// `<journal id>.<n>`: records carry their journal keys.
    Keyed { journal: i64, generation: u64 },
}

/// A replayed record: its key (or, in an unkeyed segment, its cursor), node and row.
type Replayed = (Insert, String, AuditRow);

impl AuditJournal {
    /// Replays the journals left by processes that died (rows they appended that are not in
    /// the table), deletes them, takes a journal id from the database and starts a segment.
    pub(super) async fn recover(
        database: &Path,
        node: Arc<str>,
        writer: &WriteThread,
    ) -> Result<AuditJournal, StoreError> {
        let mut prefix = database.as_os_str().to_owned();
        prefix.push(".audit.");
        let prefix = PathBuf::from(prefix);
        replay_dead(&prefix, None, writer).await?;
        let pid = i64::from(std::process::id());
        let opened_at = super::convert::millis(std::time::SystemTime::now());
        let id: i64 = writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO journals (pid, opened_at) VALUES (?1, ?2) RETURNING id",
                    )
                    .and_then(|mut insert| {
                        insert.query_row(rusqlite::params![pid, opened_at], |row| row.get(0))
                    })
                    .map_err(|err| sqlite_error("taking an audit journal id", err))
            })
            .await?;
        if !(1..=i64::from(u32::MAX >> 1)).contains(&id) {
            return Err(StoreError::Invalid(format!(
                "audit journal id {id} is out of range (at most 2^31 - 1 journals)"
            )));
        }
        let generation = 1;
        let current = Segment::create(&prefix, id, generation)?;
        Ok(AuditJournal {
            prefix,
            id,
            node,
            state: Mutex::new(State {
                current: Some(current),
                next_number: 1,
                pending: Vec::new(),
                ingest_held: false,
                in_flight: 0,
                uncommitted: 0,
                counts: BTreeMap::from([(generation, Counts::default())]),
                rotate: false,
            }),
            #[cfg(test)]
            panic_next_ingest: Default::default(),
        })
    }

    /// Replays the journals of processes that died since (or while) this one opened the
    /// store; how many rows were put in the table.
    pub(super) async fn replay_dead(&self, writer: &WriteThread) -> Result<usize, StoreError> {
        replay_dead(&self.prefix, Some(self.id), writer).await
    }

    /// Appends `rows` with one write; once it returns they are durable. Schedules their
    /// ingest on `writer`.
    pub(super) fn append(
        self: &Arc<Self>,
        writer: &WriteThread,
        rows: Vec<AuditRow>,
    ) -> Result<(), StoreError> {
        if rows.is_empty() {
            return Ok(());
        }
        // Rendered before the lock; keys and checksums are added under it.
        let payloads = rows
            .iter()
            .map(|row| {
                serde_json::to_vec(&(&*self.node, row))
                    .map_err(|err| StoreError::Database(format!("encoding an audit row: {err}")))
            })
            .collect::<Result<Vec<_>, _>>()?;
        let mut state = self.lock();
        if state.rotate
            || state
                .current
                .as_ref()
                .is_some_and(|segment| segment.length >= SEGMENT_BYTES)
        {
            self.rotate(&mut state)?;
        }
        let first_number = state.next_number;
        if first_number + rows.len() as i64 > i64::from(u32::MAX) {
            return Err(StoreError::Unavailable(
                "the audit journal of this process is full (2^32 - 1 rows); restart it".to_owned(),
            ));
        }
        let first_key = (self.id << 32) | first_number;
        let Some(segment) = state.current.as_mut() else {
            return Err(closed());
        };
        let mut frames = Vec::with_capacity(
            payloads
                .iter()
                .map(|payload| FRAME_HEAD + payload.len())
                .sum(),
        );
        for (offset, payload) in payloads.iter().enumerate() {
            frame(&mut frames, first_key + offset as i64, payload);
        }
        if let Err(err) = segment.file.write_all(&frames) {
            // A partial record would hide the ones after it from a replay: cut it off, and
            // carry on in a new segment.
            let _ = segment.file.set_len(segment.length);
            state.rotate = true;
            return Err(StoreError::Unavailable(format!(
                "appending to the audit journal failed: {err}"
            )));
        }
        segment.length += frames.len() as u64;
        let generation = segment.generation;
        state.next_number += rows.len() as i64;
        state.uncommitted += rows.len();
        state.counts.entry(generation).or_default().appended += rows.len() as u64;
        for (offset, row) in rows.into_iter().enumerate() {
            state.pending.push(Entry {
                generation,
                key: first_key + offset as i64,
                node: self.node.clone(),
                row,
            });
        }
        if !state.ingest_held {
            state.ingest_held = true;
            let taken = Taken::default();
            let (journal, settling) = (self.clone(), self.clone());
            let settled = taken.clone();
            let held = writer.hold(
                move |connection| journal.ingest(connection, &taken),
                move |outcome| settling.settle(outcome, &settled),
            );
            if let Err(err) = held {
                // The store is closing; its close flushes what is pending.
                state.ingest_held = false;
                return Err(err);
            }
        }
        Ok(())
    }

    /// Whether so many rows wait for the table that the caller should flush before going on.
    pub(super) fn needs_flush(&self) -> bool {
        self.lock().uncommitted > BACKLOG_ROWS
    }

    /// Commits every row appended before this call (reads of the audit log call it first).
    pub(super) async fn flush(self: &Arc<Self>, writer: &WriteThread) -> Result<(), StoreError> {
        {
            let state = self.lock();
            if state.pending.is_empty() && state.in_flight == 0 {
                return Ok(());
            }
        }
        // A held ingest that took rows commits in the group before this write runs (both hold
        // the connection), so after it every row appended before is in the table.
        let taken = Taken::default();
        let journal = self.clone();
        let ingesting = taken.clone();
        let outcome = writer
            .write(move |connection| journal.ingest(connection, &ingesting))
            .await;
        let failed = outcome.as_ref().err().cloned();
        self.settle(outcome, &taken);
        failed.map_or(Ok(()), Err)
    }

    /// Runs `work`, which inserts `calls` rows of its own, on the write connection, after
    /// inserting every appended row (taken into `taken`), so that its rows come after them.
    /// The caller settles `taken` with the commit's outcome ([`AuditJournal::settle`]).
    pub(super) fn after_pending<T>(
        &self,
        connection: &Connection,
        taken: &Taken,
        work: impl FnOnce(&Connection) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.take_and_insert(connection, taken)?;
        work(connection)
    }

    /// Commits what is pending, stops appends and deletes the journal (everything in it is
    /// then in the table). A row that could not be committed keeps its segment for the next
    /// start to replay.
    pub(super) async fn close(self: &Arc<Self>, writer: &WriteThread) {
        if let Err(err) = self.flush(writer).await {
            tracing::error!(error = %err, "the audit journal could not be committed at close; the next start replays it");
        }
        let mut state = self.lock();
        if let Some(current) = state.current.take() {
            // Its lock is kept until it is deleted.
            state.counts.entry(current.generation).or_default().locked = Some(current.file);
        }
        self.delete_committed_segments(&mut state);
    }

    /// On the write connection: takes every pending row into `taken` and inserts them.
    fn ingest(&self, connection: &Connection, taken: &Taken) -> Result<(), StoreError> {
        self.lock().ingest_held = false;
        self.take_and_insert(connection, taken)
    }

    /// Takes every pending row into `taken` (before inserting any, so that a panic while
    /// inserting leaves them to be settled, not dropped) and inserts them.
    fn take_and_insert(&self, connection: &Connection, taken: &Taken) -> Result<(), StoreError> {
        let entries = {
            let mut state = self.lock();
            state.in_flight += 1;
            std::mem::take(&mut state.pending)
        };
        let mut taken = taken.lock().unwrap_or_else(|p| p.into_inner());
        *taken = entries;
        #[cfg(test)]
        if self
            .panic_next_ingest
            .swap(false, std::sync::atomic::Ordering::SeqCst)
        {
            panic!("an ingest panicked (a test's fault)");
        }
        insert_entries(connection, &taken)
    }

    /// Once an ingest's commit is known: committed rows count towards deleting their segments;
    /// rows of a failed one go back to be retried.
    pub(super) fn settle<T>(&self, committed: Result<T, StoreError>, taken: &Taken) {
        let entries = std::mem::take(&mut *taken.lock().unwrap_or_else(|p| p.into_inner()));
        let mut state = self.lock();
        state.in_flight = state.in_flight.saturating_sub(1);
        if let Err(err) = committed.map(drop) {
            if !entries.is_empty() {
                tracing::error!(error = %err, rows = entries.len(), "audit rows could not be committed; they stay in the journal and are retried");
                // Before anything appended since: key order.
                state.pending.splice(0..0, entries);
            }
            return;
        }
        state.uncommitted = state.uncommitted.saturating_sub(entries.len());
        for entry in &entries {
            state.counts.entry(entry.generation).or_default().committed += 1;
        }
        self.delete_committed_segments(&mut state);
    }

    /// Deletes every segment that is no longer appended to and whose rows are all committed
    /// (unlinked before its lock is let go, so whoever takes the lock next finds it gone).
    fn delete_committed_segments(&self, state: &mut State) {
        let current = state.current.as_ref().map(|segment| segment.generation);
        let finished: Vec<u64> = state
            .counts
            .iter()
            .filter(|(generation, counts)| {
                Some(**generation) != current && counts.committed >= counts.appended
            })
            .map(|(generation, _)| *generation)
            .collect();
        for generation in finished {
            remove(&segment_path(&self.prefix, self.id, generation));
            state.counts.remove(&generation);
        }
    }

    fn rotate(&self, state: &mut State) -> Result<(), StoreError> {
        let Some(current) = state.current.as_ref() else {
            return Err(closed());
        };
        let generation = current.generation + 1;
        let next = Segment::create(&self.prefix, self.id, generation)?;
        if let Some(previous) = state.current.replace(next) {
            state.counts.entry(previous.generation).or_default().locked = Some(previous.file);
        }
        state.counts.entry(generation).or_default();
        state.rotate = false;
        // The previous segment may already be wholly committed.
        self.delete_committed_segments(state);
        Ok(())
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Segment {
    /// Creates (it must not exist) and locks segment `generation` of journal `journal`.
    fn create(prefix: &Path, journal: i64, generation: u64) -> Result<Segment, StoreError> {
        let path = segment_path(prefix, journal, generation);
        let failed = |err: std::io::Error| {
            StoreError::Unavailable(format!(
                "cannot create the audit journal \"{}\": {err}",
                path.display()
            ))
        };
        let file = OpenOptions::new()
            .create_new(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(failed)?;
        if !try_lock(&file).map_err(failed)? {
            return Err(failed(std::io::Error::other(
                "another process holds its lock",
            )));
        }
        Ok(Segment {
            generation,
            file,
            length: 0,
        })
    }
}

/// Takes an exclusive `flock` on `file` without waiting; `false` if another holds one.
fn try_lock(file: &File) -> std::io::Result<bool> {
    // SAFETY: `flock` on a descriptor this `File` owns; no memory is passed.
    let locked = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | libc::LOCK_NB) };
    if locked == 0 {
        return Ok(true);
    }
    let err = std::io::Error::last_os_error();
    if err.kind() == std::io::ErrorKind::WouldBlock {
        Ok(false)
    } else {
        Err(err)
    }
}

/// Replays every segment beside the database whose lock is free (its process is gone), but
/// `own` journal's, and deletes them; how many rows went into the table. A segment is read
/// and deleted under its lock, so two processes never replay one segment at once, and one
/// that another deleted meanwhile (no links left) is skipped.
async fn replay_dead(
    prefix: &Path,
    own: Option<i64>,
    writer: &WriteThread,
) -> Result<usize, StoreError> {
    let mut locked = Vec::new();
    let mut replayed: Vec<Replayed> = Vec::new();
    for (name, path) in list_segments(prefix)? {
        if matches!(name, SegmentName::Keyed { journal, .. } if Some(journal) == own) {
            continue;
        }
        let Some(file) = lock_dead_segment(&path)? else {
            continue;
        };
        replayed.extend(read_segment(&path, name, &file)?);
        locked.push((path, file));
    }
    if locked.is_empty() {
        return Ok(0);
    }
    let count = replayed.len();
    let inserted = writer
        .write(move |connection| {
            let mut inserted = 0;
            for (how, node, row) in &replayed {
                inserted += row.insert(connection, node, *how)?;
            }
            Ok(inserted)
        })
        .await?;
    tracing::info!(
        segments = locked.len(),
        rows = count,
        inserted,
        "audit journal of a process that stopped replayed"
    );
    // Unlinked before the locks go (with the files).
    for (path, _file) in &locked {
        remove(path);
    }
    Ok(inserted)
}

/// Opens and locks the segment at `path` if no process holds it and it still exists.
fn lock_dead_segment(path: &Path) -> Result<Option<File>, StoreError> {
    let failed = |err: std::io::Error| {
        StoreError::Unavailable(format!(
            "cannot open the audit journal \"{}\": {err}",
            path.display()
        ))
    };
    let file = match File::open(path) {
        Ok(file) => file,
        // Deleted by its process or another replayer since the directory was listed.
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(failed(err)),
    };
    if !try_lock(&file).map_err(failed)? {
        return Ok(None);
    }
    let links = file.metadata().map_err(failed)?.nlink();
    Ok((links > 0).then_some(file))
}

/// How a row goes into `calls`, each inserting nothing if the row is already there: under its
/// journal key (the cursor given by SQLite), or, from a segment of the format before journal
/// keys, under the cursor its record carries.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Insert {
    Keyed(i64),
    Unkeyed(i64),
}

fn insert_entries(connection: &Connection, entries: &[Entry]) -> Result<(), StoreError> {
    for entry in entries {
        entry
            .row
            .insert(connection, &entry.node, Insert::Keyed(entry.key))?;
    }
    Ok(())
}

fn segment_path(prefix: &Path, journal: i64, generation: u64) -> PathBuf {
    let mut path = prefix.as_os_str().to_owned();
    path.push(format!("{journal}.{generation}"));
    PathBuf::from(path)
}

/// The segments beside the database, oldest first (by journal, then generation).
fn list_segments(prefix: &Path) -> Result<Vec<(SegmentName, PathBuf)>, StoreError> {
    let directory = prefix
        .parent()
        .filter(|p| !p.as_os_str().is_empty())
        .unwrap_or(Path::new("."));
    let name = prefix
        .file_name()
        .and_then(|n| n.to_str())
        .unwrap_or_default();
    let entries = std::fs::read_dir(directory).map_err(|err| {
        StoreError::Unavailable(format!(
            "cannot list \"{}\" for the audit journal: {err}",
            directory.display()
        ))
    })?;
    let mut segments: Vec<(SegmentName, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let rest = file_name.to_str()?.strip_prefix(name)?;
            let name = match rest.split_once('.') {
                None => SegmentName::Unkeyed(rest.parse().ok()?),
                Some((journal, generation)) => SegmentName::Keyed {
                    journal: journal.parse().ok()?,
                    generation: generation.parse().ok()?,
                },
            };
            Some((name, entry.path()))
        })
        .collect();
    segments.sort();
    Ok(segments)
}

/// The rows of a segment (read from `file`, open on `path`) up to its first torn or corrupt
/// record.
fn read_segment(
    path: &Path,
    name: SegmentName,
    mut file: &File,
) -> Result<Vec<Replayed>, StoreError> {
    let mut bytes = Vec::new();
    file.read_to_end(&mut bytes).map_err(|err| {
        StoreError::Unavailable(format!(
            "cannot read the audit journal \"{}\": {err}",
            path.display()
        ))
    })?;
    let mut rows = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match unframe(rest) {
            Some((key, row, used)) => {
                let how = match name {
                    SegmentName::Keyed { .. } => Insert::Keyed(key),
                    SegmentName::Unkeyed(_) => Insert::Unkeyed(key),
                };
                rows.push((how, row.0, row.1));
                rest = &rest[used..];
            }
            None => {
                tracing::warn!(
                    journal = %path.display(),
                    bytes = rest.len(),
                    "the audit journal ends in a torn or corrupt record; it is skipped"
                );
                break;
            }
        }
    }
    Ok(rows)
}

fn frame(out: &mut Vec<u8>, key: i64, payload: &[u8]) {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&key.to_le_bytes());
    crc.update(payload);
    // Rows are far below 4 GiB (inputs are bounded by the request body limit).
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&key.to_le_bytes());
    out.extend_from_slice(payload);
}

/// The record at the start of `bytes` and its length, if whole and intact.
fn unframe(bytes: &[u8]) -> Option<(i64, (String, AuditRow), usize)> {
    let head = bytes.get(..FRAME_HEAD)?;
    let length = u32::from_le_bytes(head[0..4].try_into().ok()?) as usize;
    let crc = u32::from_le_bytes(head[4..8].try_into().ok()?);
    let cursor_bytes: [u8; 8] = head[8..16].try_into().ok()?;
    let payload = bytes.get(FRAME_HEAD..FRAME_HEAD.checked_add(length)?)?;
    let mut hasher = crc32fast::Hasher::new();
    hasher.update(&cursor_bytes);
    hasher.update(payload);
    if hasher.finalize() != crc {
        return None;
    }
    let row = serde_json::from_slice(payload).ok()?;
    Some((i64::from_le_bytes(cursor_bytes), row, FRAME_HEAD + length))
}

fn remove(path: &Path) {
    if let Err(err) = std::fs::remove_file(path)
        && err.kind() != std::io::ErrorKind::NotFound
    {
        tracing::warn!(journal = %path.display(), error = %err, "cannot delete an audit journal segment");
    }
}

fn closed() -> StoreError {
    StoreError::Unavailable("the store is closed".to_owned())
}

#[cfg(test)]
#[path = "journal_tests.rs"]
mod tests;
