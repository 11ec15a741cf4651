//! The audit log on SQLite: [`AuditSink`] through the audit journal, and reading rows back by
//! cursor.
//!
//! `record` converts its row to column values in the caller's task (so rendering the JSON
//! columns runs in parallel) and appends it to the journal (`journal`), which makes it durable
//! with one write before the call's result goes anywhere; the journal's ingest inserts it on
//! the writer thread behind the answer, rows of concurrent calls in one commit. Reading rows
//! back flushes the journal first, so every answered call is listed; rows are decoded by
//! `store::rows`.

use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use super::convert::sqlite_error;
use super::journal::Insert;
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::store::columns::AuditRow;
use crate::store::columns::millis;
use crate::store::reads;
use crate::store::{
    AuditStore, CallPage, CallQuery, CallRow, PRUNE_CHUNK_CALLS, StoreError, call_query,
    prune_calls_in_chunks,
};
use crate::tool::ErrorKind;

/// A journalled row: SQLite gives its cursor; a key already in the table (a retried ingest
/// whose commit had in fact happened, a replay of rows committed before a crash) inserts
/// nothing.
const INSERT_KEYED: &str = "INSERT OR IGNORE INTO calls (journal_key, node, session_id, \
     batch_id, call_id, call_index, requested_name, tool, input, decision, is_error, \
     error_kind, output_chars, result_id, result_total_chars, started_at, duration_ms, \
     cancelled_by, trace_id, principal, isolation) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
     ?21)";

/// A row from a segment of the format before journal keys, under the cursor it was given:
/// a cursor already in the table was committed before the crash.
const INSERT_UNKEYED: &str = "INSERT OR IGNORE INTO calls (cursor, node, session_id, batch_id, \
     call_id, call_index, requested_name, tool, input, decision, is_error, error_kind, \
     output_chars, result_id, result_total_chars, started_at, duration_ms, cancelled_by, \
     trace_id, principal, isolation) \
     VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11, ?12, ?13, ?14, ?15, ?16, ?17, ?18, ?19, ?20, \
     ?21)";

impl AuditRow {
    /// Inserts the row, on the writer thread, unless it is there already; how many rows were
    /// inserted (0 or 1). A failure means a failed database.
    pub(super) fn insert(
        &self,
        connection: &rusqlite::Connection,
        node: &str,
        how: Insert,
    ) -> Result<usize, StoreError> {
        let (sql, first) = match how {
            Insert::Keyed(key) => (INSERT_KEYED, key),
            Insert::Unkeyed(cursor) => (INSERT_UNKEYED, cursor),
        };
        connection
            .prepare_cached(sql)
            .and_then(|mut insert| {
                insert.execute(params![
                    first,
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
                    self.cancelled_by,
                    self.trace_id,
                    self.principal,
                    self.isolation,
                ])
            })
            .map_err(|err| {
                sqlite_error(
                    &format!("writing the audit row of call \"{}\"", self.call_id),
                    err,
                )
            })
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

#[async_trait]
impl AuditStore for SqliteStore {
    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        // Every row appended before this read is in the table after this.
        self.journal.flush(&self.writer).await?;
        reads::calls(&self.readers, session_id, after, limit).await
    }

    async fn batch_calls(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Vec<CallRow>, StoreError> {
        self.journal.flush(&self.writer).await?;
        reads::batch_calls(&self.readers, session_id, batch_id).await
    }

    async fn query_calls(&self, query: &CallQuery) -> Result<CallPage, StoreError> {
        self.journal.flush(&self.writer).await?;
        call_query::filtered_calls(&self.readers, query).await
    }

    async fn prune_calls(&self, before: SystemTime) -> Result<u64, StoreError> {
        // Rows still in the journal are pruned too.
        self.journal.flush(&self.writer).await?;
        let before = millis(before);
        prune_calls_in_chunks(|| {
            self.writer
                .write_one(move |connection| prune_chunk(connection, before))
        })
        .await
    }
}

/// One chunk of old rows deleted with their offloaded results (whose chunks go by cascade),
/// in the writer's transaction; how many rows went.
fn prune_chunk(connection: &rusqlite::Connection, before: i64) -> Result<u64, StoreError> {
    let failed = |err| sqlite_error(&format!("pruning calls started before {before} ms"), err);
    let mut select = connection
        .prepare_cached(
            "SELECT cursor, result_id FROM calls WHERE started_at < ?1 ORDER BY started_at LIMIT ?2",
        )
        .map_err(failed)?;
    let gone = select
        .query_map(params![before, PRUNE_CHUNK_CALLS as i64], |row| {
            Ok((row.get::<_, i64>(0)?, row.get::<_, Option<String>>(1)?))
        })
        .and_then(Iterator::collect::<Result<Vec<_>, _>>)
        .map_err(failed)?;
    let mut delete_row = connection
        .prepare_cached("DELETE FROM calls WHERE cursor = ?1")
        .map_err(failed)?;
    let mut delete_result = connection
        .prepare_cached("DELETE FROM results WHERE id = ?1")
        .map_err(failed)?;
    for (cursor, result_id) in &gone {
        delete_row.execute(params![cursor]).map_err(failed)?;
        if let Some(result_id) = result_id {
            delete_result.execute(params![result_id]).map_err(failed)?;
        }
    }
    Ok(gone.len() as u64)
}
