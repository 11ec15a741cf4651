//! The HTTP provider door (DESIGN §11), for languages without a good gRPC stack:
//! `POST /v1/providers` registers a connection, `GET /v1/providers/{connection_id}/invocations`
//! streams its invocations (SSE), progress and results are POSTed back, `DELETE` ends it;
//! `GET /v1/providers` lists the connected providers.
//!
//! Reconnect rules: a registered connection must open its stream within
//! [`OPEN_STREAM_WITHIN`] (else it is dropped); it takes calls from registration on (they wait
//! in its queue until the stream is open), and it lives while its one stream is open. A closed
//! stream ends the connection, failing its calls in flight: to go on, register again (the
//! provider name stays the principal's as long as another connection holds it). A second
//! stream for the same connection is refused (409).
//!
//! SSE frames: `event: invoke` with `{invocation_id, session_id, call_id, tool, input,
//! deadline_unix_ms, traceparent, child_session?}`; `event: cancel` with `{invocation_id,
//! reason}`.

use std::collections::HashMap;
use std::convert::Infallible;
use std::sync::{Mutex, MutexGuard};
use std::time::Duration;

use axum::Json;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use axum::response::sse::{Event as SseEvent, KeepAlive, Sse};
use axum::response::{IntoResponse, Response};
use serde::Deserialize;
use serde_json::{Value, json};

use super::HttpState;
use super::error::{ApiError, JsonBody};
use super::openapi::{
    ErrorBody, ProviderProgressBody, ProviderRegisteredBody, ProviderRegistrationBody,
    ProviderResultBody, ProvidersBody, ResultAcceptedBody,
};
use crate::permission::Principal;
use crate::service::{ErrorCode, Outbound, ProviderConnection, Registration, Transport};

/// How long a registered connection may wait before opening its stream.
pub const OPEN_STREAM_WITHIN: Duration = Duration::from_secs(30);

/// Connections registered whose stream is not open yet, by id.
#[derive(Default)]
pub struct Parked {
    connections: Mutex<HashMap<String, ProviderConnection>>,
}

impl Parked {
    fn lock(&self) -> MutexGuard<'_, HashMap<String, ProviderConnection>> {
        // Only whole entries are inserted or removed under this lock.
        self.connections.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// A progress report: any JSON value.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ProgressRequest {
    data: Value,
}

/// A call's result.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResultRequest {
    output: String,
    #[serde(default)]
    is_error: bool,
}

/// The connected providers, their connections and tools (an agent sees its own).
#[utoipa::path(get, path = "/v1/providers", tag = "providers",
    responses((status = 200, body = ProvidersBody), (status = 401, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
) -> Json<Value> {
    Json(json!({"providers": state.service.providers(&caller)}))
}

/// Registers a provider connection; open its stream next (within 30 s).
#[utoipa::path(post, path = "/v1/providers", tag = "providers", request_body = ProviderRegistrationBody,
    responses((status = 201, body = ProviderRegisteredBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 409, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn register(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    JsonBody(registration): JsonBody<Registration>,
) -> Result<(StatusCode, Json<Value>), ApiError> {
    let connection = state
        .service
        .provide_tools(&caller, registration, Transport::Http)?;
    let answer = json!({
        "provider": connection.provider,
        "connection_id": connection.id,
        "tools": connection.tools,
    });
    let id = connection.id.clone();
    state.providers.lock().insert(id.clone(), connection);
    let parked = state.providers.clone();
    tokio::spawn(async move {
        tokio::time::sleep(OPEN_STREAM_WITHIN).await;
        // Still parked: its stream never opened; dropping it disconnects.
        let stale = parked.lock().remove(&id);
        drop(stale);
    });
    Ok((StatusCode::CREATED, Json(answer)))
}

/// The connection's invocations (SSE); the connection lives while this stream is open (and
/// the daemon is not shutting down).
#[utoipa::path(get, path = "/v1/providers/{connection_id}/invocations", tag = "providers", params(("connection_id" = String, Path)),
    responses((status = 200, description = "SSE: `invoke` and `cancel` frames", content_type = "text/event-stream"), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody)))]
pub async fn invocations(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    Path(connection_id): Path<String>,
) -> Result<Response, ApiError> {
    state.service.own_connection(&caller, &connection_id)?;
    let Some(connection) = state.providers.lock().remove(&connection_id) else {
        return Err(ApiError::new(
            ErrorCode::Conflict,
            format!("provider connection \"{connection_id}\" already has its stream open"),
        ));
    };
    let stopping = state.service.shutting_down();
    let frames = futures::stream::unfold(
        (connection, stopping),
        |(mut connection, stopping)| async move {
            let message = tokio::select! {
                message = connection.outbound.recv() => message?,
                () = stopping.cancelled() => return None,
            };
            Some((Ok::<_, Infallible>(frame(message)), (connection, stopping)))
        },
    );
    Ok(Sse::new(frames)
        .keep_alive(KeepAlive::default())
        .into_response())
}

/// Progress of an invocation in flight (ignored when it is not).
#[utoipa::path(post, path = "/v1/providers/{connection_id}/invocations/{invocation_id}/progress", tag = "providers",
    params(("connection_id" = String, Path), ("invocation_id" = String, Path)), request_body = ProviderProgressBody,
    responses((status = 204), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn progress(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    Path((connection_id, invocation_id)): Path<(String, String)>,
    JsonBody(request): JsonBody<ProgressRequest>,
) -> Result<StatusCode, ApiError> {
    state
        .service
        .provider_progress(&caller, &connection_id, &invocation_id, request.data)?;
    Ok(StatusCode::NO_CONTENT)
}

/// The result of an invocation; `accepted` is false when no call of that id was in flight
/// (unknown, answered, or cancelled: ignored).
#[utoipa::path(post, path = "/v1/providers/{connection_id}/invocations/{invocation_id}/result", tag = "providers",
    params(("connection_id" = String, Path), ("invocation_id" = String, Path)), request_body = ProviderResultBody,
    responses((status = 200, body = ResultAcceptedBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody)))]
pub async fn result(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    Path((connection_id, invocation_id)): Path<(String, String)>,
    JsonBody(request): JsonBody<ResultRequest>,
) -> Result<Json<Value>, ApiError> {
    let accepted = state.service.provider_result(
        &caller,
        &connection_id,
        &invocation_id,
        request.output,
        request.is_error,
    )?;
    Ok(Json(json!({"accepted": accepted})))
}

/// Ends a connection: its calls in flight fail naming the provider.
#[utoipa::path(delete, path = "/v1/providers/{connection_id}", tag = "providers", params(("connection_id" = String, Path)),
    responses((status = 204), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody)))]
pub async fn disconnect(
    State(state): State<HttpState>,
    Extension(caller): Extension<Principal>,
    Path(connection_id): Path<String>,
) -> Result<StatusCode, ApiError> {
    state.service.disconnect_provider(&caller, &connection_id)?;
    // A connection whose stream never opened is parked here too.
    let parked = state.providers.lock().remove(&connection_id);
    drop(parked);
    Ok(StatusCode::NO_CONTENT)
}

/// The hub's message as an SSE frame.
fn frame(message: Outbound) -> SseEvent {
    let (name, data) = match message {
        Outbound::Invoke(invocation) => {
            let mut data = json!({
                "invocation_id": invocation.invocation_id,
                "session_id": invocation.session_id,
                "call_id": invocation.call_id,
                "tool": invocation.tool,
                "input": invocation.input,
                "deadline_unix_ms": invocation.deadline_unix_ms,
                "traceparent": invocation.traceparent,
            });
            if let Some(child) = invocation.child_session {
                data["child_session"] =
                    json!({"session_id": child.session_id, "token": child.token});
            }
            ("invoke", data)
        }
        Outbound::Cancel {
            invocation_id,
            reason,
        } => (
            "cancel",
            json!({"invocation_id": invocation_id, "reason": reason}),
        ),
    };
    SseEvent::default().event(name).data(data.to_string())
}
