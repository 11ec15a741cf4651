//! The audit log on Postgres: [`AuditSink`] with group commit, and reading rows back by cursor.
//!
//! `record` converts its row to column values in the caller's task and hands it to the
//! writer task, which takes everything queued (at most [`GROUP_ROWS`]) and inserts it with one
//! multi-row `INSERT` (one statement, so one implicit transaction and one commit), then
//! answers each caller: a row is durable before its call's result goes anywhere, and
//! concurrent calls share a round trip and a commit. While one group is in flight the next
//! gathers, so the group size follows the load.

use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use sqlx::postgres::{PgPool, PgRow};
use sqlx::{Postgres, QueryBuilder};
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::PostgresStore;
use super::convert::{database_error, from_i64, from_json, get, get_optional_text, get_text, time};
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::store::columns::{AuditRow, offloaded, parse_error_kind};
use crate::store::{CallPage, CallRow, StoreError};
use crate::tool::ErrorKind;

/// Rows per INSERT at most (17 parameters each, under Postgres' 65 535).
const GROUP_ROWS: usize = 1024;

/// The columns `call_row` reads, for `concat!` into static SQL.
macro_rules! call_columns {
    () => {
        "cursor, node, session_id, batch_id, call_id, call_index, \
     requested_name, tool, input, decision, is_error, error_kind, output_chars, result_id, \
         result_total_chars, started_at, duration_ms, interrupted"
    };
}

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
         result_total_chars, started_at, duration_ms) ",
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
            .push_bind(row.duration_ms);
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

impl PostgresStore {
    pub(super) async fn list_call_rows(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        let after = after.unwrap_or(0);
        // One more than asked tells whether another page follows.
        const SQL: &str = concat!(
            "SELECT ",
            call_columns!(),
            " FROM calls WHERE session_id = $1 AND cursor > $2 ORDER BY cursor LIMIT $3"
        );
        let fetched = sqlx::query(SQL)
            .bind(session_id)
            .bind(after)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.pool)
            .await
            .map_err(|err| {
                database_error(
                    &format!("listing the calls of session \"{session_id}\""),
                    err,
                )
            })?;
        let more = fetched.len() > limit as usize;
        let rows = fetched
            .iter()
            .take(limit as usize)
            .map(call_row)
            .collect::<Result<Vec<_>, _>>()?;
        let next_cursor = more.then(|| rows.last().map_or(after, |row| row.cursor));
        Ok(CallPage { rows, next_cursor })
    }
}

fn call_row(row: &PgRow) -> Result<CallRow, StoreError> {
    let cursor: i64 = get(row, "cursor")?;
    let what = |column: &str| format!("column {column} of call row {cursor}");
    let error_kind = parse_error_kind(get(row, "error_kind")?, &what("error_kind"))?;
    let offloaded = offloaded(
        get(row, "result_id")?,
        get(row, "result_total_chars")?,
        &what("result_total_chars"),
    )?;
    let record = AuditRecord {
        session_id: get(row, "session_id")?,
        batch_id: get(row, "batch_id")?,
        call_id: get_text(row, "call_id")?,
        index: from_i64(get(row, "call_index")?, &what("call_index"))?,
        requested_name: get_text(row, "requested_name")?,
        tool: get_optional_text(row, "tool")?,
        input: from_json(&get::<String>(row, "input")?, &what("input"))?,
        decision: get::<Option<String>>(row, "decision")?
            .map(|text| from_json(&text, &what("decision")))
            .transpose()?,
        is_error: get(row, "is_error")?,
        error_kind,
        output_chars: from_i64(get(row, "output_chars")?, &what("output_chars"))?,
        offloaded,
        started_at: time(get(row, "started_at")?),
        duration_ms: get(row, "duration_ms")?,
    };
    Ok(CallRow {
        cursor,
        node: get(row, "node")?,
        interrupted: get(row, "interrupted")?,
        record,
    })
}
