//! The one write connection, shared behind a fair lock.
//!
//! SQLite admits one writer at a time, so the store keeps exactly one connection for writes.
//! It is a plain connection behind a FIFO `tokio::sync::Mutex`, not a pool of one: sqlx's pool
//! pings a connection on every release (in a spawned task, before the next caller may have
//! it), which doubles the round trips of each write and delays the next. The lock costs
//! nothing when free and queues writers fairly when not.
//!
//! A write whose caller is cancelled mid-transaction leaves no trace: sqlx queues the
//! rollback on the connection, and the worker thread runs it before the next statement.

use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteConnectOptions;
use sqlx::{ConnectOptions, Connection};
use tokio::sync::{MappedMutexGuard, Mutex, MutexGuard};

use crate::store::StoreError;

pub struct WriteConnection {
    /// `None` once closed.
    connection: Mutex<Option<SqliteConnection>>,
}

impl WriteConnection {
    pub async fn connect(
        options: &SqliteConnectOptions,
        location: &str,
    ) -> Result<WriteConnection, StoreError> {
        let connection = options.connect().await.map_err(|err| {
            StoreError::Unavailable(format!("cannot open database \"{location}\": {err}"))
        })?;
        Ok(WriteConnection {
            connection: Mutex::new(Some(connection)),
        })
    }

    /// The connection, once the writers ahead have finished; an error after `close`.
    pub async fn lock(&self) -> Result<MappedMutexGuard<'_, SqliteConnection>, StoreError> {
        MutexGuard::try_map(self.connection.lock().await, Option::as_mut)
            .map_err(|_| StoreError::Unavailable("the store is closed".to_owned()))
    }

    /// Waits for the writers ahead, then closes the connection (checkpointing the WAL).
    pub async fn close(&self) {
        let connection = self.connection.lock().await.take();
        if let Some(connection) = connection
            && let Err(err) = connection.close().await
        {
            tracing::warn!(error = %err, "closing the write connection failed");
        }
    }
}
