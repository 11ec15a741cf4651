//! Conversions between the store's Rust types and SQLite's column types, and the mapping of
//! sqlx errors to [`StoreError`] with the offending value in the message.
//!
//! Times are INTEGER milliseconds since the Unix epoch (negative before it); unsigned counts
//! are INTEGER (SQLite's is a signed 64-bit), refused when they do not fit; JSON is TEXT.

use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde::Serialize;
use serde::de::DeserializeOwned;
use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite};

use crate::store::StoreError;

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
/// unwrapped.
pub fn to_json<T: Serialize + ?Sized>(value: &T, what: &str) -> Result<String, StoreError> {
    serde_json::to_string(value)
        .map_err(|err| StoreError::Invalid(format!("{what} cannot be serialised: {err}")))
}

pub fn from_json<T: DeserializeOwned>(text: &str, what: &str) -> Result<T, StoreError> {
    serde_json::from_str(text).map_err(|err| {
        let shown: String = text.chars().take(80).collect();
        StoreError::Corrupt(format!("{what} is not valid JSON ({err}): {shown:?}"))
    })
}

/// Maps a sqlx error to a store error; `context` says what was being done, with the values.
pub fn database_error(context: &str, err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::PoolTimedOut | sqlx::Error::PoolClosed | sqlx::Error::WorkerCrashed => {
            StoreError::Unavailable(format!("{context}: {err}"))
        }
        sqlx::Error::Io(_) => StoreError::Unavailable(format!("{context}: {err}")),
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("{context}: {err}"))
        }
        other => StoreError::Database(format!("{context}: {other}")),
    }
}

/// Maps an error of the writer thread's connection to a store error; `context` says what was
/// being done, with the values.
pub fn sqlite_error(context: &str, err: rusqlite::Error) -> StoreError {
    match err {
        rusqlite::Error::SqliteFailure(code, _)
            if matches!(
                code.code,
                rusqlite::ErrorCode::DatabaseBusy
                    | rusqlite::ErrorCode::DatabaseLocked
                    | rusqlite::ErrorCode::CannotOpen
                    | rusqlite::ErrorCode::DiskFull
                    | rusqlite::ErrorCode::SystemIoFailure
            ) =>
        {
            StoreError::Unavailable(format!("{context}: {err}"))
        }
        other => StoreError::Database(format!("{context}: {other}")),
    }
}

/// Like [`sqlite_error`], but a unique violation is a [`StoreError::Conflict`] on `identity`
/// and a foreign-key violation a [`StoreError::NotFound`] of `parent`.
pub fn sqlite_write_error(
    context: &str,
    identity: &str,
    parent: &str,
    err: rusqlite::Error,
) -> StoreError {
    if let rusqlite::Error::SqliteFailure(code, _) = &err {
        match code.extended_code {
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
                return StoreError::Conflict(identity.to_owned());
            }
            rusqlite::ffi::SQLITE_CONSTRAINT_FOREIGNKEY => {
                return StoreError::NotFound(parent.to_owned());
            }
            _ => {}
        }
    }
    sqlite_error(context, err)
}

/// A column of a row; a missing or mistyped column is corruption (the schema is ours).
pub fn get<'r, T>(row: &'r SqliteRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Sqlite> + sqlx::Type<Sqlite>,
{
    row.try_get(column)
        .map_err(|err| StoreError::Corrupt(format!("column {column}: {err}")))
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
}
