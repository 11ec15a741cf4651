//! [`PostgresStore`]: the [`Store`](super::Store) several daemons share, on one Postgres
//! database through sqlx's `PgPool`.
//!
//! This file owns opening the database (pool, migrations, the event listener) and closing it
//! ([`StoreLifecycle`]); each area trait is implemented once, in the file of its area:
//! `sessions`, `batches` (idempotent claims), `audit` (audit rows, group-committed by a task
//! of their own, read back by cursor), `results` (the statements for offloaded outputs),
//! `events` (numbered by the store, NOTIFY on commit, a LISTEN task waking readers),
//! `approvals`, `nodes` (heartbeats, claims on silent daemons, adoption, interrupted calls).
//! Rows read back are decoded by `store::rows`, shared with SQLite; `convert` holds Postgres'
//! column access and the error mapping.
//!
//! Which schema: the URL's own (`options=-csearch_path%3D…` selects one), so tests and
//! separate fleets can share a server. Durability: Postgres' default (`synchronous_commit =
//! on`), so a write that returned is on disk.
//!
//! Deliberately absent: SQL outside this folder, and any cache of rows: every daemon may write,
//! so reads go to the database.

mod approvals;
mod audit;
mod batches;
mod convert;
mod events;
mod nodes;
mod results;
mod sessions;
mod snapshots;

use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};

use super::{StoreError, StoreLifecycle};
use audit::AuditWriter;
use events::EventListener;

/// Connections in the pool: the audit writer's, the listener's, and room for the doors'
/// concurrent readers and writers.
const CONNECTIONS: u32 = 16;

/// How long a caller waits for a pooled connection before the store reports itself
/// unavailable.
const ACQUIRE_TIMEOUT: Duration = Duration::from_secs(30);

/// The store on one Postgres database (schema). Cheap to share behind an `Arc`.
pub struct PostgresStore {
    pool: PgPool,
    /// Group-commits audit rows.
    audit: AuditWriter,
    /// LISTENs for other daemons' events.
    listener: EventListener,
    /// This daemon's node id, written into every audit row.
    node_id: Arc<str>,
}

impl PostgresStore {
    /// Connects to `url` (`postgres://…`) and applies the migrations in `migrations/postgres`
    /// (under an advisory lock, so daemons starting together migrate once).
    pub async fn open(url: &str, node_id: &str) -> Result<PostgresStore, StoreError> {
        let shown = redact(url);
        let options = PgConnectOptions::from_str(url)
            .map_err(|err| StoreError::Invalid(format!("database URL \"{shown}\": {err}")))?;
        let pool = PgPoolOptions::new()
            .max_connections(CONNECTIONS)
            .acquire_timeout(ACQUIRE_TIMEOUT)
            .connect_with(options)
            .await
            .map_err(|err| {
                StoreError::Unavailable(format!("cannot open database \"{shown}\": {err}"))
            })?;
        sqlx::migrate!("./migrations/postgres")
            .run(&pool)
            .await
            .map_err(|err| StoreError::Migration(format!("database \"{shown}\": {err}")))?;
        let node_id: Arc<str> = Arc::from(node_id);
        let listener = EventListener::start(&pool).await?;
        Ok(PostgresStore {
            audit: AuditWriter::spawn(pool.clone(), node_id.clone()),
            listener,
            pool,
            node_id,
        })
    }

    /// The node id written into audit rows.
    pub fn node_id(&self) -> &str {
        &self.node_id
    }
}

/// The URL without its password, for messages and logs.
fn redact(url: &str) -> String {
    match url::Url::parse(url) {
        Ok(mut parsed) if parsed.password().is_some() => {
            // Setting a password fails only for URLs that cannot have one, and this one has.
            let _ = parsed.set_password(Some("***"));
            parsed.to_string()
        }
        _ => url.to_owned(),
    }
}

#[async_trait]
impl StoreLifecycle for PostgresStore {
    /// Idempotent: each step does nothing the second time.
    async fn close(&self) {
        // Rows queued before the close are committed and answered first.
        self.audit.close().await;
        self.listener.stop();
        self.pool.close().await;
    }
}
