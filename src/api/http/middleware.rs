//! The HTTP door's middleware: [`gate`] runs the one admission sequence (`api::gate`) and
//! answers its refusals as HTTP (503, 401, 403, 429, 408 with the error body); [`count_request`],
//! outside it, counts every answer by route and status. Not here: the rules themselves.
//!
//! With issuers configured (`[auth.oidc]`), a 401 carries the OAuth challenge of
//! `api::oidc::metadata` (`resource_metadata`, and `error="invalid_token"` when a token was
//! refused), and a 403 for a token without the role a request needs carries
//! `error="insufficient_scope"` with the scope that would do: `toold.read` to read,
//! `toold.execute` to change anything or to use the MCP door (an observer's write, or a token
//! that maps to no role at all).

use std::sync::Arc;

use axum::extract::{MatchedPath, Request, State};
use axum::http::header::WWW_AUTHENTICATE;
use axum::http::{Method, StatusCode};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

use super::error::ApiError;
use crate::api::gate::{Admission, Door, Gate, bearer};
use crate::permission::Role;
use crate::service::ErrorCode;

/// One middleware function, so the gates cost one layer on every request's path.
pub async fn gate(State(gate): State<Arc<Gate>>, mut request: Request, next: Next) -> Response {
    let admission = gate
        .admit(Door::Http, request.uri().path(), request.headers())
        .await;
    let mut admitted = match admission {
        Ok(Admission::Admitted(admitted)) => admitted,
        Ok(Admission::Probe) => return next.run(request).await,
        Err(refusal) => {
            let code = refusal.code;
            let mut response = ApiError(refusal).into_response();
            challenge(&gate, &request, code, &mut response);
            return response;
        }
    };
    admitted.identify(request.extensions_mut());
    let observer = admitted.principal().role == Role::Observer;
    // The deadline covers producing the response head; a stream runs on after it.
    let mut response = match admitted.respond_within(next.run(request)).await {
        Ok(response) => response,
        Err(refusal) => ApiError(refusal).into_response(),
    };
    if observer
        && response.status() == StatusCode::FORBIDDEN
        && let Some(verifier) = &gate.oidc
    {
        let value = verifier.metadata().insufficient_scope("toold.execute");
        response.headers_mut().insert(WWW_AUTHENTICATE, value);
    }
    response
}

/// The OAuth challenge of a refusal by the gate, when issuers are configured.
fn challenge(gate: &Gate, request: &Request, code: ErrorCode, response: &mut Response) {
    let Some(verifier) = &gate.oidc else {
        return;
    };
    let metadata = verifier.metadata();
    let value = match code {
        ErrorCode::Unauthenticated => metadata.unauthenticated(bearer(request.headers()).is_some()),
        ErrorCode::Forbidden => {
            metadata.insufficient_scope(needed_scope(request.method(), request.uri().path()))
        }
        _ => return,
    };
    response.headers_mut().insert(WWW_AUTHENTICATE, value);
}

/// The scope a request needs: reading needs `toold.read`; changing anything, and the MCP
/// door (whose calls run tools), `toold.execute`.
fn needed_scope(method: &Method, path: &str) -> &'static str {
    let mcp = path == "/mcp" || path.ends_with("/mcp");
    if !mcp && (method == Method::GET || method == Method::HEAD) {
        "toold.read"
    } else {
        "toold.execute"
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
