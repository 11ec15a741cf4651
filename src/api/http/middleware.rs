//! The HTTP door's middleware: [`gate`] runs the one admission sequence (`api::gate`) and
//! answers its refusals as HTTP (503, 401, 429, 408 with the error body); [`count_request`],
//! outside it, counts every answer by route and status. Not here: the rules themselves.

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::api::gate::{Admission, Door, Gate};

/// One middleware function, so the gates cost one layer on every request's path.
pub async fn gate(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let admission = gate.admit(Door::Http, request.uri().path(), request.headers());
    let mut admitted = match admission {
        Ok(Admission::Admitted(admitted)) => admitted,
        Ok(Admission::Probe) => return next.run(request).await,
        Err(refusal) => return ApiError(refusal).into_response(),
    };
    admitted.identify(request.extensions_mut());
    // The deadline covers producing the response head; a stream runs on after it.
    match admitted.respond_within(next.run(request)).await {
        Ok(response) => response,
        Err(refusal) => ApiError(refusal).into_response(),
    }
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
