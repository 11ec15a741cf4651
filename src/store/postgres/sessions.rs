//! Sessions and batches on Postgres, including idempotent batch claims.
//!
//! A claim is `INSERT … ON CONFLICT (session_id, idempotency_key) DO NOTHING`; if that inserted
//! nothing, the key's row decides between `Existing` (same request hash) and `Conflict`. The
//! unique index makes two concurrent claims with one key give exactly one `New`, whichever
//! daemons make them.

use serde_json::Value;
use sqlx::postgres::PgRow;

use super::PostgresStore;
use super::convert::{
    database_error, from_i64, from_json, get, get_optional_text, millis, optional_time, time,
    to_i64, to_json, write_error,
};
use crate::store::columns::{batch_status_text, parse_batch_status};
use crate::store::{BatchClaim, BatchRecord, SessionRecord, StoreError};
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

impl PostgresStore {
    pub(super) async fn insert_session_row(
        &self,
        session: &SessionRecord,
    ) -> Result<(), StoreError> {
        let what = format!("session \"{}\"", session.id);
        let directory = session.working_directory.to_str().ok_or_else(|| {
            StoreError::Invalid(format!(
                "working directory {:?} of {what} is not UTF-8",
                session.working_directory
            ))
        })?;
        sqlx::query(
            "INSERT INTO sessions (id, working_directory, permission_mode, interactive, owner, \
             created_at, closed_at, options, state) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9)",
        )
        .bind(&session.id)
        .bind(directory)
        .bind(session.permission_mode.as_str())
        .bind(session.interactive)
        .bind(&session.owner)
        .bind(millis(session.created_at))
        .bind(session.closed_at.map(millis))
        .bind(to_json(&session.options, &what)?)
        .bind(to_json(&session.state, &what)?)
        .execute(&self.pool)
        .await
        .map_err(|err| write_error(&format!("inserting {what}"), &what, &what, err))?;
        Ok(())
    }

    pub(super) async fn save_session_state_row(
        &self,
        session_id: &str,
        state: &Value,
    ) -> Result<(), StoreError> {
        let what = format!("session \"{session_id}\"");
        let changed = sqlx::query("UPDATE sessions SET state = $1 WHERE id = $2")
            .bind(to_json(state, &what)?)
            .bind(session_id)
            .execute(&self.pool)
            .await
            .map_err(|err| database_error(&format!("saving the state of {what}"), err))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound(what));
        }
        Ok(())
    }

    pub(super) async fn get_session_row(
        &self,
        session_id: &str,
    ) -> Result<Option<SessionRecord>, StoreError> {
        sqlx::query(concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions WHERE id = $1"
        ))
        .bind(session_id)
        .fetch_optional(&self.pool)
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
        sqlx::query(concat!(
            "SELECT ",
            session_columns!(),
            " FROM sessions WHERE $1 OR closed_at IS NULL ORDER BY ordinal"
        ))
        .bind(include_closed)
        .fetch_all(&self.pool)
        .await
        .map_err(|err| database_error("listing sessions", err))?
        .iter()
        .map(session_record)
        .collect()
    }

    pub(super) async fn close_session_row(&self, session_id: &str) -> Result<bool, StoreError> {
        sqlx::query("UPDATE sessions SET closed_at = $1 WHERE id = $2 AND closed_at IS NULL")
            .bind(millis(std::time::SystemTime::now()))
            .bind(session_id)
            .execute(&self.pool)
            .await
            .map(|done| done.rows_affected() == 1)
            .map_err(|err| database_error(&format!("closing session \"{session_id}\""), err))
    }

    pub(super) async fn claim_batch_row(
        &self,
        batch: &BatchRecord,
    ) -> Result<BatchClaim, StoreError> {
        let what = format!("batch \"{}\"", batch.batch_id);
        let session = format!("session \"{}\"", batch.session_id);
        let context = format!("claiming {what}");
        let results = batch
            .results
            .as_ref()
            .map(|results| to_json(results, &what))
            .transpose()?;
        let key = batch.idempotency_key.as_deref().map(str::as_bytes);
        let inserted = sqlx::query(
            "INSERT INTO batches (batch_id, session_id, format, idempotency_key, request_hash, \
             status, call_count, results, created_at, completed_at) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10) \
             ON CONFLICT (session_id, idempotency_key) DO NOTHING",
        )
        .bind(&batch.batch_id)
        .bind(&batch.session_id)
        .bind(&batch.format)
        .bind(key)
        .bind(&batch.request_hash)
        .bind(batch_status_text(batch.status))
        .bind(to_i64(batch.call_count, "call_count")?)
        .bind(results)
        .bind(millis(batch.created_at))
        .bind(batch.completed_at.map(millis))
        .execute(&self.pool)
        .await
        .map_err(|err| write_error(&context, &what, &session, err))?;
        if inserted.rows_affected() == 1 {
            return Ok(BatchClaim::New);
        }
        // Only the (session, key) constraint is ignored on conflict, so the key is set, and
        // the row that holds it is committed (a unique index waits for the other inserter).
        let taken = sqlx::query(
            "SELECT batch_id, request_hash FROM batches \
             WHERE session_id = $1 AND idempotency_key = $2",
        )
        .bind(&batch.session_id)
        .bind(key)
        .fetch_one(&self.pool)
        .await
        .map_err(|err| database_error(&context, err))?;
        let batch_id: String = get(&taken, "batch_id")?;
        let request_hash: String = get(&taken, "request_hash")?;
        if request_hash != batch.request_hash {
            return Ok(BatchClaim::Conflict { batch_id });
        }
        let existing = self
            .get_batch_row(&batch.session_id, &batch_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch \"{batch_id}\"")))?;
        Ok(BatchClaim::Existing(existing))
    }

    pub(super) async fn complete_batch_row(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError> {
        let what = format!("batch \"{batch_id}\"");
        let changed = sqlx::query(
            "UPDATE batches SET status = 'completed', results = $1, completed_at = $2 \
             WHERE batch_id = $3",
        )
        .bind(to_json(results, &what)?)
        .bind(millis(std::time::SystemTime::now()))
        .bind(batch_id)
        .execute(&self.pool)
        .await
        .map_err(|err| database_error(&format!("completing {what}"), err))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound(what));
        }
        Ok(())
    }

    pub(super) async fn get_batch_row(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        sqlx::query(concat!(
            "SELECT ",
            batch_columns!(),
            " FROM batches WHERE batch_id = $1 AND session_id = $2"
        ))
        .bind(batch_id)
        .bind(session_id)
        .fetch_optional(&self.pool)
        .await
        .map_err(|err| database_error(&format!("reading batch \"{batch_id}\""), err))?
        .as_ref()
        .map(batch_record)
        .transpose()
    }
}

pub(super) fn session_record(row: &PgRow) -> Result<SessionRecord, StoreError> {
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

fn batch_record(row: &PgRow) -> Result<BatchRecord, StoreError> {
    let batch_id: String = get(row, "batch_id")?;
    let what = |column: &str| format!("column {column} of batch \"{batch_id}\"");
    let status = parse_batch_status(&get::<String>(row, "status")?, &what("status"))?;
    let results = get::<Option<String>>(row, "results")?
        .map(|text| from_json(&text, &what("results")))
        .transpose()?;
    Ok(BatchRecord {
        session_id: get(row, "session_id")?,
        format: get(row, "format")?,
        idempotency_key: get_optional_text(row, "idempotency_key")?,
        request_hash: get(row, "request_hash")?,
        status,
        call_count: from_i64(get(row, "call_count")?, &what("call_count"))?,
        results,
        created_at: time(get(row, "created_at")?),
        completed_at: optional_time(get(row, "completed_at")?),
        batch_id,
    })
}
