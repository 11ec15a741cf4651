//! The audit log as a security team reads it: which rows a query across sessions selects
//! ([`CallFilter`]), in which order and from where ([`CallQuery`]), and the one SQL both
//! dialects run for it, built here from the filters given (only those become conditions, so
//! each dialect's planner can use the index of the most selective one; the indexes are in
//! `migrations/sqlite/0010_audit_queries.sql` and `migrations/postgres/0007_audit_queries.sql`,
//! those for a decision with a tool in `migrations/sqlite/0011_audit_decision_tool.sql` and
//! `migrations/postgres/0008_audit_decision_tool.sql`).
//!
//! Paging is keyset on `cursor`, the insertion-ordered key each dialect gives a row when it
//! is committed (SQLite: max + 1 on its one writer thread; Postgres: an identity drawn by its
//! one group-commit task, which commits its inserts one after the other). Newest first, a
//! page holds the rows with a cursor below the previous page's last one: rows inserted while
//! a client pages get cursors above every row it has seen, so they never push a row into a
//! page already read (nothing repeats) nor out of the next one (nothing is skipped).
//!
//! `decision` and `decided_by` are read from columns the migrations generate from the row's
//! decision JSON (`decision_kind`, `decided_by`), so neither write path changed for them.
//!
//! Deliberately absent: who may see which rows (the service narrows the filter for an agent:
//! [`CallFilter::session_principal`]), parsing query strings (the doors), streaming (an export
//! reads page after page of this query, see `service::audit`).

use std::fmt::Write as _;
use std::time::SystemTime;

use sqlx::{AssertSqlSafe, SqlSafeStr};

use super::columns::millis;
use super::reads::{Bind, CALL_COLUMNS, RunReads};
use super::rows::call_row;
use super::{CallPage, CallRow, StoreError};
use crate::tool::ErrorKind;

/// The most rows one [`CallQuery`] returns.
pub const MAX_CALL_PAGE: u32 = 1000;

/// Which audit rows a query selects; every condition given must hold (`None`: any).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallFilter {
    pub session_id: Option<String>,
    /// Only rows of sessions belonging to this principal (an agent sees its own sessions'
    /// rows only; another's are absent, not an error).
    pub session_principal: Option<String>,
    pub batch_id: Option<String>,
    /// The principal whose request ran the call.
    pub principal: Option<String>,
    /// The resolved tool's name or the name the model used.
    pub tool: Option<String>,
    pub decision: Option<CallDecision>,
    /// Who decided, as the row's `decided_by.by` says (`mode`, `rule`, `hook`, `approver`,
    /// `timeout`).
    pub decided_by: Option<String>,
    pub error_kind: Option<ErrorKind>,
    pub is_error: Option<bool>,
    /// Calls started at or after this time.
    pub since: Option<SystemTime>,
    /// Calls started before this time.
    pub until: Option<SystemTime>,
    pub trace_id: Option<String>,
}

/// A permission decision as the rows carry it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallDecision {
    Allow,
    Deny,
}

impl CallDecision {
    pub fn as_str(self) -> &'static str {
        match self {
            CallDecision::Allow => "allow",
            CallDecision::Deny => "deny",
        }
    }

    /// `allow` or `deny` (`denied`/`allowed` too, as a person types them).
    pub fn parse(text: &str) -> Option<CallDecision> {
        match text {
            "allow" | "allowed" => Some(CallDecision::Allow),
            "deny" | "denied" => Some(CallDecision::Deny),
            _ => None,
        }
    }
}

/// Which way a query walks the log.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum CallOrder {
    /// Highest cursor first (the default across sessions).
    #[default]
    NewestFirst,
    /// Lowest cursor first (a session's log as it was written).
    OldestFirst,
}

/// A page of the audit log: `filter`'s rows in `order`, after cursor `after` (beyond it in
/// that order), at most `limit` (clamped to [`MAX_CALL_PAGE`]; 0 gives an empty page whose
/// `next_cursor` says whether rows remain).
#[derive(Clone, Debug, Default, PartialEq)]
pub struct CallQuery {
    pub filter: CallFilter,
    pub order: CallOrder,
    pub after: Option<i64>,
    pub limit: u32,
}

/// Runs `query` on a dialect's read pool.
///
/// `tool` matches the resolved or the requested name. An `OR` of the two would keep either
/// dialect from walking an index that ends in the cursor (SQLite sorted every `bash` row of
/// ten million for one page: 3.1 s), so the query is two keyset walks instead, one per name,
/// each stopping after a page, put together in cursor order (`UNION ALL`: Postgres cannot
/// compare the JSON columns a `UNION` would) and a row both walks found kept once.
pub(crate) async fn filtered_calls<S: RunReads + ?Sized>(
    store: &S,
    query: &CallQuery,
) -> Result<CallPage, StoreError> {
    let limit = query.limit.min(MAX_CALL_PAGE);
    let (conditions, mut binds) = conditions(&query.filter);
    let (comparison, direction) = match query.order {
        CallOrder::NewestFirst => ("<", "DESC"),
        CallOrder::OldestFirst => (">", "ASC"),
    };
    let mut walk = format!("SELECT {CALL_COLUMNS} FROM calls WHERE TRUE{conditions}");
    if let Some(after) = query.after {
        binds.push(Bind::Integer(after));
        let _ = write!(walk, " AND cursor {comparison} ${}", binds.len());
    }
    // One more than asked tells whether another page follows.
    binds.push(Bind::Integer(i64::from(limit) + 1));
    let order = format!(" ORDER BY cursor {direction}");
    let page = format!("{order} LIMIT ${}", binds.len());
    let sql = match query.filter.tool.as_deref() {
        None => format!("{walk}{page}"),
        Some(tool) => {
            binds.push(Bind::Chosen(tool));
            let name = binds.len();
            // Not limited again: a row both walks found counts once, after the merge.
            format!(
                "SELECT * FROM ({walk} AND tool = ${name}{page}) AS by_tool \
                 UNION ALL SELECT * FROM ({walk} AND requested_name = ${name}{page}) \
                 AS by_requested_name{order}"
            )
        }
    };
    let context = || format!("listing calls matching {:?}", query.filter);
    // Only the fixed fragments of `conditions` make the text; every value is bound.
    let sql = AssertSqlSafe(sql).into_sql_str();
    let fetched = store.fetch_all(sql, &binds, &context).await?;
    let mut rows = Vec::with_capacity(fetched.len().min(limit as usize + 1));
    for row in &fetched {
        let row = call_row(row)?;
        // In cursor order, a row both walks found comes twice in a row.
        if rows
            .last()
            .is_none_or(|last: &CallRow| last.cursor != row.cursor)
        {
            rows.push(row);
        }
    }
    let more = rows.len() > limit as usize;
    rows.truncate(limit as usize);
    // An empty page that says rows remain (limit 0) continues from where it started.
    let start = match query.order {
        CallOrder::NewestFirst => i64::MAX,
        CallOrder::OldestFirst => 0,
    };
    let next_cursor = more.then(|| {
        rows.last()
            .map_or(query.after.unwrap_or(start), |row| row.cursor)
    });
    Ok(CallPage { rows, next_cursor })
}

/// ` AND …` for every filter given but `tool` (see [`filtered_calls`]), with its binds
/// numbered from `$1`.
fn conditions(filter: &CallFilter) -> (String, Vec<Bind<'_>>) {
    let mut sql = String::new();
    let mut binds = Vec::new();
    fn text(value: &Option<String>) -> Option<Bind<'_>> {
        value.as_deref().map(Bind::Text)
    }
    let conditions = [
        ("session_id = ?", text(&filter.session_id)),
        (
            "session_id IN (SELECT id FROM sessions WHERE principal = ?)",
            text(&filter.session_principal),
        ),
        ("batch_id = ?", text(&filter.batch_id)),
        ("principal = ?", text(&filter.principal)),
        (
            "decision_kind = ?",
            filter.decision.map(|d| Bind::Text(d.as_str())),
        ),
        ("decided_by = ?", text(&filter.decided_by)),
        (
            "error_kind = ?",
            filter.error_kind.map(|k| Bind::Text(k.as_str())),
        ),
        ("is_error = ?", filter.is_error.map(Bind::Boolean)),
        (
            "started_at >= ?",
            filter.since.map(|t| Bind::Integer(millis(t))),
        ),
        (
            "started_at < ?",
            filter.until.map(|t| Bind::Integer(millis(t))),
        ),
        ("trace_id = ?", text(&filter.trace_id)),
    ];
    for (template, value) in conditions {
        if let Some(value) = value {
            binds.push(value);
            // A template's `?`s all stand for its one value. Writing to a `String` cannot fail.
            let placeholder = format!("${}", binds.len());
            let _ = write!(sql, " AND {}", template.replace('?', &placeholder));
        }
    }
    (sql, binds)
}
