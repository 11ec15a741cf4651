//! What is SQLite's own in reading and writing rows: its [`Dialect`] (every text is TEXT),
//! [`WriterRow`] (rusqlite's rows on the writer thread, decoded by the same `store::rows`
//! functions as the read pool's) and the mapping of sqlx and rusqlite errors to [`StoreError`]
//! with the offending value in the message; the conversions every backend shares (times,
//! counts, JSON) are in `store::columns` and re-exported here.

use sqlx::Sqlite;
use sqlx::query::Query;
use sqlx::sqlite::{SqliteArguments, SqliteRow};

use crate::store::StoreError;
use crate::store::reads::{Bind, Dialect};
use crate::store::rows::{ColumnReader, get};

pub use crate::store::columns::{from_i64, millis, to_i64, to_json};

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

/// SQLite keeps every text as TEXT (it holds any character), so text a model chose binds and
/// reads back like the daemon's own.
impl Dialect for Sqlite {
    fn bind<'q>(
        query: Query<'q, Sqlite, SqliteArguments>,
        value: Bind<'q>,
    ) -> Query<'q, Sqlite, SqliteArguments> {
        match value {
            Bind::Text(text) | Bind::Chosen(text) => query.bind(text),
            Bind::Integer(value) => query.bind(value),
            Bind::Boolean(value) => query.bind(value),
        }
    }

    fn optional_chosen_text<'r>(
        row: &'r SqliteRow,
        column: &str,
    ) -> Result<Option<&'r str>, StoreError> {
        get(row, column)
    }

    fn read_error(context: &str, err: sqlx::Error) -> StoreError {
        database_error(context, err)
    }
}

/// A row the writer thread read inside a write (a claim reading the batch that holds its key),
/// decoded by the same functions as the pool's rows.
pub struct WriterRow<'a, 'statement>(pub &'a rusqlite::Row<'statement>);

impl WriterRow<'_, '_> {
    /// A column; a missing or mistyped one is corruption.
    fn value<T: rusqlite::types::FromSql>(&self, column: &str) -> Result<T, StoreError> {
        self.0
            .get(column)
            .map_err(|err| StoreError::Corrupt(format!("column {column}: {err}")))
    }
}

impl ColumnReader for WriterRow<'_, '_> {
    fn integer(&self, column: &str) -> Result<i64, StoreError> {
        self.value(column)
    }

    fn optional_integer(&self, column: &str) -> Result<Option<i64>, StoreError> {
        self.value(column)
    }

    fn real(&self, column: &str) -> Result<f64, StoreError> {
        self.value(column)
    }

    fn boolean(&self, column: &str) -> Result<bool, StoreError> {
        self.value(column)
    }

    fn text(&self, column: &str) -> Result<&str, StoreError> {
        self.optional_text(column)?
            .ok_or_else(|| StoreError::Corrupt(format!("column {column} is NULL")))
    }

    /// Borrowed from the row, as the pool's rows are.
    fn optional_text(&self, column: &str) -> Result<Option<&str>, StoreError> {
        let corrupt =
            |err: &dyn std::fmt::Display| StoreError::Corrupt(format!("column {column}: {err}"));
        match self.0.get_ref(column).map_err(|err| corrupt(&err))? {
            rusqlite::types::ValueRef::Null => Ok(None),
            value => value.as_str().map(Some).map_err(|err| corrupt(&err)),
        }
    }

    fn optional_chosen_text(&self, column: &str) -> Result<Option<&str>, StoreError> {
        self.optional_text(column)
    }
}
