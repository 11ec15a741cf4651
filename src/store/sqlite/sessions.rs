//! Sessions and batches on SQLite, including idempotent batch claims.
//!
//! A claim is one job on the writer thread: `INSERT … ON CONFLICT (session_id,
//! idempotency_key) DO NOTHING`, and if that inserted nothing, the key's existing row (read in
//! the same transaction, so no other claim can slip in between) decides between `Existing`
//! (same request hash) and `Conflict`. Two concurrent claims with one key give exactly one
//! `New`.

use rusqlite::{Connection, OptionalExtension, params};
use serde_json::Value;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::convert::{
    database_error, from_i64, from_json, get, millis, optional_time, sqlite_error,
    sqlite_write_error, time, to_i64, to_json,
};
use crate::store::columns::{batch_status_text, parse_batch_status};
use crate::store::{BatchClaim, BatchRecord, BehindWrites, SessionRecord, StoreError};
use crate::tool::ToolResult;

/// The columns `session_record` reads, for `concat!` into static SQL.
macro_rules! session_columns {
    () => {
        "id, working_directory, permission_mode, interactive, owner, created_at, closed_at, \
         options, state"
    };
}

/// The columns `batch_record` reads, for `concat!` into static SQL.
macro_rules! batch_columns {
    () => {
        "batch_id, session_id, format, idempotency_key, request_hash, status, call_count, \
         results, created_at, completed_at"
    };
}

/// What a claim found when the key was taken: the earlier batch's id and request hash.
struct TakenKey {
    batch_id: String,
    request_hash: String,
}

/// A batch record as column values, ready to bind (rendered in the caller's task).
struct BatchRow {
    what: String,
    batch_id: String,
    session_id: String,
    format: String,
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
            format: batch.format.clone(),
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

impl SqliteStore {
    /// What batches leave behind their answers, held for the writer thread's next group (see `writer`): one
    /// statement per item, so an item that fails leaves the others standing.
    pub(super) async fn write_behind_rows(&self, writes: &BehindWrites) -> Vec<StoreError> {
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

    pub(super) async fn insert_session_row(
        &self,
        session: &SessionRecord,
    ) -> Result<(), StoreError> {
        let id = session.id.clone();
        let directory = session
            .working_directory
            .to_str()
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "working directory {:?} of session \"{id}\" is not UTF-8",
                    session.working_directory
                ))
            })?
            .to_owned();
        let what = format!("session \"{id}\"");
        let (options, state) = (
            to_json(&session.options, &what)?,
            to_json(&session.state, &what)?,
        );
        let mode = session.permission_mode.as_str();
        let (interactive, owner) = (session.interactive, session.owner.clone());
        let (created_at, closed_at) = (millis(session.created_at), session.closed_at.map(millis));
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO sessions (id, working_directory, permission_mode, \
                         interactive, owner, created_at, closed_at, options, state) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![
                            id,
                            directory,
                            mode,
                            interactive,
                            owner,
                            created_at,
                            closed_at,
                            options,
                            state
                        ])
                    })
                    .map_err(|err| {
                        sqlite_write_error(&format!("inserting {what}"), &what, &what, err)
                    })?;
                Ok(())
            })
            .await
    }

    pub(super) async fn save_session_state_row(
        &self,
        session_id: &str,
        state: &Value,
    ) -> Result<(), StoreError> {
        let what = format!("session \"{session_id}\"");
        let state = to_json(state, &what)?;
        let session_id = session_id.to_owned();
        self.writer
            .write_one(move |connection| {
                if update_state(connection, &session_id, &state)? == 0 {
                    return Err(StoreError::NotFound(what));
                }
                Ok(())
            })
            .await
    }

    pub(super) async fn get_session_row(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions WHERE id = ?1"
        );
        sqlx::query(SQL)
            .bind(session_id)
            .fetch_optional(&self.readers)
            .await
            .map_err(|err| database_error(&format!("reading session \"{session_id}\""), err))?
            .as_ref()
            .map(session_record)
            .transpose()
    }

    pub(super) async fn list_session_rows(
        &self,
        include_closed: bool,
    ) -> Result<Vec<SessionRecord>, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions WHERE ?1 OR closed_at IS NULL ORDER BY ordinal"
        );
        sqlx::query(SQL)
            .bind(include_closed)
            .fetch_all(&self.readers)
            .await
            .map_err(|err| database_error("listing sessions", err))?
            .iter()
            .map(session_record)
            .collect()
    }

    pub(super) async fn close_session_row(&self, session_id: &str) -> Result<bool, StoreError> {
        let session_id = session_id.to_owned();
        let now = millis(std::time::SystemTime::now());
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "UPDATE sessions SET closed_at = ?1 WHERE id = ?2 AND closed_at IS NULL",
                    )
                    .and_then(|mut update| update.execute(params![now, session_id]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("closing session \"{session_id}\""), err))
            })
            .await
    }

    pub(super) async fn claim_batch_row(
        &self,
        batch: &BatchRecord,
    ) -> Result<BatchClaim, StoreError> {
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
                                Ok(TakenKey {
                                    batch_id: found.get(0)?,
                                    request_hash: found.get(1)?,
                                })
                            })
                            .optional()
                    })
                    .map_err(|err| sqlite_error(&context, err))
            })
            .await?;
        let Some(taken) = taken else {
            return Ok(BatchClaim::New);
        };
        if taken.request_hash != batch.request_hash {
            return Ok(BatchClaim::Conflict {
                batch_id: taken.batch_id,
            });
        }
        // Committed before the write answered, so the readers see it.
        let existing = self
            .get_batch_row(&batch.session_id, &taken.batch_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch \"{}\"", taken.batch_id)))?;
        Ok(BatchClaim::Existing(existing))
    }

    pub(super) async fn complete_batch_row(
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

    pub(super) async fn get_batch_row(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        const SQL: &str = concat!(
            "SELECT ",
            batch_columns!(),
            " FROM batches WHERE batch_id = ?1 AND session_id = ?2"
        );
        sqlx::query(SQL)
            .bind(batch_id)
            .bind(session_id)
            .fetch_optional(&self.readers)
            .await
            .map_err(|err| database_error(&format!("reading batch \"{batch_id}\""), err))?
            .as_ref()
            .map(batch_record)
            .transpose()
    }
}

/// Replaces a session's state; the rows changed (0 for an unknown session).
fn update_state(
    connection: &Connection,
    session_id: &str,
    state: &str,
) -> Result<usize, StoreError> {
    connection
        .prepare_cached("UPDATE sessions SET state = ?1 WHERE id = ?2")
        .and_then(|mut update| update.execute(params![state, session_id]))
        .map_err(|err| {
            sqlite_error(
                &format!("saving the state of session \"{session_id}\""),
                err,
            )
        })
}

fn session_record(row: &SqliteRow) -> Result<SessionRecord, StoreError> {
    let id: String = get(row, "id")?;
    let what = |column: &str| format!("column {column} of session \"{id}\"");
    let mode: String = get(row, "permission_mode")?;
    let permission_mode = mode
        .parse()
        .map_err(|err| StoreError::Corrupt(format!("{}: {err}", what("permission_mode"))))?;
    Ok(SessionRecord {
        working_directory: get::<String>(row, "working_directory")?.into(),
        permission_mode,
        interactive: get(row, "interactive")?,
        owner: get(row, "owner")?,
        created_at: time(get(row, "created_at")?),
        closed_at: optional_time(get(row, "closed_at")?),
        options: from_json(&get::<String>(row, "options")?, &what("options"))?,
        state: from_json(&get::<String>(row, "state")?, &what("state"))?,
        id,
    })
}

fn batch_record(row: &SqliteRow) -> Result<BatchRecord, StoreError> {
    let batch_id: String = get(row, "batch_id")?;
    let what = |column: &str| format!("column {column} of batch \"{batch_id}\"");
    let status = parse_batch_status(&get::<String>(row, "status")?, &what("status"))?;
    let results = get::<Option<String>>(row, "results")?
        .map(|text| from_json(&text, &what("results")))
        .transpose()?;
    Ok(BatchRecord {
        session_id: get(row, "session_id")?,
        format: get(row, "format")?,
        idempotency_key: get(row, "idempotency_key")?,
        request_hash: get(row, "request_hash")?,
        status,
        call_count: from_i64(get(row, "call_count")?, &what("call_count"))?,
        results,
        created_at: time(get(row, "created_at")?),
        completed_at: optional_time(get(row, "completed_at")?),
        batch_id,
    })
}
