//! Offloaded outputs on Postgres: the statements of [`ResultChunks`], chunks as BYTEA holding
//! UTF-8 (TEXT cannot hold U+0000); the flow (streaming, chunking, paging) and
//! [`ResultStore`](crate::dispatch::ResultStore) are the store's, in `store/results.rs`.

use std::time::SystemTime;

use sqlx::postgres::PgPool;

use super::PostgresStore;
use super::convert::{database_error, millis, to_i64};
use crate::dispatch::ports::TextChunk;
use crate::store::StoreError;
use crate::store::results::{CHUNK_CHARS, ResultChunks, ResultWrite};

impl ResultChunks for PostgresStore {
    type Reads = PgPool;

    fn reads(&self) -> &PgPool {
        &self.pool
    }

    /// One transaction.
    async fn write_chunks(
        &self,
        write: &ResultWrite<'_>,
        chunks: Vec<TextChunk>,
        last: bool,
    ) -> Result<u64, StoreError> {
        let context = write.context();
        let fail = |err| database_error(&context, err);
        let mut transaction = self.pool.begin().await.map_err(fail)?;
        if !write.row_written {
            sqlx::query(
                "INSERT INTO results (id, session_id, call_id, total_chars, chunk_chars, \
                 created_at) VALUES ($1, $2, $3, 0, $4, $5)",
            )
            .bind(&write.result_id)
            .bind(write.session_id)
            .bind(write.call_id.as_bytes())
            .bind(to_i64(CHUNK_CHARS, "chunk_chars")?)
            .bind(millis(SystemTime::now()))
            .execute(&mut *transaction)
            .await
            .map_err(fail)?;
        }
        let mut offset = write.written_chars;
        for chunk in &chunks {
            sqlx::query(
                "INSERT INTO result_chunks (result_id, char_offset, char_count, content) \
                 VALUES ($1, $2, $3, $4)",
            )
            .bind(&write.result_id)
            .bind(to_i64(offset, "char_offset")?)
            .bind(to_i64(chunk.chars, "char_count")?)
            .bind(chunk.text.as_bytes())
            .execute(&mut *transaction)
            .await
            .map_err(fail)?;
            offset += chunk.chars;
        }
        if last {
            sqlx::query("UPDATE results SET total_chars = $2 WHERE id = $1")
                .bind(&write.result_id)
                .bind(to_i64(offset, "total_chars")?)
                .execute(&mut *transaction)
                .await
                .map_err(fail)?;
        }
        transaction.commit().await.map_err(fail)?;
        Ok(offset)
    }

    async fn delete_result(&self, result_id: &str) {
        let deleted = sqlx::query("DELETE FROM results WHERE id = $1")
            .bind(result_id)
            .execute(&self.pool)
            .await;
        if let Err(err) = deleted {
            tracing::warn!(result_id, error = %err, "a partly stored result could not be deleted");
        }
    }
}
