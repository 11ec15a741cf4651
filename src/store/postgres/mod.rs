//! [`PostgresStore`]: the [`Store`] several daemons share, on one Postgres database through
//! sqlx's `PgPool`.
//!
//! This file owns opening the database (pool, migrations, the event listener) and the `Store`
//! impl, which delegates to one file per area: `audit` (audit rows, group-committed by a task
//! of their own), `results` (offloaded outputs in chunks), `sessions` (sessions and batches),
//! `events` (numbered by the store, NOTIFY on commit, a LISTEN task waking readers),
//! `approvals`, `nodes` (heartbeats, claims on silent daemons, adoption, interrupted calls);
//! `convert` holds column access and the error mapping.
//!
//! Which schema: the URL's own (`options=-csearch_path%3D…` selects one), so tests and
//! separate fleets can share a server. Durability: Postgres' default (`synchronous_commit =
//! on`), so a write that returned is on disk.
//!
//! Deliberately absent: SQL outside this folder, and any cache of rows: every daemon may write,
//! so reads go to the database.

mod approvals;
mod audit;
mod convert;
mod events;
mod nodes;
mod results;
mod sessions;

use std::ops::Range;
use std::str::FromStr;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::Value;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use tokio::sync::watch;

use super::{
    ApprovalRecord, BatchClaim, BatchRecord, CallPage, EventFilter, NodeRecord, SessionRecord,
    Store, StoreError,
};
use crate::event::Event;
use crate::tool::ToolResult;
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
impl Store for PostgresStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        self.insert_session_row(session).await
    }

    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError> {
        self.save_session_state_row(session_id, state).await
    }

    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        self.get_session_row(session_id).await
    }

    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError> {
        self.list_session_rows(include_closed).await
    }

    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError> {
        self.close_session_row(session_id).await
    }

    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        self.list_call_rows(session_id, after, limit).await
    }

    async fn claim_batch(&self, batch: &BatchRecord) -> Result<BatchClaim, StoreError> {
        self.claim_batch_row(batch).await
    }

    async fn complete_batch(
        &self,
        batch_id: &str,
        results: &[ToolResult],
    ) -> Result<(), StoreError> {
        self.complete_batch_row(batch_id, results).await
    }

    async fn get_batch(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Option<BatchRecord>, StoreError> {
        self.get_batch_row(session_id, batch_id).await
    }

    async fn append_events(&self, events: &[Arc<Event>]) -> Result<(), StoreError> {
        self.append_event_rows(events, false).await.map(|_| ())
    }

    async fn append_events_numbered(
        &self,
        events: &[Arc<Event>],
    ) -> Result<Range<u64>, StoreError> {
        self.append_event_rows(events, true).await
    }

    fn event_wakeups(&self) -> Option<watch::Receiver<u64>> {
        Some(self.listener.wakeups())
    }

    async fn read_events(
        &self,
        filter: &EventFilter,
        after_seq: u64,
        limit: u32,
    ) -> Result<Vec<Event>, StoreError> {
        self.read_event_rows(filter, after_seq, limit).await
    }

    async fn last_event_seq(&self) -> Result<u64, StoreError> {
        self.last_event_seq_row().await
    }

    async fn prune_events(&self, before: SystemTime) -> Result<u64, StoreError> {
        self.prune_event_rows(before).await
    }

    async fn insert_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError> {
        self.insert_approval_row(approval).await
    }

    async fn pending_approvals(&self, session_id: &str) -> Result<Vec<ApprovalRecord>, StoreError> {
        self.pending_approval_rows(session_id).await
    }

    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        self.resolve_approval_row(approval_id, decision, decided_by)
            .await
    }

    fn is_shared(&self) -> bool {
        true
    }

    async fn heartbeat(&self, node: &NodeRecord) -> Result<(), StoreError> {
        self.heartbeat_row(node).await
    }

    async fn get_node(&self, node_id: &str) -> Result<Option<NodeRecord>, StoreError> {
        self.get_node_row(node_id).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        self.list_node_rows().await
    }

    async fn claim_silent_node(
        &self,
        node_id: &str,
        silent_since: SystemTime,
        by: &str,
    ) -> Result<bool, StoreError> {
        self.claim_silent_node_row(node_id, silent_since, by).await
    }

    async fn adopt_session(
        &self,
        session_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError> {
        self.adopt_session_row(session_id, from, to).await
    }

    async fn mark_interrupted_calls(&self, session_id: &str) -> Result<u64, StoreError> {
        self.mark_interrupted_call_rows(session_id).await
    }

    /// Idempotent: each step does nothing the second time.
    async fn close(&self) {
        // Rows queued before the close are committed and answered first.
        self.audit.close().await;
        self.listener.stop();
        self.pool.close().await;
    }
}
