//! Batches on Postgres: [`BatchStore`], including idempotent claims.
//!
//! A claim is `INSERT … ON CONFLICT (session_id, idempotency_key) DO NOTHING`; if that inserted
//! nothing, the key's row (decoded by `store::rows`) decides between `Existing` (same request
//! hash) and `Conflict`. The unique index makes two concurrent claims with one key give
//! exactly one `New`, whichever daemons make them. What batches leave behind their answers
//! is written one statement per item (the trait's default).

use async_trait::async_trait;

use super::PostgresStore;
use super::convert::{database_error, millis, to_i64, to_json, write_error};
use crate::store::columns::batch_status_text;
use crate::store::reads;
use crate::store::rows::taken_key;
use crate::store::{BatchClaim, BatchRecord, BatchStore, StoreError};
use crate::tool::ToolResult;

#[async_trait]
impl BatchStore for PostgresStore {
    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError> {
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
        .bind(batch.format.as_str())
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
        taken_key(&taken)?.claim(self, batch).await
    }

    async fn complete_batch(
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

    async fn release_batch(&self, batch_id: &str) -> Result<(), StoreError> {
        sqlx::query("DELETE FROM batches WHERE batch_id = $1 AND status = 'running'")
            .bind(batch_id)
            .execute(&self.pool)
            .await
            .map_err(|err| database_error(&format!("releasing batch \"{batch_id}\""), err))?;
        Ok(())
    }

    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        reads::batch(&self.pool, session_id, batch_id).await
    }
}
