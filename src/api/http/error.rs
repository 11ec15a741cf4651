//! Error bodies and the extractors that produce them.
//!
//! Every error leaves as `{"error":{"code","message"}}` with the status of the one table in
//! `api`. axum's own rejections (a body over the limit, a bad query string) are converted to
//! that body here, and JSON bodies are parsed by [`JsonBody`] so malformed JSON, non-UTF-8
//! bytes and over-deep nesting (serde_json's recursion limit) are all a plain 400.

use axum::body::Bytes;
use axum::extract::rejection::{BytesRejection, QueryRejection};
use axum::extract::{FromRequest, FromRequestParts, Request};
use axum::http::StatusCode;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Response};
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
        (status, axum::Json(body)).into_response()
    }
}

/// A JSON body, parsed by serde_json with its errors as 400 and an oversized body as 413.
pub struct JsonBody<T>(pub T);

impl<S: Send + Sync, T: DeserializeOwned> FromRequest<S> for JsonBody<T> {
    type Rejection = ApiError;

    async fn from_request(request: Request, state: &S) -> Result<Self, ApiError> {
        let bytes = Bytes::from_request(request, state)
            .await
            .map_err(body_rejection)?;
        let value = serde_json::from_slice(&bytes).map_err(|err| {
            ApiError::new(
                ErrorCode::InvalidRequest,
                format!("invalid JSON body: {err}"),
            )
        })?;
        Ok(JsonBody(value))
    }
}

fn body_rejection(rejection: BytesRejection) -> ApiError {
    if rejection.status() == StatusCode::PAYLOAD_TOO_LARGE {
        ApiError::new(
            ErrorCode::PayloadTooLarge,
            "the request body is larger than the body limit",
        )
    } else {
        ApiError::new(ErrorCode::InvalidRequest, rejection.body_text())
    }
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
