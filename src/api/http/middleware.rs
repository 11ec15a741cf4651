//! The HTTP door's gates, in the order a request meets them: shutting down (503), bearer
//! auth (401), load shedding (429) and the request timeout (408). `/healthz` and `/readyz`
//! pass every gate but the first, so probes work without a token and under load. Outside the
//! gates, [`count_request`] counts every answer by route and status.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::extract::{MatchedPath, Request, State};
use axum::http::HeaderMap;
use axum::http::header::AUTHORIZATION;
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};
use tokio::sync::Semaphore;

use super::error::ApiError;
use crate::service::ErrorCode;

/// Whether the daemon can serve: shared by the server (which flips it) and the router.
#[derive(Debug, Default)]
pub struct DaemonStatus {
    /// The store is open and sessions are restored.
    pub ready: AtomicBool,
    /// A shutdown signal arrived: new requests get 503.
    pub shutting_down: AtomicBool,
}

/// What the gates need.
pub struct Gates {
    pub status: Arc<DaemonStatus>,
    pub auth_tokens: Vec<String>,
    pub permits: Arc<Semaphore>,
    pub request_timeout: Duration,
}

fn is_probe(request: &Request) -> bool {
    matches!(request.uri().path(), "/healthz" | "/readyz")
}

/// The bearer token a request was authenticated with (none when the daemon checks no
/// tokens); handlers that record who acted (resolving an approval) read it.
#[derive(Clone, Debug, Default)]
pub struct CallerToken(pub Option<String>);

pub async fn gate(State(gates): State<Arc<Gates>>, mut request: Request, next: Next) -> Response {
    if gates.status.shutting_down.load(Ordering::Acquire) {
        return ApiError::new(ErrorCode::ShuttingDown, "toold is shutting down").into_response();
    }
    if is_probe(&request) {
        return next.run(request).await;
    }
    let mut caller = CallerToken(None);
    if !gates.auth_tokens.is_empty() {
        match authorised(&gates.auth_tokens, request.headers()) {
            Some(token) => caller = CallerToken(Some(token.to_owned())),
            None => {
                return ApiError::new(
                    ErrorCode::Unauthenticated,
                    "a valid bearer token is required (Authorization: Bearer TOKEN)",
                )
                .into_response();
            }
        }
    }
    request.extensions_mut().insert(caller);
    // Shed at once rather than queue: a client under back-pressure should retry elsewhere.
    let Ok(_permit) = gates.permits.clone().try_acquire_owned() else {
        return ApiError::new(
            ErrorCode::Overloaded,
            "too many requests in flight; retry later",
        )
        .into_response();
    };
    // The timeout covers producing the response head; a stream runs on after it.
    match tokio::time::timeout(gates.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => ApiError::new(
            ErrorCode::Timeout,
            format!(
                "the request took longer than {} ms",
                gates.request_timeout.as_millis()
            ),
        )
        .into_response(),
    }
}

/// The configured token the request presents. Every token is compared in full, so timing
/// does not tell which prefix (or which token) matched. (The gRPC door's gates use it too:
/// metadata travels as headers.)
pub fn authorised<'t>(tokens: &'t [String], headers: &HeaderMap) -> Option<&'t str> {
    let presented = headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))?;
    tokens.iter().fold(None, |found, token| {
        let matches = constant_time_eq(token.as_bytes(), presented.trim().as_bytes());
        found.or(matches.then_some(token.as_str()))
    })
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

/// Counts the request by its route template (`unmatched` for unknown paths) and status.
pub async fn count_request(request: Request, next: Next) -> Response {
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or_else(|| "unmatched".to_owned(), |path| path.as_str().to_owned());
    let method = request.method().as_str().to_owned();
    let response = next.run(request).await;
    crate::telemetry::record_http_request(&route, &method, response.status().as_u16());
    response
}
