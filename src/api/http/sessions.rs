//! Session endpoints: create, list, inspect, close, tools, interrupt, approvals and the audit
//! log. Each handler unwraps the request, calls the service and shapes the answer.

use std::sync::Arc;
use std::time::SystemTime;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use utoipa::IntoParams;

use super::error::{ApiError, ApiQuery, JsonBody};
use super::openapi::{
    ApprovalsBody, CallsPage, CreateSessionBody, ErrorBody, InterruptBody, ResolveApprovalBody,
    ResolvedBody, SessionBody, SessionList, ToolFormatBody, ToolsBody,
};
use crate::api::gate::CallerToken;
use crate::permission::{Approver, PermissionDecision, Principal};
use crate::service::{
    Closed, CreateSessionRequest, ErrorCode, ResolveApprovalRequest, SessionInfo, ToolService,
};
use crate::store::CallRow;
use crate::tool::{ErrorKind, OffloadedResult};

type Service = State<Arc<ToolService>>;

#[utoipa::path(post, path = "/v1/sessions", tag = "sessions", request_body = CreateSessionBody,
    responses((status = 201, body = SessionBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 502, description = "the environment's image could not be pulled: its registry is down or answered wrongly, or a blob did not match its digest", body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn create(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    JsonBody(request): JsonBody<CreateSessionRequest>,
) -> Result<(StatusCode, Json<SessionInfo>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(service.create_session(&caller, request).await?),
    ))
}

#[utoipa::path(get, path = "/v1/sessions", tag = "sessions",
    responses((status = 200, body = SessionList), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(State(service): Service, Extension(caller): Extension<Principal>) -> Json<Value> {
    Json(json!({"sessions": service.list_sessions(&caller)}))
}

#[utoipa::path(get, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path)),
    responses((status = 200, body = SessionBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    Ok(Json(service.describe_session(&caller, &id).await?))
}

#[utoipa::path(delete, path = "/v1/sessions/{id}", tag = "sessions", params(("id" = String, Path)),
    responses((status = 200, body = SessionBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn close(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SessionInfo>, ApiError> {
    Ok(Json(service.close_session(&caller, &id).await?))
}

/// `format`: `anthropic`, `openai`, `openai_chat`, `mcp` or `toold` (the default).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ToolsQuery {
    #[param(value_type = Option<ToolFormatBody>, inline)]
    format: Option<String>,
}

#[utoipa::path(get, path = "/v1/sessions/{id}/tools", tag = "sessions", params(("id" = String, Path), ToolsQuery),
    responses((status = 200, body = ToolsBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn tools(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ToolsQuery>,
) -> Result<Json<Value>, ApiError> {
    let format = query.format.as_deref().unwrap_or("toold");
    Ok(Json(
        json!({"tools": service.list_tools(&caller, &id, format)?}),
    ))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/interrupt", tag = "sessions", params(("id" = String, Path)),
    responses((status = 200, body = InterruptBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn interrupt(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    service.interrupt(&caller, &id)?;
    Ok(Json(json!({"session_id": id, "interrupted": true})))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/approvals", tag = "approvals", params(("id" = String, Path)),
    responses((status = 200, body = ApprovalsBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn approvals(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"approvals": service.pending_approvals(&caller, &id).await?}),
    ))
}

/// Every pending approval of the sessions this daemon runs that the caller sees (each names
/// its `session_id`).
#[utoipa::path(get, path = "/v1/approvals", tag = "approvals",
    responses((status = 200, body = ApprovalsBody), (status = 401, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn every_approval(
    State(service): Service,
    Extension(caller): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"approvals": service.every_pending_approval(&caller).await?}),
    ))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/approvals/{approval_id}", tag = "approvals",
    params(("id" = String, Path), ("approval_id" = String, Path)), request_body = ResolveApprovalBody,
    responses((status = 200, body = ResolvedBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn resolve_approval(
    State(service): Service,
    Path((id, approval_id)): Path<(String, String)>,
    token: Option<Extension<CallerToken>>,
    Extension(caller): Extension<Principal>,
    JsonBody(request): JsonBody<ResolveApprovalRequest>,
) -> Result<Json<Value>, ApiError> {
    let decision = request.decision.clone();
    let token = token.and_then(|Extension(CallerToken(token))| token);
    let approver = Approver::new("http", token.as_deref());
    service
        .resolve_approval(&caller, &id, &approval_id, request, approver)
        .await?;
    Ok(Json(json!({"id": approval_id, "decision": decision})))
}

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct CallsQuery {
    /// `next_cursor` of the previous page.
    cursor: Option<i64>,
    /// Rows per page (default 100).
    #[param(minimum = 1, maximum = 1000)]
    limit: Option<u32>,
}

/// The most rows a page of the audit log has.
const MAX_CALLS_PAGE: u32 = 1000;

impl CallsQuery {
    fn limit(&self) -> Result<u32, ApiError> {
        match self.limit {
            None => Ok(100),
            Some(limit @ 1..=MAX_CALLS_PAGE) => Ok(limit),
            Some(other) => Err(ApiError::new(
                ErrorCode::InvalidRequest,
                format!("limit must be 1 to {MAX_CALLS_PAGE}, got {other}"),
            )),
        }
    }
}

#[utoipa::path(get, path = "/v1/sessions/{id}/calls", tag = "sessions", params(("id" = String, Path), CallsQuery),
    responses((status = 200, body = CallsPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn calls(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<CallsQuery>,
) -> Result<Json<Value>, ApiError> {
    let page = service
        .list_calls(&caller, &id, query.cursor, query.limit()?, Closed::Gone)
        .await?;
    Ok(Json(calls_page(&page.rows, page.next_cursor)))
}

fn calls_page(rows: &[CallRow], next_cursor: Option<i64>) -> Value {
    let calls: Vec<Value> = rows.iter().map(call_json).collect();
    json!({"calls": calls, "next_cursor": next_cursor})
}

/// The audit rows of one batch (empty for a batch the session does not have): a call's row
/// without paging through the whole session's log.
#[utoipa::path(get, path = "/v1/sessions/{id}/batches/{batch_id}/calls", tag = "batches",
    params(("id" = String, Path), ("batch_id" = String, Path)),
    responses((status = 200, body = CallsPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn batch_calls(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path((id, batch_id)): Path<(String, String)>,
) -> Result<Json<Value>, ApiError> {
    let rows = service
        .batch_calls(&caller, &id, &batch_id, Closed::Gone)
        .await?;
    Ok(Json(calls_page(&rows, None)))
}

/// An audit row as every listing gives it (`GET /v1/calls` too).
pub(super) fn call_json(row: &CallRow) -> Value {
    // Cannot fail: every field is a scalar, a string or a struct with string keys.
    serde_json::to_value(CallJson::of(row, true)).unwrap_or(Value::Null)
}

/// An audit row's JSON, borrowed from the row: the listings turn it into a `Value`, the
/// export writes it straight into its output (no tree built per row). The fields are in
/// name order, the order of the maps the listings always wrote, so the export's lines are
/// the bytes they were.
#[derive(Serialize)]
pub(super) struct CallJson<'a> {
    batch_id: &'a str,
    call_id: &'a str,
    cancelled_by: &'a Option<String>,
    cursor: i64,
    decision: &'a Option<PermissionDecision>,
    duration_ms: f64,
    error_kind: Option<ErrorKind>,
    index: usize,
    /// Left out of an export unless asked for.
    #[serde(skip_serializing_if = "Option::is_none")]
    input: Option<&'a Value>,
    interrupted: bool,
    is_error: bool,
    /// Where the call ran (DESIGN §12; `AuditRecord::isolation`).
    isolation: &'a Option<String>,
    node: &'a str,
    offloaded: &'a Option<OffloadedResult>,
    /// An export's, when asked for: the offloaded output, or null.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(super) output: Option<Option<&'a str>>,
    output_chars: u64,
    principal: &'a Option<String>,
    requested_name: &'a str,
    session_id: &'a str,
    #[serde(serialize_with = "rfc3339_millis")]
    started_at: SystemTime,
    tool: &'a Option<String>,
    trace_id: &'a Option<String>,
}

impl<'a> CallJson<'a> {
    pub(super) fn of(row: &'a CallRow, with_input: bool) -> CallJson<'a> {
        let record = &row.record;
        CallJson {
            batch_id: &record.batch_id,
            call_id: &record.call_id,
            cancelled_by: &record.cancelled_by,
            cursor: row.cursor,
            decision: &record.decision,
            duration_ms: record.duration_ms,
            error_kind: record.error_kind,
            index: record.index,
            input: with_input.then_some(&record.input),
            interrupted: row.interrupted,
            is_error: record.is_error,
            isolation: &record.isolation,
            node: &row.node,
            offloaded: &record.offloaded,
            output: None,
            output_chars: record.output_chars,
            principal: &record.principal,
            requested_name: &record.requested_name,
            session_id: &record.session_id,
            started_at: record.started_at,
            tool: &record.tool,
            trace_id: &record.trace_id,
        }
    }
}

fn rfc3339_millis<S: serde::Serializer>(at: &SystemTime, out: S) -> Result<S::Ok, S::Error> {
    out.collect_str(&humantime::format_rfc3339_millis(*at))
}
