//! A POST to the MCP door: its body read once (bounded by the body limit) and checked to be
//! one JSON-RPC message ([`envelope`]) before rmcp handles the request; what rmcp would have
//! answered with a plain-text 415 gets a JSON-RPC error with 400 instead.
//!
//! rmcp checks the request's head first (`Host` and `Origin` 403, `Accept` 406,
//! `Content-Type` 415) and reads the body only when all of them pass. This door keeps that
//! order without repeating those checks: rmcp is always called, with a body that notes when
//! it is read. A body that passed the check goes on byte for byte; one that did not goes on
//! empty, so rmcp cannot serve it whatever it makes of it. When rmcp read the body and
//! answered 415 (its answer to a body it cannot parse, the only 415 after the head checks),
//! this door answers the refusal in its place; every other answer is rmcp's. A body past the
//! limit goes on as far as it was read (just past the limit, or not at all when
//! `Content-Length` already says so), and rmcp answers 413 once the head checks pass.
//!
//! Memory: the read stops one frame past the limit; rmcp copies a body that passed into its
//! own buffer to parse it, so a request holds at most twice the limit.
//!
//! A head this door cannot see is admitted (an `Origin` or `Host` not exactly one it lists)
//! is first shown to rmcp alone, with an empty body that notes when it is read: rmcp refusing
//! it without reading the body (403, 406, 415) is the answer, so a foreign page never makes
//! the daemon read its body. A head rmcp accepts goes on as any other (rmcp read the empty
//! body and failed to parse it, which has no effect). Clients on the listener's own address
//! and without an `Origin` (SDKs, the Inspector) never pay for that probe.

use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use axum::body::{Body, Bytes};
use axum::extract::Request;
use axum::http::{HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;

use super::HttpService;
use super::envelope::{self, Outline, Refusal};

/// The `Origin` and `Host` values known to be admitted, exactly as sent (rmcp's own matching
/// is looser: a host without a port matches any port).
#[derive(Debug, Default)]
pub(super) struct KnownHeads {
    pub origins: Vec<String>,
    /// Empty: any `Host` is admitted.
    pub hosts: Vec<String>,
}

impl KnownHeads {
    fn surely_admitted(&self, headers: &axum::http::HeaderMap) -> bool {
        let listed = |name: header::HeaderName, known: &[String]| {
            headers
                .get(name)
                .and_then(|value| value.to_str().ok())
                .is_some_and(|value| known.iter().any(|k| k.eq_ignore_ascii_case(value)))
        };
        let origin = !headers.contains_key(header::ORIGIN) || listed(header::ORIGIN, &self.origins);
        let host = self.hosts.is_empty() || listed(header::HOST, &self.hosts);
        origin && host
    }
}

/// Serves a POST through rmcp, answering bodies it would mishandle itself.
pub(super) async fn serve_post(
    http: &HttpService,
    heads: &KnownHeads,
    request: Request,
    limit: usize,
) -> Response {
    if !heads.surely_admitted(request.headers()) {
        let read = Arc::new(AtomicBool::new(false));
        if let Some(probe) = head_alone(&request, read.clone()) {
            let response = http.handle(probe).await;
            if !read.load(Ordering::Acquire) {
                return response.map(Body::new);
            }
        }
    }
    let declared_too_large = request
        .headers()
        .get(header::CONTENT_LENGTH)
        .and_then(|value| value.to_str().ok()?.parse::<usize>().ok())
        .is_some_and(|length| length > limit);
    if declared_too_large {
        // rmcp answers 413 from the first frame, after the head checks.
        return http.handle(request).await.map(Body::new);
    }
    let (parts, body) = request.into_parts();
    let (forwarded, refusal) = match read_bounded(body, limit).await {
        BodyRead::Complete(bytes) => match envelope::check(&bytes) {
            Ok(outline) => (bytes, Some(Refusal::unreadable(id_of(outline)))),
            Err(refusal) => (Bytes::new(), Some(refusal)),
        },
        BodyRead::TooLarge(prefix) => (prefix, None),
        BodyRead::Failed(err) => return refused(&Refusal::unread(&err)),
    };
    let read = Arc::new(AtomicBool::new(false));
    let body = noting_when_read(forwarded, read.clone());
    let response = http.handle(Request::from_parts(parts, body)).await;
    if let Some(refusal) = refusal
        && read.load(Ordering::Acquire)
        && response.status() == StatusCode::UNSUPPORTED_MEDIA_TYPE
    {
        return refused(&refusal);
    }
    response.map(Body::new)
}

/// `request`'s head with an empty body that sets `read` when polled.
fn head_alone(request: &Request, read: Arc<AtomicBool>) -> Option<Request> {
    let mut probe = Request::builder()
        .method(request.method().clone())
        .uri(request.uri().clone())
        .version(request.version());
    let headers = probe.headers_mut()?;
    headers.extend(
        request
            .headers()
            .iter()
            .filter(|(name, _)| *name != header::CONTENT_LENGTH)
            .map(|(name, value)| (name.clone(), value.clone())),
    );
    probe.body(noting_when_read(Bytes::new(), read)).ok()
}

fn id_of(outline: Outline) -> Value {
    match outline {
        Outline::Call { id } => id,
        Outline::Response => Value::Null,
    }
}

/// 400 with the JSON-RPC error.
fn refused(refusal: &Refusal) -> Response {
    let mut response = (StatusCode::BAD_REQUEST, refusal.to_json()).into_response();
    response.headers_mut().insert(
        header::CONTENT_TYPE,
        HeaderValue::from_static("application/json"),
    );
    response
}

enum BodyRead {
    Complete(Bytes),
    /// What was read, the limit and one frame past it.
    TooLarge(Bytes),
    Failed(axum::Error),
}

async fn read_bounded(body: Body, limit: usize) -> BodyRead {
    let mut collected = Vec::new();
    let mut frames = body.into_data_stream();
    while let Some(frame) = frames.next().await {
        match frame {
            Ok(chunk) => {
                collected.extend_from_slice(&chunk);
                if collected.len() > limit {
                    return BodyRead::TooLarge(collected.into());
                }
            }
            Err(err) => return BodyRead::Failed(err),
        }
    }
    BodyRead::Complete(collected.into())
}

/// `bytes` as a body that sets `read` when rmcp first polls it.
fn noting_when_read(bytes: Bytes, read: Arc<AtomicBool>) -> Body {
    Body::from_stream(futures::stream::once(async move {
        read.store(true, Ordering::Release);
        Ok::<_, std::convert::Infallible>(bytes)
    }))
}
