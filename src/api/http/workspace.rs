//! The workspace in and out over HTTP (DESIGN §12): `PUT`/`GET /v1/sessions/{id}/files/{path}`
//! and `POST`/`GET /v1/sessions/{id}/archive`. Handlers translate: the body becomes a stream
//! the service reads as it arrives, the service's stream becomes the response body, and the
//! headers (`Range`, `If-None-Match`, `ETag`, `Content-Range`) are read and written here.
//!
//! A file path is the rest of the URL after `files/`: one segment is the documented route,
//! deeper paths (`files/src/lib.rs`) reach the same handlers through a wildcard route.

use std::sync::Arc;

use axum::Json;
use axum::body::Body;
use axum::extract::{Extension, Path, State};
use axum::http::{HeaderMap, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::TryStreamExt;
use serde::Deserialize;
use serde_json::Value;
use utoipa::IntoParams;

use super::error::{ApiError, ApiQuery};
use super::openapi::{ErrorBody, UploadedBody};
use crate::permission::Principal;
use crate::service::{RangeAnswer, ToolService, UploadBody};

type Service = State<Arc<ToolService>>;

/// The request body, read as it arrives.
fn upload_body(body: Body) -> UploadBody {
    let stream = body.into_data_stream().map_err(std::io::Error::other);
    Box::pin(tokio_util::io::StreamReader::new(stream))
}

/// `mode`: the file's permission bits, octal (`644`, `755`).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct PutQuery {
    #[param(pattern = "^[0-7]{3,4}$")]
    mode: Option<String>,
}

#[utoipa::path(put, path = "/v1/sessions/{id}/files/{path}", tag = "workspace",
    params(("id" = String, Path), ("path" = String, Path, description = "relative to the workspace; may hold slashes, sent as they are or percent-encoded (`%2F`)"), PutQuery),
    request_body(content = Vec<u8>, content_type = "application/octet-stream"),
    responses((status = 200, body = UploadedBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn put_file(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path((id, path)): Path<(String, String)>,
    ApiQuery(query): ApiQuery<PutQuery>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    let answer = service
        .upload_file(&caller, &id, &path, query.mode, upload_body(body))
        .await?;
    Ok(Json(answer))
}

/// [`put_file`] for a path of several segments.
pub async fn put_nested_file(
    state: Service,
    caller: Extension<Principal>,
    Path((id, first, rest)): Path<(String, String, String)>,
    query: ApiQuery<PutQuery>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    put_file(
        state,
        caller,
        Path((id, format!("{first}/{rest}"))),
        query,
        body,
    )
    .await
}

#[utoipa::path(get, path = "/v1/sessions/{id}/files/{path}", tag = "workspace",
    params(("id" = String, Path), ("path" = String, Path, description = "relative to the workspace; may hold slashes, sent as they are or percent-encoded (`%2F`)")),
    responses((status = 200, description = "the file's bytes", content_type = "application/octet-stream"), (status = 206, description = "the range asked for"), (status = 304, description = "If-None-Match named this ETag"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 416, description = "the range starts past the end"), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_file(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path((id, path)): Path<(String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    let text = |name| {
        headers
            .get(name)
            .and_then(|v: &HeaderValue| v.to_str().ok())
    };
    let download = service
        .download_file(
            &caller,
            &id,
            &path,
            text(header::RANGE),
            text(header::IF_NONE_MATCH),
        )
        .await?;
    let mut response = Response::builder()
        .header(header::ETAG, &download.etag)
        .header(header::ACCEPT_RANGES, "bytes");
    let size = download.size;
    response = if download.not_modified {
        response.status(StatusCode::NOT_MODIFIED)
    } else {
        match download.range {
            RangeAnswer::Whole => response
                .status(StatusCode::OK)
                .header(header::CONTENT_TYPE, "application/octet-stream")
                .header(header::CONTENT_LENGTH, size),
            RangeAnswer::Part { start, end } => response
                .status(StatusCode::PARTIAL_CONTENT)
                .header(header::CONTENT_TYPE, "application/octet-stream")
                .header(header::CONTENT_LENGTH, end - start + 1)
                .header(header::CONTENT_RANGE, format!("bytes {start}-{end}/{size}")),
            RangeAnswer::Unsatisfiable => response
                .status(StatusCode::RANGE_NOT_SATISFIABLE)
                .header(header::CONTENT_RANGE, format!("bytes */{size}")),
        }
    };
    response
        .body(Body::from_stream(download.body))
        .map_err(|err| ApiError(crate::service::ServiceError::internal(err.to_string())))
}

/// [`get_file`] for a path of several segments.
pub async fn get_nested_file(
    state: Service,
    caller: Extension<Principal>,
    Path((id, first, rest)): Path<(String, String, String)>,
    headers: HeaderMap,
) -> Result<Response, ApiError> {
    get_file(
        state,
        caller,
        Path((id, format!("{first}/{rest}"))),
        headers,
    )
    .await
}

/// `path`: the directory (default: the workspace); `format`: `tar` (default) or `tar.gz`
/// (downloads only).
#[derive(Deserialize, IntoParams)]
#[into_params(parameter_in = Query)]
#[serde(deny_unknown_fields)]
pub struct ArchiveQuery {
    #[param(min_length = 1)]
    path: Option<String>,
    #[param(pattern = "^(tar|tar\\.gz)$")]
    format: Option<String>,
}

#[utoipa::path(post, path = "/v1/sessions/{id}/archive", tag = "workspace",
    params(("id" = String, Path), ArchiveQuery),
    request_body(content = Vec<u8>, description = "a tar, tar.gz or zip archive (told from its first bytes)", content_type = "application/octet-stream"),
    responses((status = 200, body = UploadedBody), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 413, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn post_archive(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ArchiveQuery>,
    body: Body,
) -> Result<Json<Value>, ApiError> {
    if query.format.is_some() {
        return Err(ApiError::new(
            crate::service::ErrorCode::InvalidRequest,
            "format is for downloads: an upload's format is told from its first bytes",
        ));
    }
    let answer = service
        .upload_archive(&caller, &id, query.path.as_deref(), upload_body(body))
        .await?;
    Ok(Json(answer))
}

#[utoipa::path(get, path = "/v1/sessions/{id}/archive", tag = "workspace",
    params(("id" = String, Path), ArchiveQuery),
    responses((status = 200, description = "the directory as a tar or tar.gz", content_type = "application/x-tar"), (status = 400, body = ErrorBody), (status = 401, body = ErrorBody), (status = 403, body = ErrorBody), (status = 404, body = ErrorBody), (status = 429, body = ErrorBody), (status = 503, body = ErrorBody)))]
pub async fn get_archive(
    State(service): Service,
    Extension(caller): Extension<Principal>,
    Path(id): Path<String>,
    ApiQuery(query): ApiQuery<ArchiveQuery>,
) -> Result<Response, ApiError> {
    let download = service
        .download_archive(&caller, &id, query.path.as_deref(), query.format.as_deref())
        .await?;
    let content_type = if download.format == "tar.gz" {
        "application/gzip"
    } else {
        "application/x-tar"
    };
    Ok((
        [(header::CONTENT_TYPE, content_type)],
        Body::from_stream(download.body),
    )
        .into_response())
}
