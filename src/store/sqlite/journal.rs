//! The audit journal: an audit row is durable once it is appended, with one `write(2)`, to a
//! file beside the database; the `calls` table takes it behind the answer.
//!
//! Why: committing a row to SQLite on the request's way to its answer cost a transaction
//! (locks, WAL frames for the table and its index) per call, the largest single step of a
//! call. The journal gives the same durability as that commit did: SQLite's WAL with
//! `synchronous = NORMAL` is written with `write(2)` and not fsynced, so it survives the
//! process being killed but not the machine losing power, and so does an appended record.
//!
//! How:
//! - Each row gets its `cursor` (the `calls` key) when it is appended, in append order, so
//!   putting a row in the table is idempotent: replaying a journal after a crash inserts
//!   exactly the rows that are missing, whatever had been committed before.
//! - Appending schedules one *held* ingest on the writer thread (`writer`): it takes every row
//!   appended so far and inserts them in the writer's next group (with queued writes and
//!   events), or on its own within the writer's linger.
//! - The journal is a series of segment files `<database file>.audit.<generation>`. Appends
//!   go to the newest; past [`SEGMENT_BYTES`] a new one starts. A segment is deleted once every
//!   row in it is committed to the table and it is no longer appended to; a clean close
//!   deletes them all.
//! - Anything reading the audit log first *flushes* the journal: it commits every row appended
//!   before the read began. Marking interrupted calls, which inserts rows of its own, first
//!   inserts every appended row, then counts its rows and *reserves* that many cursors (the
//!   journal's lock held for that step only), so its rows take cursors no appended row holds
//!   while appends go on during its SQL.
//! - A record is framed as payload length (u32), CRC-32 of cursor and payload (u32), cursor
//!   (i64), payload (the node and the row as JSON). Opening the store replays every segment
//!   up to its first torn or corrupt record (a `kill -9` mid-`write` leaves at most one, and
//!   its call had not been answered), then deletes the segments.
//! - A failed ingest puts its rows back to be retried with the next one; they stay in the
//!   journal, which a restart replays, until they are committed. So does one that panics (a
//!   bug): its rows are in its `Taken` before it inserts anything, and the writer settles a
//!   held write whose job panicked as failed (`WriteThread::hold`), so they are retried, and
//!   their segment deleted once they are committed, rather than left until a restart.

use std::collections::BTreeMap;
use std::fs::{File, OpenOptions};
use std::io::Write;
use std::os::unix::fs::OpenOptionsExt;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex, MutexGuard};

use rusqlite::Connection;

use super::convert::sqlite_error;
use super::writer::WriteThread;
use crate::store::StoreError;
use crate::store::columns::AuditRow;

/// A segment past this many bytes is closed and a new one started (and the old one deleted
/// once its rows are committed), which bounds what a restart after a crash replays.
const SEGMENT_BYTES: u64 = 1 << 20;

/// Length, checksum, cursor.
const FRAME_HEAD: usize = 16;

/// Rows appended and not yet committed beyond which an append waits for them to be
/// committed ([`AuditJournal::needs_flush`]): memory stays bounded when the table cannot keep
/// up, and the calls appending slow down to its pace.
const BACKLOG_ROWS: usize = 16 * 1024;

/// The journal of one store.
pub(super) struct AuditJournal {
    /// Segment paths are `<prefix><generation>`.
    prefix: PathBuf,
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
    /// The cursor the next appended row takes.
    next_cursor: i64,
    /// Appended, not yet taken by an ingest; in cursor order.
    pending: Vec<Entry>,
    /// An ingest is held on the writer and has not yet taken `pending`.
    ingest_held: bool,
    /// Ingests that took rows and have not settled.
    in_flight: usize,
    /// Rows appended and not yet committed to the table (pending or taken).
    uncommitted: usize,
    /// Rows appended and committed, per live segment.
    counts: BTreeMap<u64, Counts>,
    /// The current segment took a failed write: start a new one before the next append.
    rotate: bool,
}

struct Segment {
    generation: u64,
    file: File,
    length: u64,
}

#[derive(Default)]
struct Counts {
    appended: u64,
    committed: u64,
}

/// A row appended and not yet known to be committed.
pub(super) struct Entry {
    generation: u64,
    cursor: i64,
    node: Arc<str>,
    row: AuditRow,
}

/// Rows an ingest took, kept until its commit's outcome is known.
pub(super) type Taken = Arc<Mutex<Vec<Entry>>>;

impl AuditJournal {
    /// Replays the journal of `database` (rows a previous run appended that are not in the
    /// table), deletes its segments and starts a new one.
    pub(super) async fn recover(
        database: &Path,
        node: Arc<str>,
        writer: &WriteThread,
    ) -> Result<AuditJournal, StoreError> {
        let mut prefix = database.as_os_str().to_owned();
        prefix.push(".audit.");
        let prefix = PathBuf::from(prefix);
        let segments = list_segments(&prefix)?;
        let mut replayed = Vec::new();
        for (_, path) in &segments {
            replayed.extend(read_segment(path)?);
        }
        let count = replayed.len();
        let last_cursor = writer
            .write(move |connection| {
                for (cursor, node, row) in &replayed {
                    row.insert(connection, node, *cursor, Insert::Replay)?;
                }
                highest_cursor(connection)
            })
            .await?;
        if count > 0 {
            tracing::info!(rows = count, "audit journal replayed");
        }
        for (_, path) in &segments {
            remove(path);
        }
        let generation = segments.last().map_or(1, |(last, _)| last + 1);
        let current = Segment::create(&prefix, generation)?;
        Ok(AuditJournal {
            prefix,
            node,
            state: Mutex::new(State {
                current: Some(current),
                next_cursor: last_cursor + 1,
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
        // Rendered before the lock; cursors and checksums are added under it.
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
        let first_cursor = state.next_cursor;
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
            frame(&mut frames, first_cursor + offset as i64, payload);
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
        state.next_cursor += rows.len() as i64;
        state.uncommitted += rows.len();
        state.counts.entry(generation).or_default().appended += rows.len() as u64;
        for (offset, row) in rows.into_iter().enumerate() {
            state.pending.push(Entry {
                generation,
                cursor: first_cursor + offset as i64,
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

    /// Runs `work`, which inserts `calls` rows of its own, on the write connection: every
    /// appended row is inserted first (taken into `taken`), then `count` says how many rows
    /// `work` will insert, that many cursors are reserved, and `work` is given the first to
    /// number its rows from. The journal's lock is held only to take the rows and to reserve,
    /// never during SQL, so appends go on meanwhile (with cursors past the reserved ones).
    /// The caller settles `taken` with the commit's outcome ([`AuditJournal::settle`]); a
    /// reservation `work` does not fill leaves a gap, which cursors allow.
    pub(super) fn exclusive<T>(
        &self,
        connection: &Connection,
        taken: &Taken,
        count: impl FnOnce(&Connection) -> Result<u64, StoreError>,
        work: impl FnOnce(&Connection, i64) -> Result<T, StoreError>,
    ) -> Result<T, StoreError> {
        self.take_and_insert(connection, taken)?;
        let rows = i64::try_from(count(connection)?).unwrap_or(i64::MAX);
        let first = {
            let mut state = self.lock();
            let first = state.next_cursor;
            state.next_cursor = first.saturating_add(rows);
            first
        };
        work(connection, first)
    }

    /// Commits what is pending, stops appends and deletes the journal (everything in it is
    /// then in the table). A row that could not be committed keeps its segment for the next
    /// start to replay.
    pub(super) async fn close(self: &Arc<Self>, writer: &WriteThread) {
        if let Err(err) = self.flush(writer).await {
            tracing::error!(error = %err, "the audit journal could not be committed at close; the next start replays it");
        }
        let mut state = self.lock();
        state.current = None;
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
                // Before anything appended since: cursor order.
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

    /// Deletes every segment that is no longer appended to and whose rows are all committed.
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
            state.counts.remove(&generation);
            remove(&self.segment_path(generation));
        }
    }

    fn rotate(&self, state: &mut State) -> Result<(), StoreError> {
        let Some(current) = state.current.as_ref() else {
            return Err(closed());
        };
        let generation = current.generation + 1;
        let next = Segment::create(&self.prefix, generation)?;
        state.current = Some(next);
        state.counts.entry(generation).or_default();
        state.rotate = false;
        // The previous segment may already be wholly committed.
        self.delete_committed_segments(state);
        Ok(())
    }

    fn segment_path(&self, generation: u64) -> PathBuf {
        segment_path(&self.prefix, generation)
    }

    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Segment {
    fn create(prefix: &Path, generation: u64) -> Result<Segment, StoreError> {
        let path = segment_path(prefix, generation);
        let file = OpenOptions::new()
            .create(true)
            .append(true)
            .mode(0o600)
            .open(&path)
            .map_err(|err| {
                StoreError::Unavailable(format!(
                    "cannot create the audit journal \"{}\": {err}",
                    path.display()
                ))
            })?;
        let length = file.metadata().map(|m| m.len()).unwrap_or(0);
        Ok(Segment {
            generation,
            file,
            length,
        })
    }
}

/// How a row goes into `calls`: an ingest inserts (a taken cursor is a bug, reported); a
/// replay inserts what is missing.
#[derive(Clone, Copy)]
pub(super) enum Insert {
    Ingest,
    Replay,
}

fn insert_entries(connection: &Connection, entries: &[Entry]) -> Result<(), StoreError> {
    for entry in entries {
        entry
            .row
            .insert(connection, &entry.node, entry.cursor, Insert::Ingest)?;
    }
    Ok(())
}

fn highest_cursor(connection: &Connection) -> Result<i64, StoreError> {
    connection
        .query_row("SELECT coalesce(max(cursor), 0) FROM calls", [], |row| {
            row.get(0)
        })
        .map_err(|err| sqlite_error("reading the last audit cursor", err))
}

fn segment_path(prefix: &Path, generation: u64) -> PathBuf {
    let mut path = prefix.as_os_str().to_owned();
    path.push(generation.to_string());
    PathBuf::from(path)
}

/// The segments beside the database, oldest first.
fn list_segments(prefix: &Path) -> Result<Vec<(u64, PathBuf)>, StoreError> {
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
    let mut segments: Vec<(u64, PathBuf)> = entries
        .filter_map(Result::ok)
        .filter_map(|entry| {
            let file_name = entry.file_name();
            let generation = file_name.to_str()?.strip_prefix(name)?.parse().ok()?;
            Some((generation, entry.path()))
        })
        .collect();
    segments.sort();
    Ok(segments)
}

/// The rows of a segment up to its first torn or corrupt record.
fn read_segment(path: &Path) -> Result<Vec<(i64, String, AuditRow)>, StoreError> {
    let bytes = std::fs::read(path).map_err(|err| {
        StoreError::Unavailable(format!(
            "cannot read the audit journal \"{}\": {err}",
            path.display()
        ))
    })?;
    let mut rows = Vec::new();
    let mut rest = &bytes[..];
    while !rest.is_empty() {
        match unframe(rest) {
            Some((cursor, row, used)) => {
                rows.push((cursor, row.0, row.1));
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

fn frame(out: &mut Vec<u8>, cursor: i64, payload: &[u8]) {
    let mut crc = crc32fast::Hasher::new();
    crc.update(&cursor.to_le_bytes());
    crc.update(payload);
    // Rows are far below 4 GiB (inputs are bounded by the request body limit).
    out.extend_from_slice(&(payload.len() as u32).to_le_bytes());
    out.extend_from_slice(&crc.finalize().to_le_bytes());
    out.extend_from_slice(&cursor.to_le_bytes());
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
