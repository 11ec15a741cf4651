//! Batches on SQLite: [`BatchStore`], including idempotent claims and the writes batches
//! leave behind their answers.
//!
//! A claim is one job on the writer thread: `INSERT … ON CONFLICT (session_id,
//! idempotency_key) DO NOTHING`, and if that inserted nothing, the key's existing row (read in
//! the same transaction, so no other claim can slip in between, and decoded by `store::rows`
//! like every row) decides between `Existing` (same request hash) and `Conflict`. Two
//! concurrent claims with one key give exactly one `New`.

use async_trait::async_trait;
use rusqlite::{Connection, OptionalExtension, params};

use super::SqliteStore;
use super::convert::{WriterRow, millis, sqlite_error, sqlite_write_error, to_i64, to_json};
use super::sessions::update_state;
use crate::store::columns::batch_status_text;
use crate::store::reads;
use crate::store::rows::taken_key;
use crate::store::{BatchClaim, BatchRecord, BatchStore, BehindWrites, StoreError};
use crate::tool::ToolResult;

/// A batch record as column values, ready to bind (rendered in the caller's task).
struct BatchRow {
    what: String,
    batch_id: String,
    session_id: String,
    format: &'static str,
    idempotency_key: Option<String>,
    request_hash: String,
    status: &'static str,
    call_count: i64,
    results: Option<String>,
    created_at: i64,
    completed_at: Option<i64>,
}

impl BatchRow {
    fn new(batch: &BatchRecord) -> Result<BatchRow, StoreError> {
        let what = format!("batch \"{}\"", batch.batch_id);
        Ok(BatchRow {
            results: batch
                .results
                .as_ref()
                .map(|results| to_json(results, &what))
                .transpose()?,
            call_count: to_i64(batch.call_count, "call_count")?,
            what,
            batch_id: batch.batch_id.clone(),
            session_id: batch.session_id.clone(),
            format: batch.format.as_str(),
            idempotency_key: batch.idempotency_key.clone(),
            request_hash: batch.request_hash.clone(),
            status: batch_status_text(batch.status),
            created_at: millis(batch.created_at),
            completed_at: batch.completed_at.map(millis),
        })
    }

    /// Inserts the row unless its (session, idempotency key) is taken; the rows inserted.
    fn insert(&self, connection: &Connection, context: &str) -> Result<usize, StoreError> {
        connection
            .prepare_cached(
                "INSERT INTO batches (batch_id, session_id, format, idempotency_key, \
                 request_hash, status, call_count, results, created_at, completed_at) \
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10) \
                 ON CONFLICT (session_id, idempotency_key) DO NOTHING",
            )
            .and_then(|mut insert| {
                insert.execute(params![
                    self.batch_id,
                    self.session_id,
                    self.format,
                    self.idempotency_key,
                    self.request_hash,
                    self.status,
                    self.call_count,
                    self.results,
                    self.created_at,
                    self.completed_at
                ])
            })
            .map_err(|err| {
                let session = format!("session \"{}\"", self.session_id);
                sqlite_write_error(context, &self.what, &session, err)
            })
    }
}

#[async_trait]
impl BatchStore for SqliteStore {
    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError> {
        let row = BatchRow::new(batch)?;
        let context = format!("claiming {}", row.what);
        let taken = self
            .writer
            .write_one(move |connection| {
                let inserted = row.insert(connection, &context)?;
                if inserted == 1 {
                    return Ok(None);
                }
                // Only the (session, key) constraint is ignored on conflict, so the key is set.
                connection
                    .prepare_cached(
                        "SELECT batch_id, request_hash FROM batches \
                         WHERE session_id = ?1 AND idempotency_key = ?2",
                    )
                    .and_then(|mut select| {
                        select
                            .query_row(params![row.session_id, row.idempotency_key], |found| {
                                Ok(taken_key(&WriterRow(found)))
                            })
                            .optional()
                    })
                    .map_err(|err| sqlite_error(&context, err))?
                    .transpose()
            })
            .await?;
        match taken {
            None => Ok(BatchClaim::New),
            Some(taken) => taken.claim(self, batch).await,
        }
    }

    /// Held for the writer thread's next group (see `writer`): one statement per item, so an
    /// item that fails leaves the others standing.
    async fn write_behind(&self, writes: &BehindWrites) -> Vec<StoreError> {
        let mut failures = Vec::new();
        let batches: Vec<BatchRow> = writes
            .batches
            .iter()
            .filter_map(|batch| BatchRow::new(batch).map_err(|err| failures.push(err)).ok())
            .collect();
        let states: Vec<(String, String)> = writes
            .states
            .iter()
            .filter_map(|(id, state)| {
                to_json(state, format_args!("session \"{id}\""))
                    .map(|state| (id.clone(), state))
                    .map_err(|err| failures.push(err))
                    .ok()
            })
            .collect();
        let written = self
            .writer
            .write_held(move |connection| {
                let mut failures = Vec::new();
                for row in &batches {
                    if let Err(err) = row.insert(connection, &format!("recording {}", row.what)) {
                        failures.push(err);
                    }
                }
                for (id, state) in &states {
                    // A session deleted meanwhile has nothing left to save (no row changes).
                    if let Err(err) = update_state(connection, id, state) {
                        failures.push(err);
                    }
                }
                Ok(failures)
            })
            .await;
        match written {
            Ok(more) => failures.extend(more),
            Err(err) => failures.push(err),
        }
        failures
    }

    async fn complete_batch(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError> {
        let what = format!("batch \"{batch_id}\"");
        let results = to_json(results, &what)?;
        let batch_id = batch_id.to_owned();
        let now = millis(std::time::SystemTime::now());
        self.writer
            .write_one(move |connection| {
                let changed = connection
                    .prepare_cached(
                        "UPDATE batches SET status = 'completed', results = ?1, completed_at = ?2 \
                         WHERE batch_id = ?3",
                    )
                    .and_then(|mut update| update.execute(params![results, now, batch_id]))
                    .map_err(|err| sqlite_error(&format!("completing {what}"), err))?;
                if changed == 0 {
                    return Err(StoreError::NotFound(what));
                }
                Ok(())
            })
            .await
    }

    async fn release_batch(&self, batch_id: &str) -> Result<(), StoreError> {
        let context = format!("releasing batch \"{batch_id}\"");
        let batch_id = batch_id.to_owned();
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "DELETE FROM batches WHERE batch_id = ?1 AND status = 'running'",
                    )
                    .and_then(|mut delete| delete.execute(params![batch_id]))
                    .map_err(|err| sqlite_error(&context, err))?;
                Ok(())
            })
            .await
    }

    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        reads::batch(&self.readers, session_id, batch_id).await
    }
}
