//! Events for replay on SQLite: appended in batches as the bus numbered them, read back by seq
//! with the session/tool/type filter, pruned by age.
//!
//! `seq` is the primary key and comes from the event bus, which continues after
//! `last_event_seq` on start; a seq stored twice is a conflict, not silently dropped.

use std::ops::Range;
use std::sync::Arc;
use std::time::SystemTime;

use rusqlite::params;
use sqlx::sqlite::SqliteRow;
use sqlx::{QueryBuilder, Sqlite};

use super::SqliteStore;
use super::convert::{
    database_error, from_i64, from_json, get, millis, sqlite_error, sqlite_write_error, time,
    to_i64,
};
use crate::event::{Event, EventType};
use crate::store::{EventFilter, PRUNE_CHUNK_EVENTS, StoreError, delete_in_chunks};

impl SqliteStore {
    pub(super) async fn append_event_rows(&self, events: &[Arc<Event>]) -> Result<(), StoreError> {
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
                         data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
    pub(super) async fn append_numbered_event_rows(
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
                         data) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
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
                        ])
                        .map_err(|err| sqlite_error("appending numbered events", err))?;
                }
                from_i64::<u64>(last + 1, "event seq")
            })
            .await?;
        Ok(first..first + count)
    }

    pub(super) async fn read_event_rows(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        // A seq beyond SQLite's integers cannot be stored, so nothing comes after it.
        let Ok(after_seq) = i64::try_from(after_seq) else {
            return Ok(Vec::new());
        };
        // Only the filters given become conditions, so the planner can use the session index.
        let mut query = QueryBuilder::<Sqlite>::new(
            "SELECT seq, ts, type, session_id, batch_id, call_id, tool, data FROM events \
             WHERE seq > ",
        );
        query.push_bind(after_seq);
        if let Some(session_id) = &filter.session_id {
            query
                .push(" AND session_id = ")
                .push_bind(session_id.as_str());
        }
        if let Some(tool) = &filter.tool {
            query.push(" AND tool = ").push_bind(tool.as_str());
        }
        if let Some(event_type) = filter.event_type {
            query.push(" AND type = ").push_bind(event_type.as_str());
        }
        query
            .push(" ORDER BY seq LIMIT ")
            .push_bind(i64::from(limit));
        query
            .build()
            .fetch_all(&self.readers)
            .await
            .map_err(|err| database_error(&format!("reading events after seq {after_seq}"), err))?
            .iter()
            .map(event)
            .collect()
    }

    pub(super) async fn last_event_seq_row(&self) -> Result<u64, StoreError> {
        let last: Option<i64> = sqlx::query_scalar("SELECT MAX(seq) FROM events")
            .fetch_one(&self.readers)
            .await
            .map_err(|err| database_error("reading the last event seq", err))?;
        from_i64(last.unwrap_or(0), "event seq")
    }

    pub(super) async fn prune_event_rows(&self, before: SystemTime) -> Result<u64, StoreError> {
        let before = millis(before);
        let failed = |err| database_error(&format!("pruning events before {before} ms"), err);
        // Seqs are given in time order, so the events older than `before` are those before the
        // first that is not: found once by walking the primary key from the start, which
        // visits only the rows about to go (no index on `ts` to keep up on every insert). The
        // newest event stays whatever its age, so that seqs never go back
        // (`Store::prune_events`).
        let bound: Option<i64> = sqlx::query_scalar(
            "SELECT coalesce(\
             (SELECT seq FROM events WHERE ts >= ?1 ORDER BY seq LIMIT 1), \
             (SELECT max(seq) FROM events))",
        )
        .bind(before)
        .fetch_one(&self.readers)
        .await
        .map_err(failed)?;
        let Some(bound) = bound else {
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

fn event(row: &SqliteRow) -> Result<Event, StoreError> {
    let seq: i64 = get(row, "seq")?;
    let what = |column: &str| format!("column {column} of event seq {seq}");
    let type_text: String = get(row, "type")?;
    let event_type = EventType::parse(&type_text).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "{}: unknown event type \"{type_text}\"",
            what("type")
        ))
    })?;
    let optional = |column: &str| -> Result<Option<Arc<str>>, StoreError> {
        Ok(get::<Option<String>>(row, column)?.map(Arc::from))
    };
    Ok(Event {
        seq: from_i64(seq, "event seq")?,
        ts: time(get(row, "ts")?),
        event_type,
        session_id: Arc::from(get::<String>(row, "session_id")?),
        batch_id: optional("batch_id")?,
        call_id: optional("call_id")?,
        tool: optional("tool")?,
        data: from_json(&get::<String>(row, "data")?, &what("data"))?,
    })
}
