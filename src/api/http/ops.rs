//! Ops endpoints: liveness, readiness and the tool catalogue.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use axum::Json;
use axum::extract::State;
use serde_json::{Value, json};

use super::HttpState;
use super::error::ApiError;
use crate::service::{ErrorCode, ToolService};

/// The process answers.
pub async fn healthz() -> Json<Value> {
    Json(json!({"status": "ok"}))
}

/// The store is open and sessions are restored, and no shutdown has begun.
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
pub async fn catalogue(State(service): State<Arc<ToolService>>) -> Json<Value> {
    Json(json!({"tools": service.catalogue()}))
}
