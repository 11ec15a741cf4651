//! Image endpoints (DESIGN §12): `POST /v1/images/pull {"image"}` pulls ahead of time,
//! `GET /v1/images` lists the cache, `DELETE /v1/images/{digest}` removes an unused image
//! (409 while a session uses it). Each handler unwraps the request and calls the service.

use std::sync::Arc;

use axum::Json;
use axum::extract::{Extension, Path, State};
use serde::Deserialize;
use serde_json::{Value, json};

use super::error::{ApiError, JsonBody};
use super::openapi::{ErrorBody, ImageBody, ImagesBody, PullImageBody};
use crate::permission::Principal;
use crate::service::{ImageInfo, ToolService};

type Service = State<Arc<ToolService>>;

/// `POST /v1/images/pull`.
#[derive(Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PullRequest {
    image: String,
}

/// Pulls an image into the cache (a tag is resolved again even when cached).
#[utoipa::path(post, path = "/v1/images/pull", tag = "images", request_body = PullImageBody,
    responses((status = 200, body = ImageBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody), (status = 502, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn pull(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    JsonBody(request): JsonBody<PullRequest>,
) -> Result<Json<ImageInfo>, ApiError> {
    Ok(Json(service.pull_image(&caller, &request.image).await?))
}

/// The cached images.
#[utoipa::path(get, path = "/v1/images", tag = "images",
    responses((status = 200, body = ImagesBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn list(
    State(service): Service,
    Extension(caller): Extension<Principal>,
) -> Result<Json<Value>, ApiError> {
    Ok(Json(json!({"images": service.list_images(&caller)?})))
}

/// Removes a cached image no session uses (admins only).
#[utoipa::path(delete, path = "/v1/images/{digest}", tag = "images", params(("digest" = String, Path, description = "sha256:…")),
    responses((status = 200, body = ImageBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 409, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn delete(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(digest): Path<String>,
) -> Result<Json<ImageInfo>, ApiError> {
    Ok(Json(service.delete_image(&caller, &digest)?))
}
