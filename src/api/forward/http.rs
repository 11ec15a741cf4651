//! The HTTP side of forwarding: [`forward`], a middleware inside the HTTP door's gates, checks
//! a request's hop headers, finds whether its session (or, for a create, the new session)
//! belongs elsewhere, and if so proxies the raw request there over a pooled HTTP/1.1
//! connection (`connection`), streaming what streams; otherwise the request goes on to its
//! handler. What is forwarded and why, timeouts and back-pressure: the module header of
//! `forward`.
//!
//! Decisions on the hop's cost (issue 23: at most +100 µs at p50 over calling the owner):
//! - The connection to the owner is driven inside the request's own task, not by hyper-util's
//!   pooled `Client` (a task per connection, a channel each way): see `connection` for why,
//!   how stale pooled connections are retried, and what still streams.
//! - Every layer of the HTTP door still runs on the forwarding daemon, the gate first: the
//!   owner re-checks the caller, but this daemon must not relay an unauthenticated or
//!   rate-limited request to it, and the request id, trace and request count are this
//!   daemon's record of the hop. Measured with callgrind, the layers outside the gate are
//!   about a seventh of the forwarding daemon's instructions per hop; hyper's two halves
//!   (the server reading the client's request and writing the answer, the client writing to
//!   the owner and reading its answer) are most of the rest.
//! - The request's own work here is kept to lookups: the owner's place comes from the
//!   placement cache, hop-by-hop headers are looked for in one pass before any is removed, the
//!   pool is keyed by the owner's address as the store gives it (parsed only to connect).

use std::sync::Arc;

use super::connection::HopError;
use super::{Forwarder, Hop, not_here, unreachable};
use crate::api::http::ApiError;
use crate::permission::Principal;
use crate::service::{ServiceError, SessionPlace, ToolService};
use axum::extract::{Request, State};
use axum::http::header::{CONNECTION, EXPECT, HeaderName, TE, TRAILER, TRANSFER_ENCODING, UPGRADE};
use axum::http::{HeaderMap, Method, Uri, Version};
use axum::middleware::Next;
use axum::response::{IntoResponse, Response};

/// What the middleware needs.
#[derive(Clone)]
pub struct ForwardState {
    pub service: Arc<ToolService>,
    pub forwarder: Arc<Forwarder>,
}

/// Which daemon a request concerns.
#[derive(Debug, PartialEq, Eq)]
enum Concerns<'p> {
    /// The live session with this id (its owner answers).
    Session(&'p str),
    /// A new session (placement decides).
    NewSession,
    /// Any daemon answers (from the store, or about itself).
    AnyDaemon,
}

/// What `method path` concerns (see "what is forwarded" in the module header of `forward`).
fn concerns<'p>(method: &Method, path: &'p str) -> Concerns<'p> {
    if path == "/v1/sessions" {
        return if method == Method::POST {
            Concerns::NewSession
        } else {
            Concerns::AnyDaemon
        };
    }
    let Some(rest) = path.strip_prefix("/v1/sessions/") else {
        return Concerns::AnyDaemon;
    };
    let (id, tail) = rest.split_once('/').unwrap_or((rest, ""));
    if id.is_empty() {
        return Concerns::AnyDaemon;
    }
    match tail {
        "" if method == Method::DELETE => Concerns::Session(id),
        "" | "calls" | "events" => Concerns::AnyDaemon,
        _ => Concerns::Session(id),
    }
}

/// The middleware: see the module header.
pub async fn forward(State(state): State<ForwardState>, request: Request, next: Next) -> Response {
    // What decides the route, read before any await (a request's body is not `Sync`).
    let hop = state.forwarder.check(request.headers());
    let path = request.uri().path().to_owned();
    let method = request.method().clone();
    let routed = match hop {
        Ok(hop) => {
            // The gate put the caller there; without one the handler answers (and refuses).
            match request.extensions().get::<Principal>() {
                Some(caller) => route(&state, caller, hop, concerns(&method, &path)).await,
                None => Ok(None),
            }
        }
        Err(refusal) => Err(refusal),
    };
    match routed {
        Ok(None) => next.run(request).await,
        Ok(Some((session_id, address))) => proxy(&state, request, &session_id, &address).await,
        Err(refusal) => ApiError(refusal).into_response(),
    }
}

/// `None`: answer here; `Some((session, address))`: forward to `address`.
async fn route(
    state: &ForwardState,
    caller: &Principal,
    hop: Hop,
    target: Concerns<'_>,
) -> Result<Option<(String, String)>, ServiceError> {
    if hop == Hop::Direct && !state.forwarder.enabled() {
        return Ok(None);
    }
    let (session_id, place) = match target {
        Concerns::AnyDaemon => return Ok(None),
        // A hop that places a session here creates it here: it was placed already.
        Concerns::NewSession if hop == Hop::Forwarded => return Ok(None),
        Concerns::NewSession => ("a new session", state.service.place_new_session().await?),
        Concerns::Session(id) => (id, state.service.locate_session(caller, id).await?),
    };
    match (place, hop) {
        (SessionPlace::Here, _) => Ok(None),
        (_, Hop::Forwarded) => Err(not_here(session_id, &state.forwarder.hop.node_id)),
        (SessionPlace::Node { address, .. }, Hop::Direct) => {
            Ok(Some((session_id.to_owned(), address)))
        }
        (SessionPlace::Nobody { owner }, Hop::Direct) => {
            Err(crate::service::nobody_runs(session_id, &owner))
        }
    }
}

/// Sends `request` to `address` and streams the answer back (see the module header).
async fn proxy(
    state: &ForwardState,
    request: Request,
    session_id: &str,
    address: &str,
) -> Response {
    let (mut parts, body) = request.into_parts();
    // Origin-form: the connection is to the owner already.
    parts.uri = parts
        .uri
        .path_and_query()
        .map_or_else(|| Uri::from_static("/"), |path| Uri::from(path.clone()));
    parts.version = Version::HTTP_11;
    strip_hop_by_hop(&mut parts.headers);
    state.forwarder.mark(&mut parts.headers);
    let request = Request::from_parts(parts, body);
    match state.forwarder.http.send(address, request).await {
        Ok(answer) => {
            let (mut parts, body) = answer.into_parts();
            strip_hop_by_hop(&mut parts.headers);
            Response::from_parts(parts, body)
        }
        Err(HopError::RequestBody(err)) => {
            let refusal =
                ServiceError::invalid(format!("reading the request's body failed: {err}"));
            ApiError(refusal).into_response()
        }
        Err(err) => {
            // The next request reads the owner from the store again (it may have been adopted).
            state.service.forget_place(session_id);
            tracing::warn!(session_id, address, error = %err, "forwarding failed");
            ApiError(unreachable(session_id, address, err)).into_response()
        }
    }
}

/// Removes the headers that concern one connection, not the request (RFC 9110 §7.6.1), and
/// an `Expect` the first daemon has met.
fn strip_hop_by_hop(headers: &mut HeaderMap) {
    // One pass over the few headers there are first: a hop's own requests and answers, the
    // common case, carry none of these, and removing each name that is absent costs a lookup.
    if !headers.keys().any(hop_by_hop) {
        return;
    }
    let named: Vec<HeaderName> = headers
        .get_all(CONNECTION)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|value| value.split(','))
        .filter_map(|name| HeaderName::from_bytes(name.trim().as_bytes()).ok())
        .collect();
    for name in named {
        headers.remove(name);
    }
    for name in [CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE] {
        headers.remove(name);
    }
    headers.remove("keep-alive");
    headers.remove("proxy-connection");
    // Met already by the daemon the client reached (hyper answers 100 Continue itself).
    headers.remove(EXPECT);
}

/// Whether `name` is one [`strip_hop_by_hop`] removes by name.
fn hop_by_hop(name: &HeaderName) -> bool {
    [CONNECTION, TE, TRAILER, TRANSFER_ENCODING, UPGRADE, EXPECT].contains(name)
        || name == "keep-alive"
        || name == "proxy-connection"
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn what_needs_the_live_session_goes_to_its_owner_and_reads_stay_here() {
        use Concerns::{AnyDaemon, NewSession, Session};
        let table = [
            (Method::POST, "/v1/sessions", NewSession),
            (Method::GET, "/v1/sessions", AnyDaemon),
            (Method::GET, "/v1/sessions/s1", AnyDaemon),
            (Method::DELETE, "/v1/sessions/s1", Session("s1")),
            (Method::POST, "/v1/sessions/s1/batches", Session("s1")),
            (Method::GET, "/v1/sessions/s1/batches/b1", Session("s1")),
            (Method::GET, "/v1/sessions/s1/tools", Session("s1")),
            (Method::POST, "/v1/sessions/s1/interrupt", Session("s1")),
            (Method::GET, "/v1/sessions/s1/approvals", Session("s1")),
            (Method::POST, "/v1/sessions/s1/approvals/a1", Session("s1")),
            (Method::POST, "/v1/sessions/s1/mcp", Session("s1")),
            (Method::DELETE, "/v1/sessions/s1/mcp", Session("s1")),
            (Method::GET, "/v1/sessions/s1/calls", AnyDaemon),
            (Method::GET, "/v1/sessions/s1/events", AnyDaemon),
            (Method::POST, "/v1/sessions/", AnyDaemon),
            (Method::GET, "/v1/results/r1", AnyDaemon),
            (Method::POST, "/mcp", AnyDaemon),
            (Method::GET, "/healthz", AnyDaemon),
        ];
        for (method, path, expected) in table {
            assert_eq!(concerns(&method, path), expected, "{method} {path}");
        }
    }

    #[test]
    fn hop_by_hop_headers_stay_behind_and_the_rest_travel() {
        let mut headers = HeaderMap::new();
        headers.insert(CONNECTION, "keep-alive, x-private".parse().unwrap());
        headers.insert("x-private", "1".parse().unwrap());
        headers.insert("keep-alive", "timeout=5".parse().unwrap());
        headers.insert(TRANSFER_ENCODING, "chunked".parse().unwrap());
        headers.insert("authorization", "Bearer t".parse().unwrap());
        headers.insert("last-event-id", "7".parse().unwrap());
        strip_hop_by_hop(&mut headers);
        let mut left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
        left.sort_unstable();
        assert_eq!(left, ["authorization", "last-event-id"]);

        // Each alone is found by the first pass.
        for name in ["expect", "proxy-connection", "te", "upgrade"] {
            let mut headers = HeaderMap::new();
            headers.insert("content-type", "text/plain".parse().unwrap());
            headers.insert(HeaderName::from_static(name), "x".parse().unwrap());
            strip_hop_by_hop(&mut headers);
            let left: Vec<&str> = headers.keys().map(HeaderName::as_str).collect();
            assert_eq!(left, ["content-type"], "{name}");
        }
    }
}
