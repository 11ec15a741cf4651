//! Ops endpoints: liveness, readiness, Prometheus metrics, the tool catalogue and the bridged
//! MCP servers.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::{Extension, State};
use axum::http::header::CONTENT_TYPE;
use axum::response::IntoResponse;
use serde_json::{Value, json};

use super::HttpState;
use super::error::ApiError;
use super::openapi::{ErrorBody, McpServersBody, StatusBody, ToolsBody};
use crate::permission::Principal;
use crate::service::{ErrorCode, ToolService};

/// The process answers.
#[utoipa::path(get, path = "/healthz", tag = "ops", responses((status = 200, body = StatusBody)))]
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The store is open and sessions are restored, and no shutdown has begun.
#[utoipa::path(get, path = "/readyz", tag = "ops",
    responses((status = 200, body = StatusBody), (status = 503, body = ErrorBody)))]
pub async fn readyz(State(state): State<HttpState>) -> Result<Json<Value>, ApiError> {
    if state.status.shutting_down.load(Ordering::Acquire) {
        return Err(ApiError::new(
            ErrorCode::ShuttingDown,
            "toold is shutting down",
        ));
    }
    if !state.status.ready.load(Ordering::Acquire) {
        return Err(ApiError::new(ErrorCode::ShuttingDown, "toold is starting"));
    }
    Ok(Json(json!({"status": "ready"})))
}

/// Every built-in tool with all its metadata.
#[utoipa::path(get, path = "/v1/tools", tag = "ops", responses((status = 200, body = ToolsBody), (status = 401, body = ErrorBody)))]
pub async fn catalogue(State(service): State<Arc<ToolService>>) -> Json<Value> {
    Json(json!({"tools": service.catalogue()}))
}

/// Every configured MCP server: each running instance (state, pid, session, tools, last
/// error, restarts), and a session-scoped server no session runs (`not_started`).
#[utoipa::path(get, path = "/v1/mcp/servers", tag = "ops", responses((status = 200, body = McpServersBody), (status = 401, body = ErrorBody)))]
pub async fn mcp_servers(
    State(service): State<Arc<ToolService>>,
    Extension(caller): Extension<Principal>,
) -> Json<Value> {
    Json(json!({"servers": service.mcp_servers(&caller)}))
}

/// Prometheus text format (see `telemetry` for the names).
#[utoipa::path(get, path = "/metrics", tag = "ops",
    responses((status = 200, description = "Prometheus text exposition format", body = String, content_type = "text/plain")))]
pub async fn metrics(State(service): State<Arc<ToolService>>) -> impl IntoResponse {
    // The gauges count every server, whoever asks (metrics name no session).
    let servers = service.mcp_servers(&Principal::local());
    crate::telemetry::set_live_gauges(
        service.live_session_count(),
        servers.iter().map(|server| server.state),
    );
    crate::telemetry::set_image_cache_bytes(service.image_cache_bytes());
    (
        [(CONTENT_TYPE, "text/plain; version=0.0.4")],
        crate::telemetry::render(),
    )
}
