//! The gRPC door's gates, the same as HTTP's in the same order, answered as gRPC statuses:
//! shutting down (UNAVAILABLE), bearer auth from `authorization` metadata (UNAUTHENTICATED),
//! load shedding on the permits HTTP uses too (RESOURCE_EXHAUSTED) and the request timeout
//! on the response head (DEADLINE_EXCEEDED; streams run on). Health checks pass every gate but
//! the first, like `/healthz`. Not here: the rules themselves (`api::http::middleware`).

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Semaphore;

use crate::api::DaemonStatus;
use crate::api::http::{CallerToken, authorised};
use crate::service::{ErrorCode, ServiceError};

/// What the gates need (the permits are shared with the HTTP door).
pub struct GrpcGates {
    pub status: Arc<DaemonStatus>,
    pub auth_tokens: Vec<String>,
    pub permits: Arc<Semaphore>,
    pub request_timeout: Duration,
}

fn refuse(code: ErrorCode, message: String) -> Response {
    super::status(ServiceError::new(code, message)).into_http()
}

pub async fn gate(
    State(gates): State<Arc<GrpcGates>>,
    mut request: Request,
    next: Next,
) -> Response {
    if gates.status.shutting_down.load(Ordering::Acquire) {
        return refuse(ErrorCode::ShuttingDown, "toold is shutting down".into());
    }
    if request.uri().path().starts_with("/grpc.health.v1.Health/") {
        return next.run(request).await;
    }
    let mut caller = CallerToken(None);
    if !gates.auth_tokens.is_empty() {
        match authorised(&gates.auth_tokens, request.headers()) {
            Some(token) => caller = CallerToken(Some(token.to_owned())),
            None => {
                return refuse(
                    ErrorCode::Unauthenticated,
                    "a valid bearer token is required (metadata authorization: Bearer TOKEN)"
                        .into(),
                );
            }
        }
    }
    // Who resolves an approval is recorded by token fingerprint, as over HTTP.
    request.extensions_mut().insert(caller);
    let Ok(_permit) = gates.permits.clone().try_acquire_owned() else {
        return refuse(
            ErrorCode::Overloaded,
            "too many requests in flight; retry later".into(),
        );
    };
    match tokio::time::timeout(gates.request_timeout, next.run(request)).await {
        Ok(response) => response,
        Err(_) => refuse(
            ErrorCode::Timeout,
            format!(
                "the request took longer than {} ms",
                gates.request_timeout.as_millis()
            ),
        ),
    }
}
