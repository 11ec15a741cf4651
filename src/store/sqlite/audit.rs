//! The audit log on SQLite: [`AuditSink`] with group commit, and reading rows back by cursor.
//!
//! Group commit: `record` converts its row to column values (in the caller's task, so JSON
//! rendering runs in parallel), hands it to the single writer task and waits for an
//! acknowledgement. The writer takes everything queued (up to [`GROUP_ROWS`]) and inserts it
//! in one transaction (one statement, see [`INSERT_GROUP`]); the acknowledgements go out only
//! after that transaction commits. A caller waits at most for the commit in progress plus its
//! own, and one commit serves hundreds of concurrent calls. While a group commits, the next
//! one queues up, so an idle system commits a lone row at once (no waiting for company).

use std::sync::{Arc, LazyLock, Mutex};

use async_trait::async_trait;
use sqlx::SqliteConnection;
use sqlx::sqlite::SqliteRow;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use super::SqliteStore;
use super::convert::{database_error, from_i64, from_json, get, millis, time, to_i64, to_json};
use super::writer::WriteConnection;
use crate::dispatch::{AuditRecord, AuditSink, SinkError};
use crate::store::{CallPage, CallRow, StoreError};
use crate::tool::{ErrorKind, OffloadedResult};

/// At most this many rows go into one transaction (a power of two, see [`INSERT_GROUP`]);
/// at 16 parameters a row the largest statement has 8 193, under SQLite's 32 766.
const GROUP_ROWS: usize = 512;

/// Rows waiting for the writer before `record` itself waits (back-pressure).
const QUEUE_ROWS: usize = 8192;

/// The per-row columns of `calls`, in bind order (the node is bound once per statement).
const ROW_COLUMNS: [&str; 15] = [
    "session_id",
    "batch_id",
    "call_id",
    "call_index",
    "requested_name",
    "tool",
    "input",
    "decision",
    "is_error",
    "error_kind",
    "output_chars",
    "result_id",
    "result_total_chars",
    "started_at",
    "duration_ms",
];

/// `INSERT_GROUP[k]` inserts up to `2^k` rows in one statement: the node id, then a `VALUES`
/// list of `2^k` tuples, each a row's columns plus its position, unused tuples all NULL and
/// filtered out. Parameters are all anonymous `?`: sqlx numbers anonymous ones apart from
/// `?N` ones, so mixing them would bind the wrong values.
///
/// A group is thus one statement whatever its size: one round trip to the connection's worker
/// thread, and (a single statement in autocommit mode) its own transaction, all rows or none,
/// durable when it returns. Ten shapes, each prepared once and kept in the statement cache;
/// padding to a power of two costs at most twice the binds, far less than preparing a
/// statement per group size. `ORDER BY` the position keeps cursors in arrival order.
static INSERT_GROUP: LazyLock<Vec<String>> = LazyLock::new(|| {
    let columns = ROW_COLUMNS.join(", ");
    let selected: Vec<String> = (1..=ROW_COLUMNS.len())
        .map(|n| format!("column{n}"))
        .collect();
    let tuple = format!("({})", vec!["?"; ROW_COLUMNS.len() + 1].join(", "));
    (0..=GROUP_ROWS.trailing_zeros())
        .map(|k| {
            format!(
                "INSERT INTO calls (node, {columns}) SELECT ?, {} FROM (VALUES {}) \
                 WHERE column1 IS NOT NULL ORDER BY column{}",
                selected.join(", "),
                vec![tuple.as_str(); 1 << k].join(", "),
                ROW_COLUMNS.len() + 1,
            )
        })
        .collect()
});

const SELECT_CALLS: &str = "SELECT cursor, node, session_id, batch_id, call_id, call_index, \
     requested_name, tool, input, decision, is_error, error_kind, output_chars, result_id, \
     result_total_chars, started_at, duration_ms FROM calls \
     WHERE session_id = ?1 AND cursor > ?2 ORDER BY cursor LIMIT ?3";

/// An audit row as column values, ready to bind. Built in the caller's task, so rendering
/// the JSON columns runs in parallel, not in the writer.
struct AuditRow {
    session_id: String,
    batch_id: String,
    call_id: String,
    call_index: i64,
    requested_name: String,
    tool: Option<String>,
    input: String,
    decision: Option<String>,
    is_error: bool,
    error_kind: Option<&'static str>,
    output_chars: i64,
    result_id: Option<String>,
    result_total_chars: Option<i64>,
    started_at: i64,
    duration_ms: f64,
}

impl AuditRow {
    fn new(record: AuditRecord) -> Result<AuditRow, StoreError> {
        let what = format!("audit row for call \"{}\"", record.call_id);
        let (result_id, result_total_chars) = match record.offloaded {
            Some(OffloadedResult {
                result_id,
                total_chars,
            }) => (Some(result_id), Some(to_i64(total_chars, "total_chars")?)),
            None => (None, None),
        };
        Ok(AuditRow {
            call_index: to_i64(record.index, "call index")?,
            input: to_json(&record.input, &what)?,
            decision: record
                .decision
                .as_ref()
                .map(|d| to_json(d, &what))
                .transpose()?,
            output_chars: to_i64(record.output_chars, "output_chars")?,
            error_kind: record.error_kind.map(ErrorKind::as_str),
            started_at: millis(record.started_at),
            session_id: record.session_id,
            batch_id: record.batch_id,
            call_id: record.call_id,
            requested_name: record.requested_name,
            tool: record.tool,
            is_error: record.is_error,
            result_id,
            result_total_chars,
            duration_ms: record.duration_ms,
        })
    }
}

// Rows move through the channel by value: boxing them would cost an allocation per row to
// save space on `Shutdown`, which is sent once.
#[expect(clippy::large_enum_variant)]
enum Command {
    Record(AuditRow, oneshot::Sender<Result<(), SinkError>>),
    /// Commit what is queued, then stop.
    Shutdown,
}

/// The handle to the writer task.
pub struct AuditWriter {
    sender: mpsc::Sender<Command>,
    task: Mutex<Option<JoinHandle<()>>>,
}

impl AuditWriter {
    pub fn spawn(writer: Arc<WriteConnection>, node_id: Arc<str>, location: &str) -> AuditWriter {
        let (sender, receiver) = mpsc::channel(QUEUE_ROWS);
        let task = tokio::spawn(run(writer, node_id, location.to_owned(), receiver));
        AuditWriter {
            sender,
            task: Mutex::new(Some(task)),
        }
    }

    async fn record(&self, row: AuditRow) -> Result<(), SinkError> {
        let closed =
            || SinkError(StoreError::Unavailable("the store is closed".to_owned()).to_string());
        let (ack, acked) = oneshot::channel();
        self.sender
            .send(Command::Record(row, ack))
            .await
            .map_err(|_| closed())?;
        acked.await.map_err(|_| closed())?
    }

    /// Commits every row queued so far and waits for the task to end.
    pub async fn shutdown(&self) {
        // An error means the task has already ended: nothing left to commit.
        let _ = self.sender.send(Command::Shutdown).await;
        let task = self.task.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(task) = task
            && let Err(err) = task.await
        {
            tracing::error!(error = %err, "audit writer task failed");
        }
    }
}

/// The writer task: drain, commit, acknowledge, until shut down or every handle is gone.
async fn run(
    writer: Arc<WriteConnection>,
    node_id: Arc<str>,
    location: String,
    mut receiver: mpsc::Receiver<Command>,
) {
    let mut commands = Vec::with_capacity(GROUP_ROWS);
    let mut rows = Vec::with_capacity(GROUP_ROWS);
    let mut acks = Vec::with_capacity(GROUP_ROWS);
    loop {
        if receiver.recv_many(&mut commands, GROUP_ROWS).await == 0 {
            return;
        }
        let mut stop = false;
        for command in commands.drain(..) {
            match command {
                Command::Record(row, ack) => {
                    rows.push(row);
                    acks.push(ack);
                }
                Command::Shutdown => stop = true,
            }
        }
        let outcome = commit_group(&writer, &node_id, &location, &rows).await;
        if let Err(err) = &outcome {
            tracing::error!(rows = rows.len(), error = %err, "audit rows not written");
        }
        for ack in acks.drain(..) {
            // The caller may have given up waiting (its task was cancelled); nothing to do.
            let _ = ack.send(outcome.clone());
        }
        rows.clear();
        if stop {
            return;
        }
        // The callers just acknowledged are runnable now, and most will record their next row
        // at once. Letting them run before draining the queue makes the next group one commit
        // for all of them instead of a lone row followed by the rest. A lone writer pays a
        // reschedule (about a microsecond), not a timer.
        tokio::task::yield_now().await;
    }
}

/// Commits `rows` in one transaction. The `calls` table has no constraint one row could
/// violate (no unique keys, no references), so a failed group means a failed database, and
/// every row in it gets the error; retrying rows one by one would only fail 512 times.
async fn commit_group(
    writer: &WriteConnection,
    node_id: &str,
    location: &str,
    rows: &[AuditRow],
) -> Result<(), SinkError> {
    if rows.is_empty() {
        return Ok(());
    }
    let mut connection = writer
        .lock()
        .await
        .map_err(|err| SinkError(err.to_string()))?;
    insert_rows(&mut connection, node_id, rows)
        .await
        .map_err(|err| {
            let first = &rows[0].call_id;
            let context = format!(
                "writing {} audit rows (the first of call \"{first}\") to \"{location}\"",
                rows.len()
            );
            SinkError(database_error(&context, err).to_string())
        })
}

/// Inserts `rows` (at most [`GROUP_ROWS`]) in one statement.
async fn insert_rows(
    connection: &mut SqliteConnection,
    node_id: &str,
    rows: &[AuditRow],
) -> Result<(), sqlx::Error> {
    let shape = rows.len().max(1).next_power_of_two();
    let sql: &'static str = &INSERT_GROUP[shape.trailing_zeros() as usize];
    let mut insert = sqlx::query(sql).bind(node_id);
    for (position, row) in rows.iter().enumerate() {
        insert = insert
            .bind(row.session_id.as_str())
            .bind(row.batch_id.as_str())
            .bind(row.call_id.as_str())
            .bind(row.call_index)
            .bind(row.requested_name.as_str())
            .bind(row.tool.as_deref())
            .bind(row.input.as_str())
            .bind(row.decision.as_deref())
            .bind(row.is_error)
            .bind(row.error_kind)
            .bind(row.output_chars)
            .bind(row.result_id.as_deref())
            .bind(row.result_total_chars)
            .bind(row.started_at)
            .bind(row.duration_ms)
            // Bounded by GROUP_ROWS.
            .bind(position as i64);
    }
    // Explicit NULLs: a cached statement may keep an earlier execution's bindings.
    for _ in rows.len()..shape {
        for _ in 0..=ROW_COLUMNS.len() {
            insert = insert.bind(None::<i64>);
        }
    }
    insert.execute(connection).await?;
    Ok(())
}

#[async_trait]
impl AuditSink for SqliteStore {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError> {
        let row = AuditRow::new(record).map_err(|err| SinkError(err.to_string()))?;
        self.audit.record(row).await
    }
}

impl SqliteStore {
    pub(super) async fn list_call_rows(
        &self,
        session_id: &str,
        after: Option<i64>,
        limit: u32,
    ) -> Result<CallPage, StoreError> {
        let after = after.unwrap_or(0);
        // One more than asked tells whether another page follows.
        let fetched = sqlx::query(SELECT_CALLS)
            .bind(session_id)
            .bind(after)
            .bind(i64::from(limit) + 1)
            .fetch_all(&self.readers)
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

fn call_row(row: &SqliteRow) -> Result<CallRow, StoreError> {
    let cursor: i64 = get(row, "cursor")?;
    let what = |column: &str| format!("column {column} of call row {cursor}");
    let error_kind = get::<Option<String>>(row, "error_kind")?
        .map(|kind| {
            ErrorKind::parse(&kind).ok_or_else(|| {
                StoreError::Corrupt(format!(
                    "{}: unknown error kind \"{kind}\"",
                    what("error_kind")
                ))
            })
        })
        .transpose()?;
    let offloaded = match (
        get::<Option<String>>(row, "result_id")?,
        get::<Option<i64>>(row, "result_total_chars")?,
    ) {
        (Some(result_id), Some(total)) => Some(OffloadedResult {
            result_id,
            total_chars: from_i64(total, &what("result_total_chars"))?,
        }),
        _ => None,
    };
    let record = AuditRecord {
        session_id: get(row, "session_id")?,
        batch_id: get(row, "batch_id")?,
        call_id: get(row, "call_id")?,
        index: from_i64(get(row, "call_index")?, &what("call_index"))?,
        requested_name: get(row, "requested_name")?,
        tool: get(row, "tool")?,
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
        record,
    })
}
