//! SQLite's column access and the mapping of sqlx and rusqlite errors to [`StoreError`] with
//! the offending value in the message; the conversions every backend shares (times, counts,
//! JSON) are in `store::columns` and re-exported here.

use sqlx::sqlite::SqliteRow;
use sqlx::{Row, Sqlite};

use crate::store::StoreError;

pub use crate::store::columns::{from_i64, from_json, millis, optional_time, time, to_i64, to_json};

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
            rusqlite::ffi::SQLITE_CONSTRAINT_UNIQUE
            | rusqlite::ffi::SQLITE_CONSTRAINT_PRIMARYKEY => {
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
