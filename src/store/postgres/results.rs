//! Offloaded outputs on Postgres: [`ResultStore`] with the text in chunks, as on SQLite.
//!
//! An output is cut by [`TextChunker`] into chunks of [`CHUNK_CHARS`] characters, each row
//! holding its starting character offset, written a few MiB per transaction as the bytes
//! arrive (never held whole); the result's row is written with the first transaction and gets
//! its `total_chars` with the last. Until the id is returned nobody can name the result, so no
//! reader sees it half-written; a failed offload deletes what it wrote. A page reads only the
//! chunks overlapping it. Chunks are BYTEA holding UTF-8 (TEXT cannot hold U+0000).

use std::time::SystemTime;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;

use super::PostgresStore;
use super::convert::{database_error, from_i64, get, millis, to_i64};
use crate::dispatch::ports::{OffloadSource, TextChunk, TextChunker};
use crate::dispatch::{ResultPage, ResultStore, SinkError};
use crate::store::StoreError;
use crate::store::columns::{char_slice, page_or_unknown};
use crate::tool::OffloadedResult;

/// Characters per chunk row (as on SQLite: few rows per result, little read beyond a page).
const CHUNK_CHARS: usize = 64 * 1024;

/// Text written per transaction.
const TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// Bytes read from the source at a time.
const READ_BYTES: usize = 1024 * 1024;

#[derive(Debug, thiserror::Error)]
enum OffloadError {
    #[error("reading the output to store failed: {0}")]
    Source(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

/// Where a result being written stands.
struct ResultWrite<'a> {
    result_id: String,
    session_id: &'a str,
    call_id: &'a str,
    written_chars: u64,
    row_written: bool,
}

impl PostgresStore {
    async fn store_stream(
        &self,
        session_id: &str,
        call_id: &str,
        content: &mut OffloadSource<'_>,
    ) -> Result<OffloadedResult, SinkError> {
        let mut write = ResultWrite {
            result_id: format!("res_{}", uuid::Uuid::now_v7().simple()),
            session_id,
            call_id,
            written_chars: 0,
            row_written: false,
        };
        match self.stream_chunks(&mut write, content).await {
            Ok(()) => Ok(OffloadedResult {
                result_id: write.result_id,
                total_chars: write.written_chars,
            }),
            Err(err) => {
                if write.row_written {
                    self.delete_result(&write.result_id).await;
                }
                Err(SinkError(err.to_string()))
            }
        }
    }

    async fn stream_chunks(
        &self,
        write: &mut ResultWrite<'_>,
        content: &mut OffloadSource<'_>,
    ) -> Result<(), OffloadError> {
        let mut chunker = TextChunker::new(CHUNK_CHARS);
        let mut buffer = vec![0_u8; READ_BYTES];
        loop {
            let read = content.read(&mut buffer).await?;
            if read == 0 {
                chunker.finish();
            } else {
                chunker.push(&buffer[..read]);
                if chunker.ready_bytes() < TRANSACTION_BYTES {
                    continue;
                }
            }
            let chunks: Vec<TextChunk> = std::iter::from_fn(|| chunker.pop()).collect();
            self.write_chunks(write, &chunks, read == 0).await?;
            if read == 0 {
                return Ok(());
            }
        }
    }

    /// One transaction: the result's row if not written yet, `chunks`, and with `last` the
    /// final `total_chars`.
    async fn write_chunks(
        &self,
        write: &mut ResultWrite<'_>,
        chunks: &[TextChunk],
        last: bool,
    ) -> Result<(), StoreError> {
        let context = format!(
            "storing result \"{}\" of call \"{}\"",
            write.result_id, write.call_id
        );
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
        for chunk in chunks {
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
        write.row_written = true;
        write.written_chars = offset;
        Ok(())
    }

    /// Removes a result that failed midway (its chunks go with it: `ON DELETE CASCADE`).
    async fn delete_result(&self, result_id: &str) {
        let deleted = sqlx::query("DELETE FROM results WHERE id = $1")
            .bind(result_id)
            .execute(&self.pool)
            .await;
        if let Err(err) = deleted {
            tracing::warn!(result_id, error = %err, "a partly stored result could not be deleted");
        }
    }

    async fn result_page(
        &self,
        owner: Option<&str>,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Option<ResultPage>, StoreError> {
        let context = format!("reading result \"{result_id}\"");
        let Some(head) =
            sqlx::query("SELECT session_id, total_chars, chunk_chars FROM results WHERE id = $1")
                .bind(result_id)
                .fetch_optional(&self.pool)
                .await
                .map_err(|err| database_error(&context, err))?
        else {
            return Ok(None);
        };
        let stored_by: String = get(&head, "session_id")?;
        if owner.is_some_and(|owner| owner != stored_by) {
            return Ok(None);
        }
        let total_chars: u64 = from_i64(get(&head, "total_chars")?, "total_chars")?;
        let chunk_chars: i64 = get(&head, "chunk_chars")?;
        let mut page = ResultPage {
            result_id: result_id.to_owned(),
            total_chars,
            offset,
            content: String::new(),
        };
        let end = offset.saturating_add(limit).min(total_chars);
        if offset >= end {
            return Ok(Some(page));
        }
        // Every chunk is at most chunk_chars long, so one overlapping `offset` starts after
        // `offset - chunk_chars`.
        let rows = sqlx::query(
            "SELECT char_offset, content FROM result_chunks \
             WHERE result_id = $1 AND char_offset > $2 AND char_offset < $3 \
             ORDER BY char_offset",
        )
        .bind(result_id)
        .bind(to_i64(offset, "offset")? - chunk_chars)
        .bind(to_i64(end, "offset")?)
        .fetch_all(&self.pool)
        .await
        .map_err(|err| database_error(&context, err))?;
        for row in &rows {
            let chunk_offset: u64 = from_i64(get(row, "char_offset")?, "char_offset")?;
            let bytes: &[u8] = get(row, "content")?;
            let text = std::str::from_utf8(bytes).map_err(|err| {
                StoreError::Corrupt(format!("{context}: a chunk is not UTF-8: {err}"))
            })?;
            let start = offset.max(chunk_offset);
            page.content
                .push_str(char_slice(text, start - chunk_offset, end - start));
        }
        Ok(Some(page))
    }
}

#[async_trait]
impl ResultStore for PostgresStore {
    async fn offload(
        &self,
        session_id: &str,
        call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, SinkError> {
        self.store_stream(session_id, call_id, &mut content.as_bytes())
            .await
    }

    async fn offload_reader(
        &self,
        session_id: &str,
        call_id: &str,
        content: &mut OffloadSource<'_>,
    ) -> Result<OffloadedResult, SinkError> {
        self.store_stream(session_id, call_id, content).await
    }

    async fn read(
        &self,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        page_or_unknown(
            result_id,
            self.result_page(None, result_id, offset, limit).await,
        )
    }

    async fn read_for_session(
        &self,
        session_id: &str,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        page_or_unknown(
            result_id,
            self.result_page(Some(session_id), result_id, offset, limit)
                .await,
        )
    }
}
