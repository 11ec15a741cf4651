//! Rows: each record the store keeps is decoded from its row by one function here, whichever
//! dialect read it.
//!
//! Records are read through [`ColumnReader`], implemented once here for sqlx's rows of either
//! dialect and once for rusqlite's rows on the SQLite writer thread (`sqlite/convert.rs`).
//! Where the dialects' columns truly differ, the dialect converts (`Dialect`, in its
//! `convert.rs`): Postgres keeps text a model or client chose (call ids, requested names,
//! idempotency keys, result chunks) as BYTEA holding UTF-8, SQLite as TEXT.
//! Everything else (which columns make a record, what a bad value is called, the conversions
//! of `columns`) is written once, below; the queries that select these columns are in
//! `reads`, also written once.
//!
//! Text columns are read borrowed from the row, so a JSON column is parsed straight from the
//! row's buffer and only the strings a record keeps are copied.
//!
//! Deliberately absent: writing rows. The write paths (the SQLite writer thread and its
//! journal, Postgres' multi-row inserts) bind values in each dialect's own way and are tuned
//! per dialect; decoding happens on reads only.

use std::ops::Range;
use std::path::PathBuf;
use std::sync::Arc;

use sqlx::{ColumnIndex, Decode, Row, Type};

use super::columns::{
    char_slice, from_i64, from_json, offloaded, optional_time, parse_batch_format,
    parse_batch_status, parse_error_kind, time, to_i64,
};
use super::reads::Dialect;
use super::{
    ApprovalRecord, BatchClaim, BatchRecord, BatchStore, CallRow, NodeRecord, SessionRecord,
    StoreError,
};
use crate::dispatch::{AuditRecord, ResultPage};
use crate::event::{Event, EventType};

/// A row, column by column: what every record is decoded through. A missing or mistyped
/// column is [`StoreError::Corrupt`] (the schema is ours).
pub(crate) trait ColumnReader {
    fn integer(&self, column: &str) -> Result<i64, StoreError>;
    fn optional_integer(&self, column: &str) -> Result<Option<i64>, StoreError>;
    fn real(&self, column: &str) -> Result<f64, StoreError>;
    fn boolean(&self, column: &str) -> Result<bool, StoreError>;
    /// A text column the daemon writes (ids, names of its own, JSON).
    fn text(&self, column: &str) -> Result<&str, StoreError>;
    fn optional_text(&self, column: &str) -> Result<Option<&str>, StoreError>;
    /// A column holding text a model or client chose, which may hold any character (U+0000
    /// too): BYTEA holding UTF-8 on Postgres, whose TEXT cannot hold U+0000.
    fn optional_chosen_text(&self, column: &str) -> Result<Option<&str>, StoreError>;

    fn chosen_text(&self, column: &str) -> Result<&str, StoreError> {
        self.optional_chosen_text(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {column} is NULL")))
    }
}

/// The rows sqlx reads, for either dialect: the columns both read alike are decoded here, and
/// text a model chose as the dialect says ([`Dialect::optional_chosen_text`]).
impl<R> ColumnReader for R
where
    R: Row,
    R::Database: Dialect,
    for<'a> &'a str: ColumnIndex<R>,
    for<'r> i64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> f64: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> bool: Decode<'r, R::Database> + Type<R::Database>,
    for<'r> &'r str: Decode<'r, R::Database> + Type<R::Database>,
{
    fn integer(&self, column: &str) -> Result<i64, StoreError> {
        get(self, column)
    }

    fn optional_integer(&self, column: &str) -> Result<Option<i64>, StoreError> {
        get(self, column)
    }

    fn real(&self, column: &str) -> Result<f64, StoreError> {
        get(self, column)
    }

    fn boolean(&self, column: &str) -> Result<bool, StoreError> {
        get(self, column)
    }

    fn text(&self, column: &str) -> Result<&str, StoreError> {
        get(self, column)
    }

    fn optional_text(&self, column: &str) -> Result<Option<&str>, StoreError> {
        get(self, column)
    }

    fn optional_chosen_text(&self, column: &str) -> Result<Option<&str>, StoreError> {
        <R::Database as Dialect>::optional_chosen_text(self, column)
    }
}

/// A column of a sqlx row; a missing or mistyped column is corruption.
pub(crate) fn get<'r, R, T>(row: &'r R, column: &str) -> Result<T, StoreError>
where
    R: Row,
    for<'a> &'a str: ColumnIndex<R>,
    T: Decode<'r, R::Database> + Type<R::Database>,
{
    row.try_get(column)
        .map_err(|err| StoreError::Corrupt(format!("column {column}: {err}")))
}

pub(crate) fn session_record(row: &impl ColumnReader) -> Result<SessionRecord, StoreError> {
    let id = row.text("id")?;
    let what = |column: &str| format!("column {column} of session \"{id}\"");
    let permission_mode = row
        .text("permission_mode")?
        .parse()
        .map_err(|err| StoreError::Corrupt(format!("{}: {err}", what("permission_mode"))))?;
    Ok(SessionRecord {
        working_directory: PathBuf::from(row.text("working_directory")?),
        permission_mode,
        interactive: row.boolean("interactive")?,
        owner: row.text("owner")?.to_owned(),
        principal: row.optional_text("principal")?.map(str::to_owned),
        created_at: time(row.integer("created_at")?),
        closed_at: optional_time(row.optional_integer("closed_at")?),
        options: from_json(row.text("options")?, &what("options"))?,
        state: from_json(row.text("state")?, &what("state"))?,
        id: id.to_owned(),
    })
}

pub(crate) fn batch_record(row: &impl ColumnReader) -> Result<BatchRecord, StoreError> {
    let batch_id = row.text("batch_id")?;
    let what = |column: &str| format!("column {column} of batch \"{batch_id}\"");
    let results = row
        .optional_text("results")?
        .map(|text| from_json(text, &what("results")))
        .transpose()?;
    Ok(BatchRecord {
        session_id: row.text("session_id")?.to_owned(),
        format: parse_batch_format(row.text("format")?, batch_id)?,
        idempotency_key: row
            .optional_chosen_text("idempotency_key")?
            .map(str::to_owned),
        request_hash: row.text("request_hash")?.to_owned(),
        status: parse_batch_status(row.text("status")?, &what("status"))?,
        call_count: from_i64(row.integer("call_count")?, &what("call_count"))?,
        results,
        created_at: time(row.integer("created_at")?),
        completed_at: optional_time(row.optional_integer("completed_at")?),
        batch_id: batch_id.to_owned(),
    })
}

/// The batch holding an idempotency key a claim found taken: `batch_id, request_hash`.
pub(crate) struct TakenKey {
    pub(crate) batch_id: String,
    pub(crate) request_hash: String,
}

pub(crate) fn taken_key(row: &impl ColumnReader) -> Result<TakenKey, StoreError> {
    Ok(TakenKey {
        batch_id: row.text("batch_id")?.to_owned(),
        request_hash: row.text("request_hash")?.to_owned(),
    })
}

impl TakenKey {
    /// What a claim of `claimed` that found its key taken answers: a conflict when the key's
    /// batch was for another request, else that batch (committed before the claim's write
    /// answered, so `store`'s readers see it).
    pub(crate) async fn claim<S: BatchStore + ?Sized>(
        self,
        store: &S,
        claimed: &BatchRecord,
    ) -> Result<BatchClaim, StoreError> {
        if self.request_hash != claimed.request_hash {
            return Ok(BatchClaim::Conflict {
                batch_id: self.batch_id,
            });
        }
        let existing = store
            .get_batch(&claimed.session_id, &self.batch_id)
            .await?
            .ok_or_else(|| StoreError::NotFound(format!("batch \"{}\"", self.batch_id)))?;
        Ok(BatchClaim::Existing(existing))
    }
}

pub(crate) fn call_row(row: &impl ColumnReader) -> Result<CallRow, StoreError> {
    let cursor = row.integer("cursor")?;
    let what = |column: &str| format!("column {column} of call row {cursor}");
    let record = AuditRecord {
        session_id: row.text("session_id")?.to_owned(),
        batch_id: row.text("batch_id")?.to_owned(),
        call_id: row.chosen_text("call_id")?.to_owned(),
        index: from_i64(row.integer("call_index")?, &what("call_index"))?,
        requested_name: row.chosen_text("requested_name")?.to_owned(),
        tool: row.optional_chosen_text("tool")?.map(str::to_owned),
        input: from_json(row.text("input")?, &what("input"))?,
        decision: row
            .optional_text("decision")?
            .map(|text| from_json(text, &what("decision")))
            .transpose()?,
        is_error: row.boolean("is_error")?,
        error_kind: parse_error_kind(row.optional_text("error_kind")?, &what("error_kind"))?,
        output_chars: from_i64(row.integer("output_chars")?, &what("output_chars"))?,
        offloaded: offloaded(
            row.optional_text("result_id")?,
            row.optional_integer("result_total_chars")?,
            &what("result_total_chars"),
        )?,
        started_at: time(row.integer("started_at")?),
        duration_ms: row.real("duration_ms")?,
        cancelled_by: row.optional_text("cancelled_by")?.map(str::to_owned),
        trace_id: row.optional_text("trace_id")?.map(str::to_owned),
        principal: row.optional_text("principal")?.map(str::to_owned),
        isolation: row.optional_text("isolation")?.map(str::to_owned),
    };
    Ok(CallRow {
        cursor,
        node: row.text("node")?.to_owned(),
        interrupted: row.boolean("interrupted")?,
        record,
    })
}

pub(crate) fn event(row: &impl ColumnReader) -> Result<Event, StoreError> {
    let seq = row.integer("seq")?;
    let what = |column: &str| format!("column {column} of event seq {seq}");
    let type_text = row.text("type")?;
    let event_type = EventType::parse(type_text).ok_or_else(|| {
        StoreError::Corrupt(format!(
            "{}: unknown event type \"{type_text}\"",
            what("type")
        ))
    })?;
    Ok(Event {
        seq: from_i64(seq, "event seq")?,
        ts: time(row.integer("ts")?),
        event_type,
        session_id: Arc::from(row.text("session_id")?),
        batch_id: row.optional_text("batch_id")?.map(Arc::from),
        call_id: row.optional_chosen_text("call_id")?.map(Arc::from),
        tool: row.optional_chosen_text("tool")?.map(Arc::from),
        actor: row.optional_text("actor")?.map(Arc::from),
        data: from_json(row.text("data")?, &what("data"))?,
    })
}

pub(crate) fn approval_record(row: &impl ColumnReader) -> Result<ApprovalRecord, StoreError> {
    let id = row.text("id")?;
    Ok(ApprovalRecord {
        session_id: row.text("session_id")?.to_owned(),
        call_id: row.chosen_text("call_id")?.to_owned(),
        tool: row.text("tool")?.to_owned(),
        input: from_json(
            row.text("input")?,
            &format!("column input of approval \"{id}\""),
        )?,
        reason: row.text("reason")?.to_owned(),
        created_at: time(row.integer("created_at")?),
        decision: row.optional_text("decision")?.map(str::to_owned),
        decided_by: row.optional_text("decided_by")?.map(str::to_owned),
        decided_at: optional_time(row.optional_integer("decided_at")?),
        id: id.to_owned(),
    })
}

pub(crate) fn node_record(row: &impl ColumnReader) -> Result<NodeRecord, StoreError> {
    Ok(NodeRecord {
        id: row.text("id")?.to_owned(),
        address: row.text("address")?.to_owned(),
        started_at: time(row.integer("started_at")?),
        heartbeat_at: time(row.integer("heartbeat_at")?),
    })
}

/// An offloaded result's row (`session_id, total_chars, chunk_chars`), borrowed from it.
pub(crate) struct ResultHead<'r> {
    /// The session whose call stored it.
    pub(crate) session_id: &'r str,
    pub(crate) total_chars: u64,
    /// The most characters a chunk of it holds.
    pub(crate) chunk_chars: i64,
}

pub(crate) fn result_head(row: &impl ColumnReader) -> Result<ResultHead<'_>, StoreError> {
    Ok(ResultHead {
        session_id: row.text("session_id")?,
        total_chars: from_i64(row.integer("total_chars")?, "total_chars")?,
        chunk_chars: row.integer("chunk_chars")?,
    })
}

impl ResultHead<'_> {
    /// The characters of a page `offset..offset + limit`, cut at the end of the result.
    pub(crate) fn page_end(&self, offset: u64, limit: u64) -> u64 {
        offset.saturating_add(limit).min(self.total_chars)
    }

    /// The chunk offsets to read for the characters `offset..end`: every chunk is at most
    /// `chunk_chars` long, so one overlapping `offset` starts after `offset - chunk_chars`,
    /// and both bounds of the range are indexable.
    pub(crate) fn chunk_starts(&self, offset: u64, end: u64) -> Result<Range<i64>, StoreError> {
        let first = to_i64(offset, "offset")? - self.chunk_chars;
        Ok(first..to_i64(end, "offset")?)
    }
}

/// Appends to `page` the characters up to `end` of a chunk row (`char_offset, content`), one
/// of those [`ResultHead::chunk_starts`] selects, read in offset order.
pub(crate) fn push_chunk(
    page: &mut ResultPage,
    row: &impl ColumnReader,
    end: u64,
) -> Result<(), StoreError> {
    let chunk_offset: u64 = from_i64(row.integer("char_offset")?, "char_offset")?;
    let text = row.chosen_text("content")?;
    let start = page.offset.max(chunk_offset);
    page.content
        .push_str(char_slice(text, start - chunk_offset, end - start));
    Ok(())
}
