//! Error bodies and the extractors that produce them.
//!
//! Every error leaves as `{"error":{"code","message"}}` with the status of the one table in
//! `api`. axum's own rejections (a body over the limit, a bad query string) are converted to
//! that body here, and JSON bodies are parsed by [`JsonBody`] so malformed JSON, non-UTF-8
//! bytes and over-deep nesting (serde_json's recursion limit) are all a plain 400. A 401
//! carries `WWW-Authenticate: Bearer realm="toold"` (with `[auth.oidc]`, the OAuth challenge
//! of `api::oidc::metadata`, set by the gate's middleware).

use axum::extract::rejection::QueryRejection;
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde::de::DeserializeOwned;
use serde_json::json;

use crate::service::{ErrorCode, ServiceError};

/// A service error on its way out.
#[derive(Debug)]
pub struct ApiError(pub ServiceError);

impl ApiError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ApiError {
        ApiError(ServiceError::new(code, message))
    }
}

impl From<ServiceError> for ApiError {
    fn from(err: ServiceError) -> ApiError {
        ApiError(err)
    }
}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        let status = super::super::http_status(self.0.code);
        let body = json!({"error": {"code": self.0.code.as_str(), "message": self.0.message}});
        let mut response = (status, axum::Json(body)).into_response();
        // `unavailable`: nobody runs the session this moment; a takeover settles within the
        // fleet's node timeout, so a client retrying every second finds its new owner.
        // `limit_exceeded`: a request-rate token comes back within a second (the rate is at
        // least 1 a second); a batch or session slot whenever one ends (`service::limits`).
        if matches!(
            self.0.code,
            ErrorCode::Unavailable | ErrorCode::LimitExceeded
        ) {
            response.headers_mut().insert(
                axum::http::header::RETRY_AFTER,
                axum::http::HeaderValue::from_static("1"),
            );
        }
        // RFC 6750 §3: a 401 names the scheme it wants (Claude Code and other MCP clients say
        // only "failed to connect" without it). With `[auth.oidc]` the gate's middleware
        // replaces this with the OAuth challenge (`resource_metadata`, `error`).
        if self.0.code == ErrorCode::Unauthenticated {
            response.headers_mut().insert(
                axum::http::header::WWW_AUTHENTICATE,
                axum::http::HeaderValue::from_static(WWW_AUTHENTICATE),
            );
        }
        response
    }
}

/// The challenge every HTTP 401 carries (the static-token gate's, `/mcp`'s included).
pub const WWW_AUTHENTICATE: &str = "Bearer realm=\"toold\"";

/// The body size limit, put in each request's extensions by the router.
#[derive(Clone, Copy, Debug)]
pub struct BodyLimit(pub usize);

/// Bytes of an oversized body read and discarded before answering 413: a client still
/// sending when the connection closes would see a reset instead of the answer.
const MAX_DRAIN_BYTES: usize = 64 << 20;

/// A JSON body, parsed by serde_json with its errors as 400 and an oversized body as 413.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, _state: &S) -> Result<Self, ApiError> {
        let limit = request
            .extensions()
            .get::<BodyLimit>()
            .map_or(usize::MAX, |limit| limit.0);
        let bytes = read_limited(request, limit).await?;
        let value = parse_object(&bytes)?;
        Ok(JsonBody(value))
    }
}

/// A JSON object body read as `T`. Every body of the API is an object: serde would read a
/// struct from an array too, so JSON text that does not start with `{` is refused first.
pub fn parse_object<T: DeserializeOwned>(bytes: &[u8]) -> Result<T, ApiError> {
    if matches!(bytes.iter().find(|b| !b.is_ascii_whitespace()), Some(first) if *first != b'{') {
        return Err(ApiError::new(
            ErrorCode::InvalidRequest,
            "invalid JSON body: it must be a JSON object",
        ));
    }
    serde_json::from_slice(bytes).map_err(|err| {
        ApiError::new(
            ErrorCode::InvalidRequest,
            format!("invalid JSON body: {err}"),
        )
    })
}

/// The body, if it is at most `limit` bytes; otherwise 413 after draining what the client
/// sends (up to [`MAX_DRAIN_BYTES`]) so that it can read the answer.
async fn read_limited(request: Request, limit: usize) -> Result<Vec<u8>, ApiError> {
    let mut chunks = request.into_body().into_data_stream();
    let mut bytes = Vec::new();
    let mut over_by: Option<usize> = None;
    while let Some(chunk) = chunks.next().await {
        let chunk = chunk.map_err(|err| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("reading the body: {err}"),
            )
        })?;
        match &mut over_by {
            Some(drained) => {
                *drained += chunk.len();
                if *drained > MAX_DRAIN_BYTES {
                    break;
                }
            }
            None if bytes.len() + chunk.len() > limit => {
                over_by = Some(0);
                bytes = Vec::new();
            }
            None => bytes.extend_from_slice(&chunk),
        }
    }
    if over_by.is_some() {
        return Err(ApiError::new(
            ErrorCode::PayloadTooLarge,
            format!("the request body is larger than the limit of {limit} bytes"),
        ));
    }
    Ok(bytes)
}

/// A query string, with parse errors as 400 in the error body.
pub struct ApiQuery<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequestParts<S> for ApiQuery<T> {
    type Rejection = ApiError;

    async fn from_request_parts(parts: &mut Parts, state: &S) -> Result<Self, ApiError> {
        axum::extract::Query::<T>::from_request_parts(parts, state)
            .await
            .map(|query| ApiQuery(query.0))
            .map_err(|rejection: QueryRejection| {
                ApiError::new(ErrorCode::InvalidRequest, rejection.body_text())
            })
    }
}

/// Unknown paths: the same error body as everything else.
pub async fn not_found() -> ApiError {
    ApiError::new(ErrorCode::NotFound, "no such endpoint")
}
