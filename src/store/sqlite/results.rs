//! Offloaded outputs on SQLite: [`ResultStore`] with the text in chunks.
//!
//! An output is split into chunks of [`CHUNK_CHARS`] characters (the last one shorter), each
//! row holding its starting character offset. A page `[offset, offset + limit)` reads only the
//! chunks overlapping it (an index range on `(result_id, char_offset)`) and slices them by
//! characters, so reading a page of a 200 MB output costs a chunk or two, not the output.
//! `total_chars` is counted when storing and kept on the result's row.
//!
//! Results are written once, in one transaction, and never change, so a reader needs no
//! transaction to see a consistent result.

use async_trait::async_trait;
use sqlx::Connection;

use super::SqliteStore;
use super::convert::{database_error, from_i64, get, millis, to_i64};
use crate::dispatch::{ResultPage, ResultStore, SinkError};
use crate::store::StoreError;
use crate::tool::OffloadedResult;

/// Characters per chunk row: 64 Ki characters is 64–256 KiB of UTF-8, large enough that a
/// result has few rows and small enough that a page reads little it does not return.
const CHUNK_CHARS: usize = 64 * 1024;

/// `content` cut every [`CHUNK_CHARS`] characters: `(char_offset, char_count, text)`.
fn chunks(content: &str) -> Vec<(u64, u64, &str)> {
    let mut out = Vec::new();
    let mut rest = content;
    let mut offset = 0u64;
    while !rest.is_empty() {
        let (cut, count) = match rest.char_indices().nth(CHUNK_CHARS) {
            Some((cut, _)) => (cut, CHUNK_CHARS as u64),
            None => (rest.len(), rest.chars().count() as u64),
        };
        out.push((offset, count, &rest[..cut]));
        offset += count;
        rest = &rest[cut..];
    }
    out
}

/// Characters `skip..skip + take` of `text` (fewer when it is shorter).
fn char_slice(text: &str, skip: u64, take: u64) -> &str {
    let byte_at = |chars: u64| {
        usize::try_from(chars)
            .ok()
            .and_then(|n| text.char_indices().nth(n))
            .map_or(text.len(), |(at, _)| at)
    };
    let start = byte_at(skip);
    let end = byte_at(skip.saturating_add(take));
    &text[start..end]
}

impl SqliteStore {
    async fn store_result(
        &self,
        session_id: &str,
        call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, StoreError> {
        let result_id = format!("res_{}", uuid::Uuid::now_v7().simple());
        let pieces = chunks(content);
        let total_chars = pieces.last().map_or(0, |(offset, count, _)| offset + count);
        let context = format!("storing result \"{result_id}\" of call \"{call_id}\"");
        let fail = |err| database_error(&context, err);
        let mut writer = self.writer.lock().await?;
        let mut tx = writer.begin().await.map_err(fail)?;
        sqlx::query(
            "INSERT INTO results (id, session_id, call_id, total_chars, chunk_chars, created_at) \
             VALUES (?1, ?2, ?3, ?4, ?5, ?6)",
        )
        .bind(&result_id)
        .bind(session_id)
        .bind(call_id)
        .bind(to_i64(total_chars, "total_chars")?)
        .bind(to_i64(CHUNK_CHARS, "chunk_chars")?)
        .bind(millis(std::time::SystemTime::now()))
        .execute(&mut *tx)
        .await
        .map_err(fail)?;
        for (offset, count, text) in pieces {
            sqlx::query(
                "INSERT INTO result_chunks (result_id, char_offset, char_count, content) \
                 VALUES (?1, ?2, ?3, ?4)",
            )
            .bind(&result_id)
            .bind(to_i64(offset, "char_offset")?)
            .bind(to_i64(count, "char_count")?)
            .bind(text)
            .execute(&mut *tx)
            .await
            .map_err(fail)?;
        }
        tx.commit().await.map_err(fail)?;
        Ok(OffloadedResult {
            result_id,
            total_chars,
        })
    }

    /// A page of `result_id`; with `owner`, only if that session stored it. `None` when the
    /// result is unknown (to that owner).
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

    /// [`Self::result_page`] for the sink traits: unknown results are an error naming them.
    async fn result_page_or_unknown(
        &self,
        owner: Option<&str>,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        match self.result_page(owner, result_id, offset, limit).await {
            Ok(Some(page)) => Ok(page),
            Ok(None) => Err(SinkError(format!("unknown result \"{result_id}\""))),
            Err(err) => Err(SinkError(err.to_string())),
        }
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
        self.store_result(session_id, call_id, content)
            .await
            .map_err(|err| SinkError(err.to_string()))
    }

    async fn read(
        &self,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        self.result_page_or_unknown(None, result_id, offset, limit)
            .await
    }

    async fn read_for_session(
        &self,
        session_id: &str,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        self.result_page_or_unknown(Some(session_id), result_id, offset, limit)
            .await
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_cut_on_characters_and_cover_the_text() {
        let text: String = "é".repeat(CHUNK_CHARS * 2 + 3);
        let pieces = chunks(&text);
        assert_eq!(pieces.len(), 3);
        assert_eq!(pieces[1].0, CHUNK_CHARS as u64);
        assert_eq!(pieces[2], (2 * CHUNK_CHARS as u64, 3, "ééé"));
        let joined: String = pieces.iter().map(|(_, _, t)| *t).collect();
        assert_eq!(joined, text);
        assert!(chunks("").is_empty());
    }

    #[test]
    fn slices_count_characters_not_bytes() {
        assert_eq!(char_slice("héllo", 1, 3), "éll");
        assert_eq!(char_slice("héllo", 4, 10), "o");
        assert_eq!(char_slice("héllo", 9, 1), "");
        assert_eq!(char_slice("héllo", 0, u64::MAX), "héllo");
    }
}
