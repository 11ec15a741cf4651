//! Offloaded outputs, written once for both dialects: the [`ResultStore`] port over a
//! dialect's [`ResultChunks`] (its statements that write chunks and delete a result) and the
//! shared reads (`reads::result_head`, `reads::result_chunks`, decoded by `rows`).
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

use std::future::Future;

use async_trait::async_trait;
use tokio::io::AsyncReadExt;

use super::StoreError;
use super::columns::page_or_unknown;
use super::reads::{self, RunReads};
use super::rows::{push_chunk, result_head};
use crate::dispatch::ports::{OffloadSource, TextChunk, TextChunker};
use crate::dispatch::{ResultPage, ResultStore, SinkError};
use crate::tool::OffloadedResult;

/// Characters per chunk row: 64 Ki characters is 64–256 KiB of UTF-8, large enough that a
/// result has few rows and small enough that a page reads little it does not return.
pub(crate) const CHUNK_CHARS: usize = 64 * 1024;

/// Text written per transaction: large enough to amortise a commit, small enough that the
/// write lock is not held for long and the chunks waiting for it stay small in memory.
const TRANSACTION_BYTES: usize = 4 * 1024 * 1024;

/// Bytes read from the source at a time.
const READ_BYTES: usize = 1024 * 1024;

/// A dialect's statements that write offloaded results; with the shared reads
/// ([`RunReads`]), [`ResultStore`] comes with them.
pub(crate) trait ResultChunks: Send + Sync + 'static {
    /// Where the shared reads run (the dialect's read pool).
    type Reads: RunReads;

    fn reads(&self) -> &Self::Reads;

    /// One transaction: the result's row if `write.row_written` is false, `chunks` from
    /// character `write.written_chars` on, and with `last` the final `total_chars`. Returns
    /// the characters written in all after it.
    fn write_chunks(
        &self,
        write: &ResultWrite<'_>,
        chunks: Vec<TextChunk>,
        last: bool,
    ) -> impl Future<Output = Result<u64, StoreError>> + Send;

    /// Removes a result that failed midway (its chunks go with it: `ON DELETE CASCADE`);
    /// a failure is only logged, since nobody can name the result.
    fn delete_result(&self, result_id: &str) -> impl Future<Output = ()> + Send;
}

/// Where a result being written stands.
pub(crate) struct ResultWrite<'a> {
    pub(crate) result_id: String,
    pub(crate) session_id: &'a str,
    pub(crate) call_id: &'a str,
    /// Characters written so far (the next chunk's offset).
    pub(crate) written_chars: u64,
    /// Whether the result's row exists yet.
    pub(crate) row_written: bool,
}

impl ResultWrite<'_> {
    /// How errors name the result.
    pub(crate) fn context(&self) -> String {
        format!(
            "storing result \"{}\" of call \"{}\"",
            self.result_id, self.call_id
        )
    }
}

/// Why a streamed offload failed.
#[derive(Debug, thiserror::Error)]
enum OffloadError {
    #[error("reading the output to store failed: {0}")]
    Source(#[from] std::io::Error),
    #[error(transparent)]
    Store(#[from] StoreError),
}

#[async_trait]
impl<T: ResultChunks> ResultStore for T {
    async fn offload(
        &self,
        session_id: &str,
        call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, SinkError> {
        store_stream(self, session_id, call_id, &mut content.as_bytes()).await
    }

    async fn offload_reader(
        &self,
        session_id: &str,
        call_id: &str,
        content: &mut OffloadSource<'_>,
    ) -> Result<OffloadedResult, SinkError> {
        store_stream(self, session_id, call_id, content).await
    }

    async fn read(
        &self,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        page_or_unknown(
            result_id,
            result_page(self, None, result_id, offset, limit).await,
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
            result_page(self, Some(session_id), result_id, offset, limit).await,
        )
    }
}

async fn store_stream<S: ResultChunks>(
    store: &S,
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
    match stream_chunks(store, &mut write, content).await {
        Ok(()) => Ok(OffloadedResult {
            result_id: write.result_id,
            total_chars: write.written_chars,
        }),
        Err(err) => {
            if write.row_written {
                store.delete_result(&write.result_id).await;
            }
            Err(SinkError(err.to_string()))
        }
    }
}

/// Reads `content` to its end, writing complete chunks a transaction at a time.
async fn stream_chunks<S: ResultChunks>(
    store: &S,
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
        let written = store.write_chunks(write, chunks, read == 0).await?;
        write.row_written = true;
        write.written_chars = written;
        if read == 0 {
            return Ok(());
        }
    }
}

/// A page of a result; `None` when it is unknown, or stored by another session than `owner`.
async fn result_page<S: ResultChunks>(
    store: &S,
    owner: Option<&str>,
    result_id: &str,
    offset: u64,
    limit: u64,
) -> Result<Option<ResultPage>, StoreError> {
    let Some(row) = reads::result_head(store.reads(), result_id).await? else {
        return Ok(None);
    };
    let head = result_head(&row)?;
    if owner.is_some_and(|owner| owner != head.session_id) {
        return Ok(None);
    }
    let mut page = ResultPage {
        result_id: result_id.to_owned(),
        session_id: head.session_id.to_owned(),
        total_chars: head.total_chars,
        offset,
        content: String::new(),
    };
    let end = head.page_end(offset, limit);
    if offset >= end {
        return Ok(Some(page));
    }
    let chunks =
        reads::result_chunks(store.reads(), result_id, head.chunk_starts(offset, end)?).await?;
    for chunk in &chunks {
        push_chunk(&mut page, chunk, end)?;
    }
    Ok(Some(page))
}
