//! The store's read queries, written once for both dialects: the SQL (numbered `$N`
//! placeholders, which sqlx's SQLite driver binds by number as Postgres does), the values
//! bound to it, and the decoding of what comes back (`rows`).
//!
//! A dialect only says what differs ([`Dialect`]: its binding of text a model chose, its
//! error mapping), and calls the function of each read with its read pool ([`RunReads`])
//! from its area trait impl. Reads that
//! must see a dialect's pending writes first (SQLite flushes its audit journal before listing
//! calls) do that before calling here.
//!
//! Deliberately absent: writes, and reads that are part of a write's transaction (a claim
//! reading the batch that holds its key); those stay with the dialect's write path.

use std::fmt::Write as _;
use std::future::Future;
use std::ops::Range;
use std::time::SystemTime;

use sqlx::query::Query;
use sqlx::{AssertSqlSafe, Database, Executor, IntoArguments, Pool, SqlSafeStr, SqlStr};

use super::columns::{from_i64, millis};
use super::rows::{
    ColumnReader, approval_record, batch_record, call_row, event, node_record, session_record,
};
use super::{
    ApprovalRecord, BatchRecord, CallPage, CallRow, EventFilter, NodeRecord, SessionRecord,
    StoreError,
};
use crate::event::Event;

/// A value bound to a read query's `$N`.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Bind<'a> {
    /// Text the daemon writes (ids, names of its own).
    Text(&'a str),
    /// Text a model or client chose: BYTEA on Postgres (see `rows::ColumnReader`).
    Chosen(&'a str),
    Integer(i64),
    Boolean(bool),
}

/// How errors name a read, formatted only when one fails.
pub(crate) type ReadContext<'a> = &'a (dyn Fn() -> String + Sync);

/// What differs between the dialects' reads, said once per dialect (in its `convert.rs`):
/// how text a model chose is bound and read back, and how a failed read is reported.
pub(crate) trait Dialect: Database {
    /// Binds `value` to the query's next `$N`.
    fn bind<'q>(
        query: Query<'q, Self, Self::Arguments>,
        value: Bind<'q>,
    ) -> Query<'q, Self, Self::Arguments>;

    /// A column holding text a model or client chose (see [`ColumnReader::chosen_text`]).
    fn optional_chosen_text<'r>(
        row: &'r Self::Row,
        column: &str,
    ) -> Result<Option<&'r str>, StoreError>;

    /// A read failed; `context` says what was being read, with the values.
    fn read_error(context: &str, err: sqlx::Error) -> StoreError;
}

/// Where the reads run: a dialect's read pool.
pub(crate) trait RunReads: Send + Sync {
    /// A row as the pool returns it.
    type Row: ColumnReader + Send;

    /// The row `sql` selects, if any.
    fn fetch_optional(
        &self,
        sql: SqlStr,
        binds: &[Bind<'_>],
        context: ReadContext<'_>,
    ) -> impl Future<Output = Result<Option<Self::Row>, StoreError>> + Send;

    /// Every row `sql` selects.
    fn fetch_all(
        &self,
        sql: SqlStr,
        binds: &[Bind<'_>],
        context: ReadContext<'_>,
    ) -> impl Future<Output = Result<Vec<Self::Row>, StoreError>> + Send;
}

impl<DB> RunReads for Pool<DB>
where
    DB: Dialect,
    DB::Row: ColumnReader,
    DB::Arguments: IntoArguments<DB> + 'static,
    for<'c> &'c mut DB::Connection: Executor<'c, Database = DB>,
{
    type Row = DB::Row;

    async fn fetch_optional(
        &self,
        sql: SqlStr,
        binds: &[Bind<'_>],
        context: ReadContext<'_>,
    ) -> Result<Option<DB::Row>, StoreError> {
        bind_all::<DB>(sql, binds)
            .fetch_optional(self)
            .await
            .map_err(|err| DB::read_error(&context(), err))
    }

    async fn fetch_all(
        &self,
        sql: SqlStr,
        binds: &[Bind<'_>],
        context: ReadContext<'_>,
    ) -> Result<Vec<DB::Row>, StoreError> {
        bind_all::<DB>(sql, binds)
            .fetch_all(self)
            .await
            .map_err(|err| DB::read_error(&context(), err))
    }
}

fn bind_all<'q, DB: Dialect>(sql: SqlStr, binds: &[Bind<'q>]) -> Query<'q, DB, DB::Arguments> {
    binds
        .iter()
        .fold(sqlx::query(sql), |query, bind| DB::bind(query, *bind))
}

/// The columns [`session_record`] reads.
macro_rules! session_columns {
    () => {
        "id, working_directory, permission_mode, interactive, owner, created_at, closed_at, \
         options, state, principal"
    };
}

/// The columns [`batch_record`] reads.
macro_rules! batch_columns {
    () => {
        "batch_id, session_id, format, idempotency_key, request_hash, status, call_count, \
         results, created_at, completed_at"
    };
}

/// The columns [`call_row`] reads.
macro_rules! call_columns {
    () => {
        "cursor, node, session_id, batch_id, call_id, call_index, requested_name, tool, input, \
         decision, is_error, error_kind, output_chars, result_id, result_total_chars, \
         started_at, duration_ms, interrupted, cancelled_by, trace_id, principal, isolation"
    };
}

/// The columns [`call_row`] reads, for the queries built at run time (`call_query`).
pub(crate) const CALL_COLUMNS: &str = call_columns!();

/// The columns [`approval_record`] reads.
macro_rules! approval_columns {
    () => {
        "id, session_id, call_id, tool, input, reason, created_at, decision, decided_by, \
         decided_at"
    };
}

/// The columns [`node_record`] reads.
macro_rules! node_columns {
    () => {
        "id, address, started_at, heartbeat_at"
    };
}

pub(crate) async fn session<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
) -> Result<Option<SessionRecord>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions WHERE id = $1"
    );
    let context = || format!("reading session \"{session_id}\"");
    store
        .fetch_optional(SQL.into_sql_str(), &[Bind::Text(session_id)], &context)
        .await?
        .as_ref()
        .map(session_record)
        .transpose()
}

/// Sessions in creation order; closed ones only when asked.
pub(crate) async fn sessions<S: RunReads + ?Sized>(
    store: &S,
    include_closed: bool,
) -> Result<Vec<SessionRecord>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        session_columns!(),
        " FROM sessions WHERE $1 OR closed_at IS NULL ORDER BY ordinal"
    );
    let context = || "listing sessions".to_owned();
    let binds = [Bind::Boolean(include_closed)];
    let rows = store
        .fetch_all(SQL.into_sql_str(), &binds, &context)
        .await?;
    rows.iter().map(session_record).collect()
}

/// A batch of `session_id`'s; another session's batch is `None`.
pub(crate) async fn batch<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
    batch_id: &str,
) -> Result<Option<BatchRecord>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        batch_columns!(),
        " FROM batches WHERE batch_id = $1 AND session_id = $2"
    );
    let context = || format!("reading batch \"{batch_id}\"");
    let binds = [Bind::Text(batch_id), Bind::Text(session_id)];
    store
        .fetch_optional(SQL.into_sql_str(), &binds, &context)
        .await?
        .as_ref()
        .map(batch_record)
        .transpose()
}

/// A page of a session's audit rows after cursor `after`, at most `limit`.
pub(crate) async fn calls<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
    after: Option<i64>,
    limit: u32,
) -> Result<CallPage, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        call_columns!(),
        " FROM calls WHERE session_id = $1 AND cursor > $2 ORDER BY cursor LIMIT $3"
    );
    let after = after.unwrap_or(0);
    let context = || format!("listing the calls of session \"{session_id}\"");
    // One more than asked tells whether another page follows.
    let binds = [
        Bind::Text(session_id),
        Bind::Integer(after),
        Bind::Integer(i64::from(limit) + 1),
    ];
    let fetched = store
        .fetch_all(SQL.into_sql_str(), &binds, &context)
        .await?;
    let more = fetched.len() > limit as usize;
    let rows = fetched
        .iter()
        .take(limit as usize)
        .map(call_row)
        .collect::<Result<Vec<_>, _>>()?;
    let next_cursor = more.then(|| rows.last().map_or(after, |row| row.cursor));
    Ok(CallPage { rows, next_cursor })
}

/// The audit rows of batch `batch_id` of a session, in cursor order.
pub(crate) async fn batch_calls<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
    batch_id: &str,
) -> Result<Vec<CallRow>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        call_columns!(),
        " FROM calls WHERE session_id = $1 AND batch_id = $2 ORDER BY cursor"
    );
    let context =
        || format!("listing the calls of batch \"{batch_id}\" of session \"{session_id}\"");
    let binds = [Bind::Text(session_id), Bind::Text(batch_id)];
    let fetched = store
        .fetch_all(SQL.into_sql_str(), &binds, &context)
        .await?;
    fetched.iter().map(call_row).collect()
}

/// Events with `seq > after_seq` matching `filter`, in seq order, at most `limit`.
pub(crate) async fn events<S: RunReads + ?Sized>(
    store: &S,
    filter: &EventFilter,
    after_seq: u64,
    limit: u32,
) -> Result<Vec<Event>, StoreError> {
    // A seq beyond the databases' integers cannot be stored, so nothing comes after it.
    let Ok(after_seq) = i64::try_from(after_seq) else {
        return Ok(Vec::new());
    };
    // Only the filters given become conditions, so the planner can use the session index.
    let mut sql = String::from(
        "SELECT seq, ts, type, session_id, batch_id, call_id, tool, data, actor FROM events \
         WHERE seq > $1",
    );
    let mut binds = vec![Bind::Integer(after_seq)];
    if let Some(session_id) = filter.session_id.as_deref() {
        // The session and those whose events go with it (its children), one bind each.
        let sessions =
            std::iter::once(session_id).chain(filter.also_sessions.iter().map(String::as_str));
        let mut placeholders = Vec::new();
        for session in sessions {
            binds.push(Bind::Text(session));
            placeholders.push(format!("${}", binds.len()));
        }
        let _ = write!(sql, " AND session_id IN ({})", placeholders.join(", "));
    }
    let conditions = [
        ("tool", filter.tool.as_deref().map(Bind::Chosen)),
        ("type", filter.event_type.map(|t| Bind::Text(t.as_str()))),
    ];
    for (column, value) in conditions {
        if let Some(value) = value {
            binds.push(value);
            // Writing to a `String` cannot fail.
            let _ = write!(sql, " AND {column} = ${}", binds.len());
        }
    }
    binds.push(Bind::Integer(i64::from(limit)));
    let _ = write!(sql, " ORDER BY seq LIMIT ${}", binds.len());
    let context = || format!("reading events after seq {after_seq}");
    // Only the fixed fragments above make the text; every value is bound.
    let sql = AssertSqlSafe(sql).into_sql_str();
    let rows = store.fetch_all(sql, &binds, &context).await?;
    rows.iter().map(event).collect()
}

/// The highest seq stored (0 when none).
pub(crate) async fn last_event_seq<S: RunReads + ?Sized>(store: &S) -> Result<u64, StoreError> {
    let context = || "reading the last event seq".to_owned();
    let sql = "SELECT max(seq) AS last_seq FROM events".into_sql_str();
    let last = match store.fetch_optional(sql, &[], &context).await? {
        Some(row) => row.optional_integer("last_seq")?,
        None => None,
    };
    from_i64(last.unwrap_or(0), "event seq")
}

/// The seq before which pruning deletes events older than `before`: the first event at or
/// after it, else the newest event of all (kept, so that seqs never go back; see
/// `EventStore::prune_events`). Seqs are given in time order, so this walks the primary key
/// from the start, visiting only the rows about to go (no index on `ts` to keep up on every
/// insert). `None` when there are no events.
pub(crate) async fn prune_bound<S: RunReads + ?Sized>(
    store: &S,
    before: SystemTime,
) -> Result<Option<i64>, StoreError> {
    let before = millis(before);
    let context = || format!("pruning events before {before} ms");
    let sql = "SELECT coalesce(\
               (SELECT seq FROM events WHERE ts >= $1 ORDER BY seq LIMIT 1), \
               (SELECT max(seq) FROM events)) AS bound"
        .into_sql_str();
    match store
        .fetch_optional(sql, &[Bind::Integer(before)], &context)
        .await?
    {
        Some(row) => row.optional_integer("bound"),
        None => Ok(None),
    }
}

/// A session's unresolved approvals, oldest first.
pub(crate) async fn pending_approvals<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
) -> Result<Vec<ApprovalRecord>, StoreError> {
    const SQL: &str = concat!(
        "SELECT ",
        approval_columns!(),
        " FROM approvals WHERE session_id = $1 AND decision IS NULL ORDER BY created_at, id"
    );
    let context = || format!("listing the approvals of session \"{session_id}\"");
    let rows = store
        .fetch_all(SQL.into_sql_str(), &[Bind::Text(session_id)], &context)
        .await?;
    rows.iter().map(approval_record).collect()
}

pub(crate) async fn node<S: RunReads + ?Sized>(
    store: &S,
    node_id: &str,
) -> Result<Option<NodeRecord>, StoreError> {
    const SQL: &str = concat!("SELECT ", node_columns!(), " FROM nodes WHERE id = $1");
    let context = || format!("reading node \"{node_id}\"");
    store
        .fetch_optional(SQL.into_sql_str(), &[Bind::Text(node_id)], &context)
        .await?
        .as_ref()
        .map(node_record)
        .transpose()
}

/// Every node, by id.
pub(crate) async fn nodes<S: RunReads + ?Sized>(store: &S) -> Result<Vec<NodeRecord>, StoreError> {
    const SQL: &str = concat!("SELECT ", node_columns!(), " FROM nodes ORDER BY id");
    let context = || "listing nodes".to_owned();
    let rows = store.fetch_all(SQL.into_sql_str(), &[], &context).await?;
    rows.iter().map(node_record).collect()
}

/// An offloaded result's row (`rows::result_head` decodes it).
pub(crate) async fn result_head<S: RunReads + ?Sized>(
    store: &S,
    result_id: &str,
) -> Result<Option<S::Row>, StoreError> {
    let context = || format!("reading result \"{result_id}\"");
    let sql = "SELECT session_id, total_chars, chunk_chars FROM results WHERE id = $1";
    store
        .fetch_optional(sql.into_sql_str(), &[Bind::Text(result_id)], &context)
        .await
}

/// A result's chunks whose offsets are in `starts` (exclusive at both ends), in offset order
/// (`rows::push_chunk` decodes them).
pub(crate) async fn result_chunks<S: RunReads + ?Sized>(
    store: &S,
    result_id: &str,
    starts: Range<i64>,
) -> Result<Vec<S::Row>, StoreError> {
    let context = || format!("reading result \"{result_id}\"");
    let sql = "SELECT char_offset, content FROM result_chunks \
               WHERE result_id = $1 AND char_offset > $2 AND char_offset < $3 \
               ORDER BY char_offset";
    let binds = [
        Bind::Text(result_id),
        Bind::Integer(starts.start),
        Bind::Integer(starts.end),
    ];
    store.fetch_all(sql.into_sql_str(), &binds, &context).await
}
