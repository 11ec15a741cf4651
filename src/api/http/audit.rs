//! The audit log over HTTP: `GET /v1/calls` (a page across sessions, newest first, with
//! filters) and `GET /v1/calls/export` (every row the filters select, streamed as NDJSON or
//! CSV). Each handler turns the query string into a `CallFilter`, calls the service and
//! shapes the answer.
//!
//! Query strings are strict: an unknown parameter, a malformed time (`since`, `until` are
//! RFC 3339) or an unknown decision, error kind, order, format or include is a 400 naming it.
//! `GET /v1/calls?session=ID` keeps what it always did (the session's rows, `404` for a
//! session the caller may not see, the `{"calls", "next_cursor"}` shape); its rows now come
//! newest first like every listing here (`order=asc` gives them oldest first).
//!
//! The export's columns (CSV, in this order; NDJSON objects have the same names, with
//! `decision` the whole decision object as the listing gives it):
//! [`CSV_COLUMNS`], then `input` and `output` when `include=` names them. `output` is the
//! call's offloaded output (the store keeps no other), empty when there is none.

use std::borrow::Cow;
use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::body::{Body, Bytes};
use axum::extract::{Extension, State};
use axum::http::header;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};
use utoipa::IntoParams;

use super::error::{ApiError, ApiQuery};
use super::openapi::{CallsPage, ErrorBody};
use super::sessions::{CallJson, call_json};
use crate::permission::Principal;
use crate::service::{ErrorCode, ExportedCall, ToolService};
use crate::store::{CallDecision, CallFilter, CallOrder, CallQuery, MAX_CALL_PAGE};
use crate::tool::ErrorKind;

type Service = State<Arc<ToolService>>;

/// The CSV export's columns, before the included ones.
pub const CSV_COLUMNS: [&str; 21] = [
    "cursor",
    "started_at",
    "session_id",
    "batch_id",
    "call_id",
    "index",
    "principal",
    "requested_name",
    "tool",
    "decision",
    "decided_by",
    "is_error",
    "error_kind",
    "output_chars",
    "result_id",
    "duration_ms",
    "trace_id",
    "node",
    "interrupted",
    "cancelled_by",
    // Appended (columns are only ever added at the end, so a reader by position goes on
    // working): where the call ran, DESIGN §12.
    "isolation",
];

/// The filters both routes take, and the extra parameters of each, as one struct per route
/// (`deny_unknown_fields` cannot see through `#[serde(flatten)]`).
macro_rules! audit_params {
    ($(#[$meta:meta])* $name:ident { $($(#[$field_meta:meta])* $field:ident: $type:ty,)* }) => {
        $(#[$meta])*
        #[derive(Deserialize, IntoParams, Default)]
        #[into_params(parameter_in = Query)]
        #[serde(deny_unknown_fields)]
        pub struct $name {
            /// Only this session's calls (a session the caller may not see is a 404).
            session: Option<String>,
            /// Only this batch's calls.
            batch_id: Option<String>,
            /// Only calls run by this principal's requests.
            principal: Option<String>,
            /// Only calls of this tool: the resolved name or the name the model used.
            tool: Option<String>,
            /// `allow` or `deny`, as the rows' decision says.
            decision: Option<String>,
            /// Who decided (the rows' `decided_by.by`): `mode`, `rule`, `hook`, `approver`,
            /// `timeout`.
            decided_by: Option<String>,
            /// Only failed calls of this kind (`permission_denied`, `timeout`, ...).
            error_kind: Option<String>,
            /// Only failed (`true`) or successful (`false`) calls.
            is_error: Option<bool>,
            /// Calls started at or after this RFC 3339 time.
            since: Option<String>,
            /// Calls started before this RFC 3339 time.
            until: Option<String>,
            /// Only calls of this trace (32 hex digits).
            trace_id: Option<String>,
            $($(#[$field_meta])* $field: $type,)*
        }

        impl $name {
            fn filter(&self) -> Result<CallFilter, ApiError> {
                Ok(CallFilter {
                    session_id: self.session.clone(),
                    session_principal: None,
                    batch_id: self.batch_id.clone(),
                    principal: self.principal.clone(),
                    tool: self.tool.clone(),
                    decision: self.decision.as_deref().map(decision).transpose()?,
                    decided_by: self.decided_by.clone(),
                    error_kind: self.error_kind.as_deref().map(error_kind).transpose()?,
                    is_error: self.is_error,
                    since: self.since.as_deref().map(|t| rfc3339("since", t)).transpose()?,
                    until: self.until.as_deref().map(|t| rfc3339("until", t)).transpose()?,
                    trace_id: self.trace_id.clone(),
                })
            }
        }
    };
}

audit_params! {
    /// `GET /v1/calls`: filters, and the page.
    AuditQuery {
        /// `next_cursor` of the previous page.
        cursor: Option<i64>,
        /// Rows per page (default 100).
        #[param(minimum = 1, maximum = 1000)]
        limit: Option<u32>,
        /// `desc` (newest first, the default) or `asc`.
        order: Option<String>,
    }
}

audit_params! {
    /// `GET /v1/calls/export`: filters, the format and what to include.
    ExportQuery {
        /// `ndjson` (the default) or `csv`.
        format: Option<String>,
        /// A comma-separated list of `input`, `output`: the columns left out unless asked
        /// for (they can be large and sensitive).
        include: Option<String>,
    }
}

fn invalid(message: String) -> ApiError {
    ApiError::new(ErrorCode::InvalidRequest, message)
}

fn decision(text: &str) -> Result<CallDecision, ApiError> {
    CallDecision::parse(text)
        .ok_or_else(|| invalid(format!("decision must be allow or deny, got \"{text}\"")))
}

fn error_kind(text: &str) -> Result<ErrorKind, ApiError> {
    ErrorKind::parse(text).ok_or_else(|| invalid(format!("unknown error_kind \"{text}\"")))
}

/// An RFC 3339 time (`2026-01-31T12:00:00Z`, an offset, fractions of a second), by chrono's
/// parser: any year, `Z` or a numeric offset, upper or lower case `T`/`Z`.
fn rfc3339(name: &str, text: &str) -> Result<SystemTime, ApiError> {
    chrono::DateTime::parse_from_rfc3339(text)
        .map(SystemTime::from)
        .map_err(|err| {
            invalid(format!(
                "{name} must be an RFC 3339 time (2026-01-31T12:00:00Z), got \"{text}\": {err}"
            ))
        })
}

/// The audit log across sessions, newest first; `cursor` pages on while rows are inserted,
/// skipping and repeating nothing. An agent sees its own sessions' rows only.
#[utoipa::path(get, path = "/v1/calls", tag = "audit", params(AuditQuery),
    responses((status = 200, body = CallsPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    ApiQuery(query): ApiQuery<AuditQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = match query.limit {
        None => 100,
        Some(limit @ 1..=MAX_CALL_PAGE) => limit,
        Some(other) => {
            return Err(invalid(format!(
                "limit must be 1 to {MAX_CALL_PAGE}, got {other}"
            )));
        }
    };
    let order = match query.order.as_deref() {
        None | Some("desc") => CallOrder::NewestFirst,
        Some("asc") => CallOrder::OldestFirst,
        Some(other) => {
            return Err(invalid(format!(
                "order must be asc or desc, got \"{other}\""
            )));
        }
    };
    let query = CallQuery {
        filter: query.filter()?,
        order,
        after: query.cursor,
        limit,
    };
    let page = service.query_calls(&caller, query).await?;
    let calls: Vec<Value> = page.rows.iter().map(call_json).collect();
    Ok(Json(
        json!({"calls": calls, "next_cursor": page.next_cursor}),
    ))
}

/// Which export shape, and what it carries besides the columns.
#[derive(Clone, Copy)]
struct ExportShape {
    csv: bool,
    input: bool,
    output: bool,
}

impl ExportQuery {
    fn shape(&self) -> Result<ExportShape, ApiError> {
        let csv = match self.format.as_deref() {
            None | Some("ndjson") => false,
            Some("csv") => true,
            Some(other) => {
                return Err(invalid(format!(
                    "format must be ndjson or csv, got \"{other}\""
                )));
            }
        };
        let mut shape = ExportShape {
            csv,
            input: false,
            output: false,
        };
        for part in self.include.as_deref().unwrap_or("").split(',') {
            match part.trim() {
                "" => {}
                "input" => shape.input = true,
                "output" => shape.output = true,
                other => {
                    return Err(invalid(format!(
                        "include takes input and output, got \"{other}\""
                    )));
                }
            }
        }
        Ok(shape)
    }
}

/// Every row the filters select, newest first, streamed from the store as NDJSON (one JSON
/// object a line) or CSV (a header, then a row a call); `input` and `output` only with
/// `include=`. An error after the first row ends the body early (the status was sent).
#[utoipa::path(get, path = "/v1/calls/export", tag = "audit", params(ExportQuery),
    responses((status = 200, description = "a row per call: NDJSON (`application/x-ndjson`) or, with `format=csv`, CSV (`text/csv`)", content_type = "application/x-ndjson"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn export(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    ApiQuery(query): ApiQuery<ExportQuery>,
) -> Result<Response, ApiError> {
    let shape = query.shape()?;
    let rows = service
        .export_calls(&caller, query.filter()?, shape.output)
        .await?;
    crate::telemetry::record_audit_export(if shape.csv { "csv" } else { "ndjson" });
    let header = shape
        .csv
        .then(|| Ok(Bytes::from(csv_line(&csv_header(shape)))));
    // A page of rows is one chunk of the body: a frame per row cost more than its encoding.
    let body = futures::stream::iter(header).chain(rows.map(move |page| match page {
        Ok(page) => Ok(Bytes::from(encode_page(&page, shape))),
        Err(err) => {
            tracing::warn!(error = %err, "an audit export failed part way");
            Err(std::io::Error::other(err.to_string()))
        }
    }));
    let content_type = if shape.csv {
        "text/csv; charset=utf-8"
    } else {
        "application/x-ndjson"
    };
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(body),
    )
        .into_response())
}

fn csv_header(shape: ExportShape) -> Vec<String> {
    let mut columns: Vec<String> = CSV_COLUMNS.iter().map(|c| (*c).to_owned()).collect();
    if shape.input {
        columns.push("input".to_owned());
    }
    if shape.output {
        columns.push("output".to_owned());
    }
    columns
}

/// A page of the export: a JSON line or a CSV record per row.
fn encode_page(page: &[ExportedCall], shape: ExportShape) -> Vec<u8> {
    if !shape.csv {
        let mut out = Vec::new();
        for exported in page {
            let mut row = CallJson::of(&exported.row, shape.input);
            if shape.output {
                row.output = Some(exported.output.as_deref());
            }
            // Writing to a `Vec` cannot fail, nor can serializing the row (see `call_json`).
            let _ = serde_json::to_writer(&mut out, &row);
            out.push(b'\n');
        }
        return out;
    }
    let mut writer = csv_writer();
    for exported in page {
        let mut cells: Vec<Cow<'_, str>> = CSV_COLUMNS
            .iter()
            .map(|column| csv_cell(column, exported))
            .collect();
        if shape.input {
            cells.push(exported.row.record.input.to_string().into());
        }
        if shape.output {
            cells.push(exported.output.as_deref().unwrap_or("").into());
        }
        // Writing to a `Vec` cannot fail.
        let _ = writer.write_record(cells.iter().map(|cell| cell.as_bytes()));
    }
    writer.into_inner().unwrap_or_default()
}

/// One CSV cell: the text of the JSON field of the same name (a string as it is, a number
/// or a boolean as JSON writes it, null empty), with `decision` the verdict alone and
/// `decided_by` who gave it. Read from the row, not from its JSON: no tree built per row.
fn csv_cell<'a>(column: &str, exported: &'a ExportedCall) -> Cow<'a, str> {
    let (row, record) = (&exported.row, &exported.row.record);
    let text = |value: &'a Option<String>| Cow::Borrowed(value.as_deref().unwrap_or(""));
    let flag = |value: bool| Cow::Borrowed(if value { "true" } else { "false" });
    match column {
        "cursor" => row.cursor.to_string().into(),
        "started_at" => humantime::format_rfc3339_millis(record.started_at)
            .to_string()
            .into(),
        "session_id" => record.session_id.as_str().into(),
        "batch_id" => record.batch_id.as_str().into(),
        "call_id" => record.call_id.as_str().into(),
        "index" => record.index.to_string().into(),
        "principal" => text(&record.principal),
        "requested_name" => record.requested_name.as_str().into(),
        "tool" => text(&record.tool),
        "decision" => record
            .decision
            .as_ref()
            .map_or("", |d| if d.is_allow() { "allow" } else { "deny" })
            .into(),
        "decided_by" => record
            .decision
            .as_ref()
            .map_or("", |d| d.decided_by().label())
            .into(),
        "is_error" => flag(record.is_error),
        "error_kind" => record.error_kind.map_or("", |k| k.as_str()).into(),
        "output_chars" => record.output_chars.to_string().into(),
        "result_id" => record
            .offloaded
            .as_ref()
            .map_or("", |o| o.result_id.as_str())
            .into(),
        // As JSON writes it (`1.0`, not Rust's `1`).
        "duration_ms" => serde_json::Number::from_f64(record.duration_ms)
            .map_or(String::new(), |n| n.to_string())
            .into(),
        "trace_id" => text(&record.trace_id),
        "node" => row.node.as_str().into(),
        "interrupted" => flag(row.interrupted),
        "cancelled_by" => text(&record.cancelled_by),
        "isolation" => text(&record.isolation),
        // Every column of `CSV_COLUMNS` has its arm (a unit test checks them all).
        _ => Cow::Borrowed(""),
    }
}

fn csv_writer() -> csv::Writer<Vec<u8>> {
    csv::WriterBuilder::new()
        .terminator(csv::Terminator::CRLF)
        .from_writer(Vec::new())
}

/// One CSV record (RFC 4180 quoting, by the `csv` crate), line ending included.
fn csv_line(cells: &[String]) -> Vec<u8> {
    let mut writer = csv_writer();
    // Writing to a `Vec` cannot fail, and `into_inner` only flushes into it.
    let _ = writer.write_record(cells);
    writer.into_inner().unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use std::time::{Duration, SystemTime};

    use serde_json::{Value, json};

    use super::{CSV_COLUMNS, csv_cell};
    use crate::dispatch::AuditRecord;
    use crate::permission::{DecidedBy, PermissionDecision, PermissionLevel};
    use crate::service::ExportedCall;
    use crate::store::CallRow;
    use crate::tool::{ErrorKind, OffloadedResult};

    fn exported(duration_ms: f64, filled: bool) -> ExportedCall {
        let some = |text: &str| filled.then(|| text.to_owned());
        ExportedCall {
            row: CallRow {
                cursor: 42,
                node: "node-a".to_owned(),
                interrupted: filled,
                record: AuditRecord {
                    session_id: "sess_1".to_owned(),
                    batch_id: "batch_1".to_owned(),
                    call_id: "call \"quoted\", 1".to_owned(),
                    index: 3,
                    requested_name: "Bash".to_owned(),
                    tool: some("bash"),
                    input: json!({"command": "ls"}),
                    decision: filled.then_some(PermissionDecision::Allow {
                        decided_by: DecidedBy::Mode {
                            mode: PermissionLevel::ReadOnly,
                        },
                    }),
                    is_error: filled,
                    error_kind: filled.then_some(ErrorKind::HookBlocked),
                    output_chars: 12,
                    offloaded: filled.then(|| OffloadedResult {
                        result_id: "res_1".to_owned(),
                        total_chars: 12,
                    }),
                    started_at: SystemTime::UNIX_EPOCH + Duration::from_millis(1_700_000_000_123),
                    duration_ms,
                    cancelled_by: some("interrupt"),
                    trace_id: some("4bf92f3577b34da6a3ce929d0e0e4736"),
                    principal: some("ci-agent"),
                    isolation: some("bwrap"),
                },
            },
            output: None,
        }
    }

    /// Each column's cell is the text of the listing's JSON field of that name.
    #[test]
    fn every_csv_cell_is_the_text_of_its_json_field() {
        for (duration, filled) in [(1.0, true), (3.25, false), (0.001, true)] {
            let exported = exported(duration, filled);
            let object = super::call_json(&exported.row);
            for column in CSV_COLUMNS {
                let expected = match (column, &object[column]) {
                    ("decision", _) => if filled { "allow" } else { "" }.to_owned(),
                    ("decided_by", _) => if filled { "mode" } else { "" }.to_owned(),
                    ("result_id", _) => if filled { "res_1" } else { "" }.to_owned(),
                    (_, Value::Null) => String::new(),
                    (_, Value::String(text)) => text.clone(),
                    (_, other) => other.to_string(),
                };
                assert_eq!(csv_cell(column, &exported), expected, "{column}");
            }
        }
    }
}
