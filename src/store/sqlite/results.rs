//! Offloaded outputs on SQLite: the statements of [`ResultChunks`], chunks as TEXT; the flow
//! (streaming, chunking, paging) and [`ResultStore`](crate::dispatch::ResultStore) are the
//! store's, in `store/results.rs`. Chunks are written on the writer thread, one job per few
//! MiB, so audit rows of other calls commit between the transactions of a 200 MB result.

use rusqlite::params;

use sqlx::sqlite::SqlitePool;

use super::SqliteStore;
use super::convert::{millis, sqlite_error, to_i64};
use crate::dispatch::ports::TextChunk;
use crate::store::StoreError;
use crate::store::results::{CHUNK_CHARS, ResultChunks, ResultWrite};

impl ResultChunks for SqliteStore {
    type Reads = SqlitePool;

    fn reads(&self) -> &SqlitePool {
        &self.readers
    }

    /// One job on the writer thread.
    async fn write_chunks(
        &self,
        write: &ResultWrite<'_>,
        chunks: Vec<TextChunk>,
        last: bool,
    ) -> Result<u64, StoreError> {
        let result_id = write.result_id.clone();
        let context = write.context();
        let first = (!write.row_written).then(|| {
            (
                write.session_id.to_owned(),
                write.call_id.to_owned(),
                millis(std::time::SystemTime::now()),
            )
        });
        let start = write.written_chars;
        let chunk_chars = to_i64(CHUNK_CHARS, "chunk_chars")?;
        self.writer
            .write(move |connection| {
                let fail = |err| sqlite_error(&context, err);
                if let Some((session_id, call_id, created_at)) = first {
                    connection
                        .prepare_cached(
                            "INSERT INTO results (id, session_id, call_id, total_chars, \
                             chunk_chars, created_at) VALUES (?1, ?2, ?3, 0, ?4, ?5)",
                        )
                        .and_then(|mut insert| {
                            insert.execute(params![
                                result_id,
                                session_id,
                                call_id,
                                chunk_chars,
                                created_at
                            ])
                        })
                        .map_err(fail)?;
                }
                let mut offset = start;
                let mut insert = connection
                    .prepare_cached(
                        "INSERT INTO result_chunks (result_id, char_offset, char_count, content) \
                         VALUES (?1, ?2, ?3, ?4)",
                    )
                    .map_err(fail)?;
                for chunk in &chunks {
                    insert
                        .execute(params![
                            result_id,
                            to_i64(offset, "char_offset")?,
                            to_i64(chunk.chars, "char_count")?,
                            chunk.text
                        ])
                        .map_err(fail)?;
                    offset += chunk.chars;
                }
                if last {
                    let total = to_i64(offset, "total_chars")?;
                    connection
                        .prepare_cached("UPDATE results SET total_chars = ?2 WHERE id = ?1")
                        .and_then(|mut update| update.execute(params![result_id, total]))
                        .map_err(fail)?;
                }
                Ok(offset)
            })
            .await
    }

    async fn delete_result(&self, result_id: &str) {
        let id = result_id.to_owned();
        let deleted = self
            .writer
            .write_one(move |connection| {
                connection
                    .prepare_cached("DELETE FROM results WHERE id = ?1")
                    .and_then(|mut delete| delete.execute([&id]))
                    .map_err(|err| sqlite_error(&format!("deleting result \"{id}\""), err))
            })
            .await;
        if let Err(err) = deleted {
            tracing::warn!(result_id, error = %err, "a partly stored result could not be deleted");
        }
    }
}
