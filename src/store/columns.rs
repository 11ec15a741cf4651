//! Column values: conversions between the store's Rust types and the values both dialects
//! keep in their columns: times as integer milliseconds since the Unix epoch (negative before
//! it), unsigned counts as signed 64-bit integers (refused when they do not fit), JSON as
//! text, batch statuses, error kinds and offload columns; and the shared rules both backends
//! apply (approval decisions, paging results by character).

use std::fmt;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};

use super::{BatchStatus, StoreError};
use crate::dispatch::{AuditRecord, ResultPage, SinkError};
use crate::registry::calls::BatchFormat;
use crate::tool::{ErrorKind, OffloadedResult};

/// Milliseconds since the epoch, truncated towards the past, saturating far outside the
/// representable range.
pub fn millis(time: SystemTime) -> i64 {
    match time.duration_since(UNIX_EPOCH) {
        Ok(after) => i64::try_from(after.as_millis()).unwrap_or(i64::MAX),
        // Before the epoch: round away from it so truncation is always towards the past.
        Err(before) => {
            let before = before.duration();
            let whole = i64::try_from(before.as_millis()).unwrap_or(i64::MAX);
            let partial = i64::from(before.subsec_nanos() % 1_000_000 != 0);
            -whole.saturating_add(partial)
        }
    }
}

/// The time `millis` milliseconds from the epoch.
pub fn time(millis: i64) -> SystemTime {
    let magnitude = Duration::from_millis(millis.unsigned_abs());
    if millis >= 0 {
        UNIX_EPOCH + magnitude
    } else {
        UNIX_EPOCH - magnitude
    }
}

pub fn optional_time(millis: Option<i64>) -> Option<SystemTime> {
    millis.map(time)
}

/// An unsigned count as SQLite's signed integer; `what` names the value in the error.
pub fn to_i64<T>(value: T, what: &str) -> Result<i64, StoreError>
where
    T: TryInto<i64> + Copy + std::fmt::Display,
{
    value
        .try_into()
        .map_err(|_| StoreError::Invalid(format!("{what} {value} is too large to store")))
}

/// A stored integer back as an unsigned count; a negative one means the row is corrupt.
pub fn from_i64<T: TryFrom<i64>>(value: i64, what: &str) -> Result<T, StoreError> {
    T::try_from(value).map_err(|_| StoreError::Corrupt(format!("{what} {value} is out of range")))
}

/// JSON text for a value. Serialising the crate's own types cannot fail in practice (no
/// non-string map keys, no failing `Serialize` impls); a failure is still reported, not
/// unwrapped. `what` names the value in that report and is only formatted then, so rows
/// written per call name themselves without building a `String` for nothing.
pub fn to_json<T: Serialize + ?Sized>(
    value: &T,
    what: impl fmt::Display,
) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|err| StoreError::Invalid(format!("{what} cannot be serialised: {err}")))
}

pub fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| {
        let shown: String = text.chars().take(80).collect();
        StoreError::Corrupt(format!("{what} is not valid JSON ({err}): {shown:?}"))
    })
}

/// Characters `skip..skip + take` of `text` (fewer when it is shorter).
pub fn char_slice(text: &str, skip: u64, take: u64) -> &str {
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

/// A batch status as stored.
pub fn batch_status_text(status: BatchStatus) -> &'static str {
    match status {
        BatchStatus::Running => "running",
        BatchStatus::Completed => "completed",
    }
}

/// A batch status as stored, back; anything else is corruption (`what` names the column).
pub fn parse_batch_status(text: &str, what: &str) -> Result<BatchStatus, StoreError> {
    match text {
        "running" => Ok(BatchStatus::Running),
        "completed" => Ok(BatchStatus::Completed),
        other => Err(StoreError::Corrupt(format!(
            "{what}: unknown status \"{other}\""
        ))),
    }
}

/// A batch format as stored (its name), back; any other name is corruption naming the batch,
/// never a default: a batch replayed in the wrong shape would hand a client results it cannot
/// read.
pub fn parse_batch_format(text: &str, batch_id: &str) -> Result<BatchFormat, StoreError> {
    text.parse().map_err(|_| {
        StoreError::Corrupt(format!(
            "stored batch \"{batch_id}\" has unknown format \"{text}\""
        ))
    })
}

/// An error kind as stored, back (`what` names the column).
pub fn parse_error_kind(text: Option<&str>, what: &str) -> Result<Option<ErrorKind>, StoreError> {
    text.map(|kind| {
        ErrorKind::parse(kind)
            .ok_or_else(|| StoreError::Corrupt(format!("{what}: unknown error kind \"{kind}\"")))
    })
    .transpose()
}

/// An audit row's offload columns, back: both set, or no offloaded result.
pub fn offloaded(
    result_id: Option<&str>,
    total_chars: Option<i64>,
    what: &str,
) -> Result<Option<OffloadedResult>, StoreError> {
    match (result_id, total_chars) {
        (Some(result_id), Some(total)) => Ok(Some(OffloadedResult {
            result_id: result_id.to_owned(),
            total_chars: from_i64(total, what)?,
        })),
        _ => Ok(None),
    }
}

pub fn check_decision(decision: &str) -> Result<(), StoreError> {
    match decision {
        "allow" | "deny" => Ok(()),
        other => Err(StoreError::Invalid(format!(
            "approval decision \"{other}\"; expected allow or deny"
        ))),
    }
}

/// A page read from the store, as the dispatch ports answer: an unknown result is an error
/// naming it.
pub fn page_or_unknown(
    result_id: &str,
    page: Result<Option<ResultPage>, StoreError>,
) -> Result<ResultPage, SinkError> {
    match page {
        Ok(Some(page)) => Ok(page),
        Ok(None) => Err(SinkError(format!("unknown result \"{result_id}\""))),
        Err(err) => Err(SinkError(err.to_string())),
    }
}

/// An audit row as column values, ready to bind (both backends). Built in the caller's task,
/// so rendering the JSON columns runs there, not on a writer. Serialisable for SQLite's audit
/// journal (`store/sqlite/journal.rs`), which keeps rows as JSON until they are in the table.
#[derive(Debug, Serialize, Deserialize)]
pub(crate) struct AuditRow {
    pub(crate) session_id: String,
    pub(crate) batch_id: String,
    pub(crate) call_id: String,
    pub(crate) call_index: i64,
    pub(crate) requested_name: String,
    pub(crate) tool: Option<String>,
    pub(crate) input: String,
    pub(crate) decision: Option<String>,
    pub(crate) is_error: bool,
    pub(crate) error_kind: Option<ErrorKind>,
    pub(crate) output_chars: i64,
    pub(crate) result_id: Option<String>,
    pub(crate) result_total_chars: Option<i64>,
    pub(crate) started_at: i64,
    pub(crate) duration_ms: f64,
    /// Absent from rows journalled before the column existed.
    #[serde(default)]
    pub(crate) cancelled_by: Option<String>,
    #[serde(default)]
    pub(crate) trace_id: Option<String>,
    /// Absent from rows journalled before the column existed.
    #[serde(default)]
    pub(crate) principal: Option<String>,
    /// Absent from rows journalled before the column existed.
    #[serde(default)]
    pub(crate) isolation: Option<String>,
}

impl AuditRow {
    /// The rows of a batch's records, for a sink: a record that cannot be converted is the
    /// sink's error.
    pub(crate) fn for_sink(records: Vec<AuditRecord>) -> Result<Vec<AuditRow>, SinkError> {
        records
            .into_iter()
            .map(AuditRow::new)
            .collect::<Result<Vec<_>, _>>()
            .map_err(|err| SinkError(err.to_string()))
    }

    pub(crate) fn new(record: AuditRecord) -> Result<AuditRow, StoreError> {
        let what = AuditRowName(&record.call_id);
        let (result_id, result_total_chars) = match record.offloaded {
            Some(OffloadedResult {
                result_id,
                total_chars,
            }) => (Some(result_id), Some(to_i64(total_chars, "total_chars")?)),
            None => (None, None),
        };
        Ok(AuditRow {
            call_index: to_i64(record.index, "call index")?,
            input: to_json(&record.input, &what)?,
            decision: record
                .decision
                .as_ref()
                .map(|d| to_json(d, &what))
                .transpose()?,
            output_chars: to_i64(record.output_chars, "output_chars")?,
            error_kind: record.error_kind,
            started_at: millis(record.started_at),
            session_id: record.session_id,
            batch_id: record.batch_id,
            call_id: record.call_id,
            requested_name: record.requested_name,
            tool: record.tool,
            is_error: record.is_error,
            result_id,
            result_total_chars,
            duration_ms: record.duration_ms,
            cancelled_by: record.cancelled_by,
            trace_id: record.trace_id,
            principal: record.principal,
            isolation: record.isolation,
        })
    }
}

/// How errors name an audit row, formatted only when one happens.
struct AuditRowName<'a>(&'a str);

impl fmt::Display for AuditRowName<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "audit row for call \"{}\"", self.0)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_millisecond_towards_the_past() {
        let now = SystemTime::now();
        let back = time(millis(now));
        assert!(back <= now && now.duration_since(back).unwrap() < Duration::from_millis(1));
        assert_eq!(millis(UNIX_EPOCH), 0);
        let before = UNIX_EPOCH - Duration::from_micros(1500);
        assert_eq!(millis(before), -2);
        assert_eq!(time(-2), UNIX_EPOCH - Duration::from_millis(2));
    }

    #[test]
    fn counts_out_of_range_name_the_value() {
        assert_eq!(to_i64(5u64, "seq").unwrap(), 5);
        let err = to_i64(u64::MAX, "seq").unwrap_err().to_string();
        assert!(err.contains("seq 18446744073709551615"), "{err}");
        let err = from_i64::<u64>(-1, "total_chars").unwrap_err().to_string();
        assert!(err.contains("total_chars -1"), "{err}");
    }

    #[test]
    fn slices_count_characters_not_bytes() {
        assert_eq!(char_slice("héllo", 1, 3), "éll");
        assert_eq!(char_slice("héllo", 4, 10), "o");
        assert_eq!(char_slice("héllo", 9, 1), "");
        assert_eq!(char_slice("héllo", 0, u64::MAX), "héllo");
    }

    #[test]
    fn stored_batch_statuses_round_trip_and_unknown_ones_are_corrupt() {
        for status in [BatchStatus::Running, BatchStatus::Completed] {
            assert_eq!(
                parse_batch_status(batch_status_text(status), "status").unwrap(),
                status
            );
        }
        let err = parse_batch_status("paused", "column status").unwrap_err();
        assert!(err.to_string().contains("\"paused\""), "{err}");
    }

    #[test]
    fn stored_batch_formats_round_trip_and_unknown_ones_are_corrupt_naming_the_batch() {
        for format in [
            BatchFormat::Toold,
            BatchFormat::Anthropic,
            BatchFormat::OpenAi,
            BatchFormat::OpenAiChat,
        ] {
            assert_eq!(parse_batch_format(format.as_str(), "b-1").unwrap(), format);
        }
        let err = parse_batch_format("xml", "b-1").unwrap_err();
        assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
        assert!(
            err.to_string()
                .contains("stored batch \"b-1\" has unknown format \"xml\""),
            "{err}"
        );
    }

    #[test]
    fn a_row_journalled_before_the_later_columns_reads_them_as_none() {
        // The shape a journal segment held before `cancelled_by`, `trace_id`, `principal`
        // and `isolation` were columns: a replay after an upgrade must still read it.
        let old = serde_json::json!({
            "session_id": "s", "batch_id": "b", "call_id": "c", "call_index": 0,
            "requested_name": "bash", "tool": "bash", "input": "{}", "decision": null,
            "is_error": false, "error_kind": null, "output_chars": 0, "result_id": null,
            "result_total_chars": null, "started_at": 0, "duration_ms": 1.0,
        });
        let row: AuditRow = serde_json::from_value(old).unwrap();
        assert_eq!(row.isolation, None);
        assert_eq!(row.principal, None);
    }
}
