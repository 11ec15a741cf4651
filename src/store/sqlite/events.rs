//! Events for replay on SQLite: appended in batches as the bus numbered them, read back by seq
//! with the session/tool/type filter (the query and the decoding are `store::rows`'), pruned
//! by age.
//!
//! `seq` is the primary key. A `toold mcp` process has the store number its events
//! (`append_events_numbered`: max + 1 inside the writer's transaction, which holds the
//! database's write lock), since several of them may write to one file (two editor windows)
//! and a seq one process numbered alone could be another's: the bus's subscribers get the
//! events with their stored seqs through the relay (`server/relay.rs`), woken by this
//! process's appends ([`EventStore::event_wakeups`]) and polling for other processes'. A
//! `toold serve` has its directory to itself (`server::Occupant`) and appends with
//! `append_events`, seqs as its bus numbered them, for a
//! store only one bus writes to; a seq stored twice is a conflict, not silently dropped.

use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::params;
use tokio::sync::watch;

use super::SqliteStore;
use super::convert::{from_i64, millis, sqlite_error, sqlite_write_error, to_i64};
use crate::event::Event;
use crate::store::reads;
use crate::store::{EventFilter, EventStore, PRUNE_CHUNK_EVENTS, StoreError, delete_in_chunks};

#[async_trait]
impl EventStore for SqliteStore {
    async fn append_events(&self, events: &[Arc<Event>]) -> Result<(), StoreError> {
        if events.is_empty() {
            return Ok(());
        }
        // Column values are rendered here, in the caller's task, not on the writer thread.
        let rows = event_rows(events, true)?;
        // Nobody waits on events to go on: held for the writer thread's next group (`writer`).
        self.writer
            .write_held(move |connection| {
                let mut insert = connection
                    .prepare_cached(
                        "INSERT INTO events (seq, ts, type, session_id, batch_id, call_id, tool, \
                         data, actor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .map_err(|err| sqlite_error("preparing the event insert", err))?;
                for row in &rows {
                    let event = &row.event;
                    insert
                        .execute(params![
                            row.seq,
                            row.ts,
                            row.event_type,
                            &*event.session_id,
                            event.batch_id.as_deref(),
                            event.call_id.as_deref(),
                            event.tool.as_deref(),
                            event.data.json(),
                            event.actor.as_deref(),
                        ])
                        .map_err(|err| {
                            let what = format!("event seq {}", row.seq);
                            sqlite_write_error(&format!("appending {what}"), &what, &what, err)
                        })?;
                }
                Ok(())
            })
            .await
    }

    /// Numbers `events` after the highest stored seq on the writer thread (the only writer, so
    /// numbering and inserting cannot interleave with another append).
    async fn append_events_numbered(
        &self,
        events: &[Arc<Event>],
    ) -> Result<Range<u64>, StoreError> {
        let rows = event_rows(events, false)?;
        let count = rows.len() as u64;
        let first = self
            .writer
            .write(move |connection| {
                let last: i64 = connection
                    .prepare_cached("SELECT coalesce(max(seq), 0) FROM events")
                    .and_then(|mut select| select.query_row([], |row| row.get(0)))
                    .map_err(|err| sqlite_error("reading the last event seq", err))?;
                let mut insert = connection
                    .prepare_cached(
                        "INSERT INTO events (seq, ts, type, session_id, batch_id, call_id, tool, \
                         data, actor) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .map_err(|err| sqlite_error("preparing the event insert", err))?;
                for (n, row) in (1..).zip(&rows) {
                    let event = &row.event;
                    insert
                        .execute(params![
                            last + n,
                            row.ts,
                            row.event_type,
                            &*event.session_id,
                            event.batch_id.as_deref(),
                            event.call_id.as_deref(),
                            event.tool.as_deref(),
                            event.data.json(),
                            event.actor.as_deref(),
                        ])
                        .map_err(|err| sqlite_error("appending numbered events", err))?;
                }
                from_i64::<u64>(last + 1, "event seq")
            })
            .await?;
        if count > 0 {
            self.events_stored.send_if_modified(|stored| {
                let last = first + count - 1;
                let newer = last > *stored;
                *stored = (*stored).max(last);
                newer
            });
        }
        Ok(first..first + count)
    }

    fn numbers_events(&self) -> bool {
        true
    }

    fn event_wakeups(&self) -> Option<watch::Receiver<u64>> {
        Some(self.events_stored.subscribe())
    }

    async fn read_events(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        reads::events(&self.readers, filter, after_seq, limit).await
    }

    async fn last_event_seq(&self) -> Result<u64, StoreError> {
        reads::last_event_seq(&self.readers).await
    }

    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError> {
        // The newest event stays whatever its age, so that seqs never go back (see
        // `reads::prune_bound`); the rest before the bound go a chunk per statement.
        let Some(bound) = reads::prune_bound(&self.readers, before).await? else {
            return Ok(0);
        };
        delete_in_chunks(|| {
            self.writer.write_one(move |connection| {
                connection
                    .prepare_cached(
                        "DELETE FROM events WHERE seq IN \
                         (SELECT seq FROM events WHERE seq < ?1 ORDER BY seq LIMIT ?2)",
                    )
                    .and_then(|mut delete| {
                        delete.execute(params![bound, PRUNE_CHUNK_EVENTS as i64])
                    })
                    .map(|deleted| deleted as u64)
                    .map_err(|err| sqlite_error(&format!("pruning events before seq {bound}"), err))
            })
        })
        .await
    }
}

/// The rows of `events`, with their seqs when `numbered` (else 0, numbered on the writer
/// thread), in a vector sized once (collecting `Result`s gives no size hint, so a large
/// gathering grew it step by step, copying it each time).
fn event_rows(events: &[Arc<Event>], numbered: bool) -> Result<Vec<EventRow>, StoreError> {
    let mut rows = Vec::with_capacity(events.len());
    for event in events {
        let seq = if numbered {
            to_i64(event.seq, "event seq")?
        } else {
            0
        };
        rows.push(EventRow {
            seq,
            ts: millis(event.ts),
            event_type: event.event_type.as_str(),
            event: event.clone(),
        });
    }
    Ok(rows)
}

/// An event's column values, ready to bind on the writer thread.
struct EventRow {
    seq: i64,
    ts: i64,
    event_type: &'static str,
    /// Its data is bound as drafted (`EventData`: rendered once, when published).
    event: Arc<Event>,
}
