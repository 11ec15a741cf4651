//! The audit log on Postgres: [`AuditSink`] with group commit, and reading rows back by cursor
//! ([`AuditStore`], rows decoded by `store::rows`).
//!
//! `record` converts its row to column values in the caller's task and hands it to the
//! writer task, which takes everything queued (at most [`GROUP_ROWS`]) and inserts it with one
//! multi-row `INSERT` (one statement, so one implicit transaction and one commit), then
//! answers each caller: a row is durable before its call's result goes anywhere, and
//! concurrent calls share a round trip and a commit. While one group is in flight the next
//! gathers, so the group size follows the load.

use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use sqlx::postgres::PgPool;
use sqlx::{Postgres, QueryBuilder};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::PostgresStore;
use super::convert::database_error;
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::store::columns::AuditRow;
use crate::store::columns::millis;
use crate::store::reads;
use crate::store::{
    AuditStore, CallPage, CallQuery, CallRow, PRUNE_CHUNK_CALLS, StoreError, call_query,
    prune_calls_in_chunks,
};
use crate::tool::ErrorKind;

/// Rows per INSERT at most (17 parameters each, under Postgres' 65 535).
const GROUP_ROWS: usize = 1024;

type Pending = (AuditRow, oneshot::Sender<Result<(), StoreError>>);

/// The task that group-commits audit rows.
pub struct AuditWriter {
    /// `None` once closed: records after `close` fail.
    rows: Mutex<Option<mpsc::UnboundedSender<Pending>>>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl AuditWriter {
    pub fn spawn(pool: PgPool, node: Arc<str>) -> AuditWriter {
        let (sender, receiver) = mpsc::unbounded_channel();
        AuditWriter {
            rows: Mutex::new(Some(sender)),
            task: Mutex::new(Some(tokio::spawn(run(pool, node, receiver)))),
        }
    }

    async fn record(&self, row: AuditRow) -> Result<(), StoreError> {
        let (answer, answered) = oneshot::channel();
        let sent = self
            .rows
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .as_ref()
            .map(|rows| rows.send((row, answer)).is_ok());
        if sent != Some(true) {
            return Err(StoreError::Unavailable("the store is closed".into()));
        }
        answered
            .await
            .unwrap_or_else(|_| Err(StoreError::Unavailable("the audit writer stopped".into())))
    }

    /// Commits what is queued, then stops the task.
    pub async fn close(&self) {
        self.rows.lock().unwrap_or_else(|p| p.into_inner()).take();
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task
            && let Err(err) = task.await
        {
            tracing::error!(error = %err, "audit writer failed");
        }
    }
}

async fn run(pool: PgPool, node: Arc<str>, mut rows: mpsc::UnboundedReceiver<Pending>) {
    let mut group = Vec::with_capacity(GROUP_ROWS);
    while rows.recv_many(&mut group, GROUP_ROWS).await > 0 {
        let outcome = insert(&pool, &node, &group).await;
        for (_, answer) in group.drain(..) {
            let _ = answer.send(outcome.clone());
        }
    }
}

async fn insert(pool: &PgPool, node: &str, group: &[Pending]) -> Result<(), StoreError> {
    let mut query = QueryBuilder::<Postgres>::new(
        "INSERT INTO calls (node, session_id, batch_id, call_id, call_index, requested_name, \
         tool, input, decision, is_error, error_kind, output_chars, result_id, \
         result_total_chars, started_at, duration_ms, cancelled_by, trace_id, principal, \
         isolation) ",
    );
    query.push_values(group, |mut values, (row, _)| {
        values
            .push_bind(node)
            .push_bind(&row.session_id)
            .push_bind(&row.batch_id)
            .push_bind(row.call_id.as_bytes())
            .push_bind(row.call_index)
            .push_bind(row.requested_name.as_bytes())
            .push_bind(row.tool.as_deref().map(str::as_bytes))
            .push_bind(&row.input)
            .push_bind(&row.decision)
            .push_bind(row.is_error)
            .push_bind(row.error_kind.map(ErrorKind::as_str))
            .push_bind(row.output_chars)
            .push_bind(&row.result_id)
            .push_bind(row.result_total_chars)
            .push_bind(row.started_at)
            .push_bind(row.duration_ms)
            .push_bind(&row.cancelled_by)
            .push_bind(&row.trace_id)
            .push_bind(&row.principal)
            .push_bind(&row.isolation);
    });
    query
        .build()
        .execute(pool)
        .await
        .map(|_| ())
        .map_err(|err| database_error(&format!("writing {} audit rows", group.len()), err))
}

#[async_trait]
impl AuditSink for PostgresStore {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError> {
        let row = AuditRow::new(record).map_err(|err| SinkError(err.to_string()))?;
        self.audit
            .record(row)
            .await
            .map_err(|err| SinkError(err.to_string()))
    }

    /// Every row handed to the writer at once, so they share its multi-row INSERTs.
    async fn record_many(&self, records: Vec<AuditRecord>) -> Result<(), SinkError> {
        let rows = AuditRow::for_sink(records)?;
        let written = futures::future::join_all(rows.into_iter().map(|row| self.audit.record(row)));
        written
            .await
            .into_iter()
            .collect::<Result<(), _>>()
            .map_err(|err| SinkError(err.to_string()))
    }
}

#[async_trait]
impl AuditStore for PostgresStore {
    async fn list_calls(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        reads::calls(&self.pool, session_id, after, limit).await
    }

    async fn batch_calls(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Vec<CallRow>, StoreError> {
        reads::batch_calls(&self.pool, session_id, batch_id).await
    }

    async fn query_calls(&self, query: &CallQuery) -> Result<CallPage, StoreError> {
        call_query::filtered_calls(&self.pool, query).await
    }

    async fn prune_calls(&self, before: SystemTime) -> Result<u64, StoreError> {
        let before = millis(before);
        prune_calls_in_chunks(|| self.prune_chunk(before)).await
    }
}

impl PostgresStore {
    /// One chunk of old rows deleted with their offloaded results (whose chunks go by
    /// cascade), in one transaction; how many rows went.
    async fn prune_chunk(&self, before: i64) -> Result<u64, StoreError> {
        let failed =
            |err| database_error(&format!("pruning calls started before {before} ms"), err);
        let mut transaction = self.pool.begin().await.map_err(failed)?;
        let gone: Vec<Option<String>> = sqlx::query_scalar(
            "DELETE FROM calls WHERE cursor IN \
             (SELECT cursor FROM calls WHERE started_at < $1 ORDER BY started_at LIMIT $2) \
             RETURNING result_id",
        )
        .bind(before)
        .bind(PRUNE_CHUNK_CALLS as i64)
        .fetch_all(&mut *transaction)
        .await
        .map_err(failed)?;
        let results: Vec<String> = gone.iter().flatten().cloned().collect();
        if !results.is_empty() {
            sqlx::query("DELETE FROM results WHERE id = ANY($1)")
                .bind(&results)
                .execute(&mut *transaction)
                .await
                .map_err(failed)?;
        }
        transaction.commit().await.map_err(failed)?;
        Ok(gone.len() as u64)
    }
}
