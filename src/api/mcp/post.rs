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

/// Serves a POST through rmcp, answering bodies it would mishandle itself.
pub(super) async fn serve_post(http: &HttpService, request: Request, limit: usize) -> Response {
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
