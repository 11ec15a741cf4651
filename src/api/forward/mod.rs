//! Forwarding within a fleet: a request for a session another live daemon runs goes to that
//! daemon (its advertised address) and its answer comes back unchanged, so a client behind a
//! round-robin load balancer never sees which daemon runs what. The service says where a
//! session is (`ToolService::locate_session`, `place_new_session`); this module carries the
//! request there: `http` (a middleware proxying the raw HTTP request, the MCP door's
//! session-bound routes included, over the HTTP/1.1 connections of `connection`) and `grpc`
//! (a tonic client relaying the RPC).
//!
//! The hop. The forwarding daemon adds `x-toold-fleet-secret` (the `[server] fleet_secret`)
//! and `x-toold-forwarded-by` (its node id) and keeps the client's own headers, its
//! `Authorization` included, so the owner's gate sees the original caller. A request carrying
//! either header is a hop: without the right secret (compared in constant time) it is refused
//! 401 `unauthenticated`, whoever sent it, and a daemon without a secret accepts no hop at all.
//! A hop is never forwarded again: one for a session the receiving daemon does not run is 503
//! `unavailable` with `Retry-After` (the forwarder read a stale owner; the client retries).
//!
//! Decisions where the issue is silent:
//! - No fleet secret, no forwarding: requests for another daemon's session are refused as
//!   before (409 naming the owner), so an unconfigured internal address is not an open door.
//! - What is forwarded: everything that needs the live session (batches, streamed or not, and
//!   reading one back, tools, interrupt, approvals, close, files and archives in and out,
//!   snapshots and forks, `/v1/sessions/{id}/mcp`) and, past
//!   `max_sessions`, a create. Reads any daemon answers from the store (a session's
//!   description, its audit log, its events, results) are not.
//! - Timeouts: connecting to the owner gives up after [`CONNECT_TIMEOUT`] (then 503 with
//!   `Retry-After`, the place forgotten, so the retry reads the store again and finds an
//!   adopter); the response head is bounded by the request timeout of the gate the request
//!   already passed; a streamed body (SSE, gRPC `Execute`) runs as long as it would on the
//!   owner.
//! - Back-pressure: streams (SSE, chunked or large bodies) are relayed frame by frame, never
//!   buffered whole; a slow client slows the owner's writes as it would slow a local stream.
//!   Small bodies with a `Content-Length` (at most 64 KiB: a batch, its JSON answer) are read
//!   whole, so a request goes out in one write and can be sent again on a fresh connection
//!   (`connection`). Hops hold the forwarding daemon's request permits like any request until
//!   their head arrives (a small answer: until it is read); idle connections to each owner are
//!   pooled ([`POOL_IDLE`] kept at most [`POOL_IDLE_PER_HOST`]).
//! - Either daemon stopping mid-stream ends the client's stream with an error, never a clean
//!   end: the forwarder aborts the response (HTTP/1.1: the connection closes before the last
//!   chunk; gRPC: an `UNAVAILABLE`/`UNKNOWN` status). The client resumes as it would after any
//!   lost connection: a keyed batch by its idempotency key, events by `Last-Event-ID`.

pub mod connection;
pub mod grpc;
pub mod http;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::http::{HeaderMap, HeaderName, HeaderValue};

use crate::service::{ErrorCode, ServiceError};

/// The fleet's secret, on every hop.
pub const FLEET_SECRET: HeaderName = HeaderName::from_static(FLEET_SECRET_NAME);
const FLEET_SECRET_NAME: &str = "x-toold-fleet-secret";
/// The node id of the daemon that forwarded a request.
pub const FORWARDED_BY: HeaderName = HeaderName::from_static(FORWARDED_BY_NAME);
const FORWARDED_BY_NAME: &str = "x-toold-forwarded-by";

/// How long connecting to the daemon running a session may take.
pub const CONNECT_TIMEOUT: Duration = Duration::from_secs(2);
/// How long an idle connection to another daemon is kept.
pub const POOL_IDLE: Duration = Duration::from_secs(30);
/// Idle connections kept per daemon.
pub const POOL_IDLE_PER_HOST: usize = 64;

/// What forwarding needs: the fleet's secret (none: no forwarding) and this daemon's node id.
#[derive(Clone, Debug, Default)]
pub struct FleetHop {
    pub secret: Option<String>,
    pub node_id: String,
}

/// Whether a request came over a hop (checked before anything else looks at it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Hop {
    /// From a client.
    Direct,
    /// From another daemon of the fleet, with the right secret.
    Forwarded,
}

/// The forwarding machinery one daemon shares between its doors.
pub struct Forwarder {
    hop: FleetHop,
    secret_header: Option<HeaderValue>,
    node_header: HeaderValue,
    http: connection::HopConnections,
    /// gRPC channels to other daemons, by address (each multiplexes its RPCs over HTTP/2).
    channels: Mutex<HashMap<String, tonic::transport::Channel>>,
}

impl Forwarder {
    pub fn new(hop: FleetHop) -> Arc<Forwarder> {
        let secret_header = hop
            .secret
            .as_deref()
            .and_then(|secret| HeaderValue::from_str(secret).ok());
        let node_header = HeaderValue::from_str(&hop.node_id)
            .unwrap_or_else(|_| HeaderValue::from_static("unknown"));
        Arc::new(Forwarder {
            hop,
            secret_header,
            node_header,
            http: connection::HopConnections::default(),
            channels: Mutex::default(),
        })
    }

    /// Whether this daemon forwards at all (it has a fleet secret).
    pub fn enabled(&self) -> bool {
        self.secret_header.is_some()
    }

    /// Checks a request's hop headers: none is [`Hop::Direct`]; either one needs the right
    /// secret (see the module header).
    pub fn check(&self, headers: &HeaderMap) -> Result<Hop, ServiceError> {
        let presented = headers.get(&FLEET_SECRET);
        if presented.is_none() && !headers.contains_key(&FORWARDED_BY) {
            return Ok(Hop::Direct);
        }
        let matches = match (&self.hop.secret, presented) {
            (Some(secret), Some(presented)) => {
                constant_time_eq(secret.as_bytes(), presented.as_bytes())
            }
            _ => false,
        };
        if matches {
            Ok(Hop::Forwarded)
        } else {
            Err(ServiceError::new(
                ErrorCode::Unauthenticated,
                format!(
                    "a request forwarded within the fleet needs the fleet's secret \
                     ({FLEET_SECRET}), and the one presented is {}",
                    if presented.is_some() {
                        "wrong"
                    } else {
                        "missing"
                    }
                ),
            ))
        }
    }

    /// Adds the hop's headers to a request being forwarded.
    fn mark(&self, headers: &mut HeaderMap) {
        if let Some(secret) = &self.secret_header {
            headers.insert(FLEET_SECRET, secret.clone());
        }
        headers.insert(FORWARDED_BY, self.node_header.clone());
    }
}

/// The refusal of a hop for a session this daemon does not run.
fn not_here(session_id: &str, node_id: &str) -> ServiceError {
    ServiceError::unavailable(format!(
        "session \"{session_id}\" was forwarded to node \"{node_id}\", which does not run it \
         (it moved); retry shortly"
    ))
}

/// The refusal when the daemon running a session did not answer.
fn unreachable(session_id: &str, address: &str, err: impl std::fmt::Display) -> ServiceError {
    ServiceError::unavailable(format!(
        "the daemon running session \"{session_id}\" ({address}) did not answer: {err}; retry \
         shortly"
    ))
}

fn constant_time_eq(a: &[u8], b: &[u8]) -> bool {
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    fn forwarder(secret: Option<&str>) -> Arc<Forwarder> {
        Forwarder::new(FleetHop {
            secret: secret.map(str::to_owned),
            node_id: "node_a".into(),
        })
    }

    fn headers(pairs: &[(&HeaderName, &str)]) -> HeaderMap {
        let mut headers = HeaderMap::new();
        for (name, value) in pairs {
            headers.insert((*name).clone(), HeaderValue::from_str(value).unwrap());
        }
        headers
    }

    #[tokio::test]
    async fn a_hop_needs_the_right_secret_and_a_daemon_without_one_takes_none() {
        let with = forwarder(Some("s3cret"));
        assert_eq!(with.check(&headers(&[])), Ok(Hop::Direct));
        assert_eq!(
            with.check(&headers(&[(&FLEET_SECRET, "s3cret"), (&FORWARDED_BY, "b")])),
            Ok(Hop::Forwarded)
        );
        for refused in [
            headers(&[(&FORWARDED_BY, "b")]),
            headers(&[(&FLEET_SECRET, "s3cres"), (&FORWARDED_BY, "b")]),
            headers(&[(&FLEET_SECRET, "s3cret-and-more")]),
            headers(&[(&FLEET_SECRET, "")]),
        ] {
            let err = with.check(&refused).unwrap_err();
            assert_eq!(err.code, ErrorCode::Unauthenticated, "{refused:?}");
            assert!(err.message.contains("x-toold-fleet-secret"), "{err}");
        }
        let without = forwarder(None);
        assert!(!without.enabled());
        assert_eq!(without.check(&headers(&[])), Ok(Hop::Direct));
        assert!(without.check(&headers(&[(&FLEET_SECRET, "")])).is_err());
        assert!(without.check(&headers(&[(&FLEET_SECRET, "x")])).is_err());
    }
}
