//! Postgres' column access and the mapping of sqlx errors to [`StoreError`] with the offending
//! value in the message. The conversions every backend shares (times, counts, JSON) are in
//! `store::columns` and re-exported here.

use sqlx::postgres::PgRow;
use sqlx::{Postgres, Row};

use crate::store::StoreError;

pub use crate::store::columns::{from_i64, from_json, millis, optional_time, time, to_i64, to_json};

/// Postgres' SQLSTATE for a unique violation.
const UNIQUE_VIOLATION: &str = "23505";
/// Postgres' SQLSTATE for a foreign-key violation.
const FOREIGN_KEY_VIOLATION: &str = "23503";

/// Maps a sqlx error to a store error; `context` says what was being done, with the values.
pub fn database_error(context: &str, err: sqlx::Error) -> StoreError {
    match err {
        sqlx::Error::PoolTimedOut
        | sqlx::Error::PoolClosed
        | sqlx::Error::WorkerCrashed
        | sqlx::Error::Io(_)
        | sqlx::Error::Tls(_)
        | sqlx::Error::Protocol(_) => StoreError::Unavailable(format!("{context}: {err}")),
        sqlx::Error::ColumnDecode { .. } | sqlx::Error::Decode(_) => {
            StoreError::Corrupt(format!("{context}: {err}"))
        }
        other => StoreError::Database(format!("{context}: {other}")),
    }
}

/// Like [`database_error`], but a unique violation is a [`StoreError::Conflict`] on
/// `identity` and a foreign-key violation a [`StoreError::NotFound`] of `parent`.
pub fn write_error(context: &str, identity: &str, parent: &str, err: sqlx::Error) -> StoreError {
    if let sqlx::Error::Database(db) = &err {
        match db.code().as_deref() {
            Some(UNIQUE_VIOLATION) => return StoreError::Conflict(identity.to_owned()),
            Some(FOREIGN_KEY_VIOLATION) => return StoreError::NotFound(parent.to_owned()),
            _ => {}
        }
    }
    database_error(context, err)
}

/// A column of a row; a missing or mistyped column is corruption (the schema is ours).
pub fn get<'r, T>(row: &'r PgRow, column: &str) -> Result<T, StoreError>
where
    T: sqlx::Decode<'r, Postgres> + sqlx::Type<Postgres>,
{
    row.try_get(column)
        .map_err(|err| StoreError::Corrupt(format!("column {column}: {err}")))
}

/// A BYTEA column holding UTF-8 text (see the migration's header).
pub fn get_text(row: &PgRow, column: &str) -> Result<String, StoreError> {
    text(get::<Vec<u8>>(row, column)?, column)
}

pub fn get_optional_text(row: &PgRow, column: &str) -> Result<Option<String>, StoreError> {
    get::<Option<Vec<u8>>>(row, column)?
        .map(|bytes| text(bytes, column))
        .transpose()
}

fn text(bytes: Vec<u8>, column: &str) -> Result<String, StoreError> {
    String::from_utf8(bytes)
        .map_err(|err| StoreError::Corrupt(format!("column {column} is not UTF-8: {err}")))
}
