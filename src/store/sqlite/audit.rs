//! The audit log on SQLite: [`AuditSink`] through the audit journal, and reading rows back by
//! cursor.
//!
//! `record` converts its row to column values in the caller's task (so rendering the JSON
//! columns runs in parallel) and appends it to the journal (`journal`), which makes it durable
//! with one write before the call's result goes anywhere; the journal's ingest inserts it on
//! the writer thread behind the answer, rows of concurrent calls in one commit. Reading rows
//! back flushes the journal first, so every answered call is listed.

use async_trait::async_trait;
use rusqlite::params;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::convert::{database_error, from_i64, from_json, get, sqlite_error, time};
use super::journal::Insert;
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::store::columns::{AuditRow, offloaded, parse_error_kind};
use crate::store::{CallPage, CallRow, StoreError};
use crate::tool::ErrorKind;

const INSERT_CALL: &str = "INSERT INTO calls (cursor, node, session_id, batch_id, call_id, \
     call_index, requested_name, tool, input, decision, is_error, error_kind, output_chars, \
     result_id, result_total_chars, started_at, duration_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

/// A replayed row whose cursor is already in the table was committed before the crash.
const REPLAY_CALL: &str = "INSERT OR IGNORE INTO calls (cursor, node, session_id, batch_id, \
     call_id, call_index, requested_name, tool, input, decision, is_error, error_kind, \
     output_chars, result_id, result_total_chars, started_at, duration_ms) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17)";

const SELECT_CALLS: &str = "SELECT cursor, node, session_id, batch_id, call_id, call_index, \
     requested_name, tool, input, decision, is_error, error_kind, output_chars, result_id, \
     result_total_chars, started_at, duration_ms, interrupted FROM calls \
     WHERE session_id = ?1 AND cursor > ?2 ORDER BY cursor LIMIT ?3";

impl AuditRow {
    /// Inserts the row under the cursor the journal gave it, on the writer thread. Cursors are
    /// the table's only constraint, so a failure means a failed database (or, for
    /// [`Insert::Ingest`], a cursor given twice: a bug).
    pub(super) fn insert(
        &self,
        connection: &rusqlite::Connection,
        node: &str,
        cursor: i64,
        how: Insert,
    ) -> Result<(), StoreError> {
        let sql = match how {
            Insert::Ingest => INSERT_CALL,
            Insert::Replay => REPLAY_CALL,
        };
        connection
            .prepare_cached(sql)
            .and_then(|mut insert| {
                insert.execute(params![
                    cursor,
                    node,
                    self.session_id,
                    self.batch_id,
                    self.call_id,
                    self.call_index,
                    self.requested_name,
                    self.tool,
                    self.input,
                    self.decision,
                    self.is_error,
                    self.error_kind.map(ErrorKind::as_str),
                    self.output_chars,
                    self.result_id,
                    self.result_total_chars,
                    self.started_at,
                    self.duration_ms,
                ])
            })
            .map_err(|err| {
                sqlite_error(
                    &format!("writing the audit row of call \"{}\"", self.call_id),
                    err,
                )
            })?;
        Ok(())
    }
}

#[async_trait]
impl AuditSink for SqliteStore {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError> {
        let row = AuditRow::new(record).map_err(|err| SinkError(err.to_string()))?;
        self.append_rows(vec![row]).await
    }

    /// One append for the lot.
    async fn record_many(&self, records: Vec<AuditRecord>) -> Result<(), SinkError> {
        let rows = AuditRow::for_sink(records)?;
        self.append_rows(rows).await
    }
}

impl SqliteStore {
    /// Appends to the journal; past its backlog, waits until the table has caught up.
    async fn append_rows(&self, rows: Vec<AuditRow>) -> Result<(), SinkError> {
        let sink_error = |err: StoreError| SinkError(err.to_string());
        self.journal
            .append(&self.writer, rows)
            .map_err(sink_error)?;
        if self.journal.needs_flush() {
            self.journal.flush(&self.writer).await.map_err(sink_error)?;
        }
        Ok(())
    }
}

impl SqliteStore {
    pub(super) async fn list_call_rows(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        // Every row appended before this read is in the table after this.
        self.journal.flush(&self.writer).await?;
        let after = after.unwrap_or(0);
        // One more than asked tells whether another page follows.
        let fetched = sqlx::query(SELECT_CALLS)
            .bind(session_id)
            .bind(after)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.readers)
            .await
            .map_err(|err| {
                database_error(
                    &format!("listing the calls of session \"{session_id}\""),
                    err,
                )
            })?;
        let more = fetched.len() > limit as usize;
        let rows = fetched
            .iter()
            .take(limit as usize)
            .map(call_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next_cursor = more.then(|| rows.last().map_or(after, |row| row.cursor));
        Ok(CallPage { rows, next_cursor })
    }
}

fn call_row(row: &SqliteRow) -> Result<CallRow, StoreError> {
    let cursor: i64 = get(row, "cursor")?;
    let what = |column: &str| format!("column {column} of call row {cursor}");
    let error_kind = parse_error_kind(get(row, "error_kind")?, &what("error_kind"))?;
    let offloaded = offloaded(
        get(row, "result_id")?,
        get(row, "result_total_chars")?,
        &what("result_total_chars"),
    )?;
    let record = AuditRecord {
        session_id: get(row, "session_id")?,
        batch_id: get(row, "batch_id")?,
        call_id: get(row, "call_id")?,
        index: from_i64(get(row, "call_index")?, &what("call_index"))?,
        requested_name: get(row, "requested_name")?,
        tool: get(row, "tool")?,
        input: from_json(&get::<String>(row, "input")?, &what("input"))?,
        decision: get::<Option<String>>(row, "decision")?
            .map(|text| from_json(&text, &what("decision")))
            .transpose()?,
        is_error: get(row, "is_error")?,
        error_kind,
        output_chars: from_i64(get(row, "output_chars")?, &what("output_chars"))?,
        offloaded,
        started_at: time(get(row, "started_at")?),
        duration_ms: get(row, "duration_ms")?,
    };
    Ok(CallRow {
        cursor,
        node: get(row, "node")?,
        interrupted: get(row, "interrupted")?,
        record,
    })
}
