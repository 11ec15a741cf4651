//! Offloaded outputs on SQLite: [`ResultStore`] with the text in chunks.
//!
//! An output is split into chunks of [`CHUNK_CHARS`] characters (the last one shorter), each
//! row holding its starting character offset. A page `[offset, offset + limit)` reads only the
//! chunks overlapping it (an index range on `(result_id, char_offset)`) and slices them by
//! characters, so reading a page of a 200 MB output costs a chunk or two, not the output.
//! `total_chars` is counted while storing and kept on the result's row.
//!
//! Every output is stored as a stream ([`ResultStore::offload_reader`]; `offload` streams
//! its string): bytes are decoded by [`TextChunker`] (invalid UTF-8 becomes U+FFFD, as
//! `String::from_utf8_lossy` makes it) and the chunks are written as they complete, a few MiB
//! per transaction, so neither the output nor the write lock is held whole: audit rows of
//! other calls commit between the transactions of a 200 MB result. The result's row is
//! written with the first transaction and gets its `total_chars` with the last; until the id
//! is returned nobody can name the result, so no reader sees it half-written. A failed
//! offload deletes what it wrote; one whose caller is dropped midway leaves a row with
//! `total_chars` 0 that no one can name (a later sweep may remove such rows).

use async_trait::async_trait;
use rusqlite::params;
use tokio::io::AsyncReadExt;

use super::SqliteStore;
use super::convert::{database_error, from_i64, get, millis, sqlite_error, to_i64};
use crate::dispatch::ports::{OffloadSource, TextChunk, TextChunker};
use crate::dispatch::{ResultPage, ResultStore, SinkError};
use crate::store::StoreError;
use crate::store::columns::{char_slice, page_or_unknown};
use crate::tool::OffloadedResult;

/// Characters per chunk row: 64 Ki characters is 64–256 KiB of UTF-8, large enough that a
/// result has few rows and small enough that a page reads little it does not return.
const CHUNK_CHARS: usize = 64 * 1024;

/// Text written per transaction: large enough to amortise a commit, small enough that the
/// write lock is not held for long and the chunks waiting for it stay small in memory.
const TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// Bytes read from the source at a time.
const READ_BYTES: usize = 1024 * 1024;

/// Why a streamed offload failed.
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
    /// Characters written so far (the next chunk's offset).
    written_chars: u64,
    /// Whether the result's row exists yet.
    row_written: bool,
}

impl SqliteStore {
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

    /// Reads `content` to its end, writing complete chunks a transaction at a time.
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
            self.write_chunks(write, chunks, read == 0).await?;
            if read == 0 {
                return Ok(());
            }
        }
    }

    /// One job on the writer thread: the result's row if it is not written yet, `chunks`,
    /// and with `last` the final `total_chars`.
    async fn write_chunks(
        &self,
        write: &mut ResultWrite<'_>,
        chunks: Vec<TextChunk>,
        last: bool,
    ) -> Result<(), StoreError> {
        let result_id = write.result_id.clone();
        let context = format!(
            "storing result \"{result_id}\" of call \"{}\"",
            write.call_id
        );
        let first = (!write.row_written).then(|| {
            (
                write.session_id.to_owned(),
                write.call_id.to_owned(),
                millis(std::time::SystemTime::now()),
            )
        });
        let start = write.written_chars;
        let chunk_chars = to_i64(CHUNK_CHARS, "chunk_chars")?;
        let written = self
            .writer
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
            .await?;
        write.row_written = true;
        write.written_chars = written;
        Ok(())
    }

    /// Removes a result that failed midway (its chunks go with it: `ON DELETE CASCADE`).
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

    async fn result_page(
        &self,
        owner: Option<&str>,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<Option<ResultPage>, StoreError> {
        let context = format!("reading result \"{result_id}\"");
        let Some(head) =
            sqlx::query("SELECT session_id, total_chars, chunk_chars FROM results WHERE id = ?1")
                .bind(result_id)
                .fetch_optional(&self.readers)
                .await
                .map_err(|err| database_error(&context, err))?
        else {
            return Ok(None);
        };
        let stored_by: &str = get(&head, "session_id")?;
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
        // `offset - chunk_chars`: both bounds of the range are indexable.
        let rows = sqlx::query(
            "SELECT char_offset, content FROM result_chunks \
             WHERE result_id = ?1 AND char_offset > ?2 AND char_offset < ?3 \
             ORDER BY char_offset",
        )
        .bind(result_id)
        .bind(to_i64(offset, "offset")? - chunk_chars)
        .bind(to_i64(end, "offset")?)
        .fetch_all(&self.readers)
        .await
        .map_err(|err| database_error(&context, err))?;
        for row in &rows {
            let chunk_offset: u64 = from_i64(get(row, "char_offset")?, "char_offset")?;
            let text: &str = get(row, "content")?;
            let start = offset.max(chunk_offset);
            page.content
                .push_str(char_slice(text, start - chunk_offset, end - start));
        }
        Ok(Some(page))
    }
}

#[async_trait]
impl ResultStore for SqliteStore {
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
