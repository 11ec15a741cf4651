//! Event streams (SSE) and offloaded results.
//!
//! SSE frames: `id:` the event's seq, `event:` its type, `data:` the event's JSON. A
//! `Last-Event-ID` header resumes after that seq (replayed from the store, then live); without
//! one, `/v1/events?recent=N` replays the stored events among the newest N seqs first (the
//! dashboard opens with some history; at most [`MAX_RECENT`]). A
//! subscriber that falls behind gets `event: lagged` with `{"resume_after": SEQ}` (no id, so
//! the client's last id stays the last event it received) and the stream ends.

use std::convert::Infallible;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::HeaderMap;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::Deserialize;
use serde_json::{Value, json};

use super::HttpState;
use utoipa::IntoParams;

use super::error::{ApiError, ApiQuery};
use super::openapi::{ErrorBody, EventBody, ResultPage};
use crate::event::EventType;
use crate::permission::Principal;
use crate::service::{ErrorCode, EventItem, EventStart};
use crate::store::EventFilter;

/// Characters `GET /v1/results/{id}` returns when no limit is given, and at most.
const DEFAULT_RESULT_PAGE: u64 = 1 << 20;
const MAX_RESULT_PAGE: u64 = 16 << 20;

#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct EventsQuery {
    /// Only this session's events (empty: every session's).
    session: Option<String>,
    /// Only this tool's events (empty: every tool's).
    tool: Option<String>,
    /// Only events of this type (empty: every type).
    #[serde(rename = "type")]
    event_type: Option<String>,
    /// Without `Last-Event-ID`: replay the stored events among the newest this many seqs
    /// first (at most 100 000).
    #[param(maximum = 100_000)]
    recent: Option<u64>,
}

/// The resume point of an event stream.
#[derive(IntoParams)]
#[into_params(parameter_in = Header)]
#[allow(dead_code)]
pub struct ResumeHeader {
    /// The seq of the last event received: the stream resumes after it.
    #[param(
        rename = "Last-Event-ID",
        required = false,
        minimum = 0,
        maximum = 9_223_372_036_854_775_807_i64
    )]
    last_event_id: u64,
}

/// The most seqs `recent` may reach back.
const MAX_RECENT: u64 = 100_000;

#[utoipa::path(get, path = "/v1/events", tag = "events", params(EventsQuery, ResumeHeader),
    responses((status = 200, description = "SSE: one frame per event", body = EventBody, content_type = "text/event-stream"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn all(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    headers: HeaderMap,
    ApiQuery(query): ApiQuery<EventsQuery>,
) -> Result<Response, ApiError> {
    let event_type = match query.event_type.as_deref() {
        None | Some("") => None,
        Some(text) => Some(EventType::parse(text).ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("unknown event type \"{text}\""),
            )
        })?),
    };
    if let Some(recent) = query.recent.filter(|recent| *recent > MAX_RECENT) {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            format!("recent must be at most {MAX_RECENT}, got {recent}"),
        ));
    }
    let filter = EventFilter {
        session_id: query.session.filter(|s| !s.is_empty()),
        tool: query.tool.filter(|t| !t.is_empty()),
        event_type,
        ..EventFilter::default()
    };
    subscribe(state, &caller, filter, &headers, query.recent).await
}

#[utoipa::path(get, path = "/v1/sessions/{id}/events", tag = "events",
    params(("id" = String, Path), ResumeHeader),
    responses((status = 200, description = "SSE: one frame per event", body = EventBody, content_type = "text/event-stream"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn session(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    // A closed session's own stream is gone; `/v1/events?session=` still replays its events.
    state.service.check_session_open(&caller, &id).await?;
    let filter = EventFilter {
        session_id: Some(id),
        ..EventFilter::default()
    };
    subscribe(state, &caller, filter, &headers, None).await
}

/// `Last-Event-ID` when sent, else `recent` when given, else live only.
async fn subscribe(
    state: HttpState,
    caller: &Principal,
    filter: EventFilter,
    headers: &HeaderMap,
    recent: Option<u64>,
) -> Result<Response, ApiError> {
    let start = match (last_event_id(headers)?, recent) {
        (Some(after), _) => EventStart::After(after),
        (None, Some(recent)) => EventStart::Recent(recent),
        (None, None) => EventStart::Live,
    };
    let items = state
        .service
        .subscribe_events_from(caller, filter, start, state.event_buffer)
        .await?;
    let frames = futures::stream::unfold(items, |mut items| async move {
        items.recv().await.map(|item| (item, items))
    })
    .map(|item| Ok::<_, Infallible>(frame(item)));
    Ok(Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response())
}

fn last_event_id(headers: &HeaderMap) -> Result<Option<u64>, ApiError> {
    let Some(value) = headers.get("last-event-id") else {
        return Ok(None);
    };
    let text = value.to_str().unwrap_or_default().trim();
    // Seqs are stored as signed 64-bit integers.
    text.parse()
        .ok()
        .filter(|seq| *seq <= i64::MAX as u64)
        .map(Some)
        .ok_or_else(|| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("Last-Event-ID must be an event seq, got {value:?}"),
            )
        })
}

fn frame(item: EventItem) -> SseEvent {
    match item {
        EventItem::Event(event) => SseEvent::default()
            .id(event.seq.to_string())
            .event(event.event_type.as_str())
            // An event is plain data with string keys: serialising it cannot fail.
            .data(serde_json::to_string(&*event).unwrap_or_default()),
        EventItem::Lagged { resume_after } => SseEvent::default()
            .event("lagged")
            .data(json!({"resume_after": resume_after}).to_string()),
    }
}

/// A character range: `offset` (default 0) and `limit` (default 1 Mi, at most 16 Mi).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
pub struct ResultQuery {
    offset: Option<u64>,
    limit: Option<u64>,
}

#[utoipa::path(get, path = "/v1/results/{id}", tag = "results", params(("id" = String, Path), ResultQuery),
    responses((status = 200, body = ResultPage), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn result(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,

    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ResultQuery>,
) -> Result<Json<Value>, ApiError> {
    let limit = query
        .limit
        .unwrap_or(DEFAULT_RESULT_PAGE)
        .min(MAX_RESULT_PAGE);
    let page = state
        .service
        .read_result(&caller, &id, query.offset.unwrap_or(0), limit)
        .await?;
    Ok(Json(json!({
        "result_id": page.result_id,
        "total_chars": page.total_chars,
        "offset": page.offset,
        "content": page.content,
    })))
}
