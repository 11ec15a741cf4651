//! What is Postgres' own in reading and writing rows: its [`Dialect`] (text a model or client
//! chose is BYTEA holding UTF-8, see the migration's header) and the mapping of sqlx errors to
//! [`StoreError`] with the offending value in the message. The conversions every backend
//! shares (times, counts, JSON) are in `store::columns` and re-exported here.

use sqlx::Postgres;
use sqlx::postgres::{PgArguments, PgRow};
use sqlx::query::Query;

use crate::store::StoreError;
use crate::store::reads::{Bind, Dialect};
use crate::store::rows::get;

pub use crate::store::columns::{from_i64, millis, to_i64, to_json};

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

/// Text a model or client chose is BYTEA holding UTF-8 (see the migration's header): bound as
/// bytes, read back as text borrowed from the row.
impl Dialect for Postgres {
    fn bind<'q>(
        query: Query<'q, Postgres, PgArguments>,
        value: Bind<'q>,
    ) -> Query<'q, Postgres, PgArguments> {
        match value {
            Bind::Text(text) => query.bind(text),
            Bind::Chosen(text) => query.bind(text.as_bytes()),
            Bind::Integer(value) => query.bind(value),
            Bind::Boolean(value) => query.bind(value),
        }
    }

    fn optional_chosen_text<'r>(
        row: &'r PgRow,
        column: &str,
    ) -> Result<Option<&'r str>, StoreError> {
        get::<_, Option<&[u8]>>(row, column)?
            .map(|bytes| {
                std::str::from_utf8(bytes).map_err(|err| {
                    StoreError::Corrupt(format!("column {column} is not UTF-8: {err}"))
                })
            })
            .transpose()
    }

    fn read_error(context: &str, err: sqlx::Error) -> StoreError {
        database_error(context, err)
    }
}
