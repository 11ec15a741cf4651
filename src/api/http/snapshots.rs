//! Snapshots and forks over HTTP (DESIGN §12): `POST /v1/sessions/{id}/snapshots`,
//! `GET /v1/snapshots`, `GET`/`DELETE /v1/snapshots/{id}`, `POST /v1/sessions/{id}/fork`.
//! A session from a snapshot is `POST /v1/sessions {"from_snapshot"}` (`sessions`).

use std::sync::Arc;

use axum::Json;
use axum::body::Bytes;
use axum::extract::{Extension, Path, State};
use axum::http::StatusCode;
use serde_json::{Value, json};

use super::error::{ApiError, JsonBody, parse_object};
use super::openapi::{
    ErrorBody, ForkBody, ForkedBody, SnapshotBody, SnapshotList, SnapshotRequestBody,
};
use crate::permission::Principal;
use crate::service::{ForkInfo, ForkRequest, SnapshotInfo, SnapshotRequest, ToolService};

type Service = State<Arc<ToolService>>;

#[utoipa::path(post, path = "/v1/sessions/{id}/snapshots", tag = "snapshots", params(("id" = String, Path)),
    request_body(content = Option<SnapshotRequestBody>, description = "optional; an empty body names nothing"),
    responses((status = 201, body = SnapshotBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn take(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    body: Bytes,
) -> Result<(StatusCode, Json<SnapshotInfo>), ApiError> {
    // The body is optional: empty, or `null` as the schema's `oneOf` allows, names nothing.
    let text = body.trim_ascii();
    let request: SnapshotRequest = if text.is_empty() || text == b"null" {
        SnapshotRequest::default()
    } else {
        parse_object(text)?
    };
    Ok((
        StatusCode::CREATED,
        Json(service.take_snapshot(&caller, &id, request).await?),
    ))
}

#[utoipa::path(get, path = "/v1/snapshots", tag = "snapshots",
    responses((status = 200, body = SnapshotList), (status = 401, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(service): Service,
    Extension(caller): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(
        json!({"snapshots": service.list_snapshots(&caller).await?}),
    ))
}

#[utoipa::path(get, path = "/v1/snapshots/{id}", tag = "snapshots", params(("id" = String, Path)),
    responses((status = 200, body = SnapshotBody), (status = 401, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SnapshotInfo>, ApiError> {
    Ok(Json(service.get_snapshot(&caller, &id).await?))
}

#[utoipa::path(delete, path = "/v1/snapshots/{id}", tag = "snapshots", params(("id" = String, Path)),
    responses((status = 200, body = SnapshotBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
) -> Result<Json<SnapshotInfo>, ApiError> {
    Ok(Json(service.delete_snapshot(&caller, &id).await?))
}

#[utoipa::path(post, path = "/v1/sessions/{id}/fork", tag = "snapshots", params(("id" = String, Path)), request_body = ForkBody,
    responses((status = 201, body = ForkedBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn fork(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    JsonBody(request): JsonBody<ForkRequest>,
) -> Result<(StatusCode, Json<ForkInfo>), ApiError> {
    Ok((
        StatusCode::CREATED,
        Json(service.fork_session(&caller, &id, request).await?),
    ))
}
