//! The request span every door opens, and the W3C trace context a request brings in
//! (DESIGN §9): `traceparent`/`tracestate` from an HTTP request's headers or a gRPC call's
//! metadata (the same HTTP/2 headers, so one middleware serves both doors; MCP's
//! `params._meta.traceparent` is read by `api::mcp::calls`).
//!
//! The request span is the root of the request's tree (batch → `execute_tool` → hooks, the
//! approval wait, the process); the incoming context becomes its parent when spans are
//! exported, and is passed onward as it came when they are not (`tool::trace`). A malformed
//! `traceparent` is ignored, as the W3C specification asks: the request is served and starts
//! a trace of its own. Names follow OpenTelemetry's HTTP and RPC conventions: `POST
//! /v1/sessions/{id}/batches` (the route template, never the raw path), `/toold.v1.
//! ToolService/Execute` for gRPC.

use axum::extract::{MatchedPath, Request};
use axum::http::HeaderMap;
use axum::middleware::Next;
use axum::response::Response;

use crate::tool::trace::{self, CoreSpan, SpanValue, TraceContext};

/// The incoming context in `headers`, if a valid one is there.
pub fn from_headers(headers: &HeaderMap) -> Option<TraceContext> {
    let traceparent = headers.get("traceparent")?.to_str().ok()?;
    let tracestate = headers.get("tracestate").and_then(|v| v.to_str().ok());
    TraceContext::parse(traceparent, tracestate)
}

/// The HTTP door's request span (inside routing, so the route template is known).
pub async fn http_request(request: Request, next: Next) -> Response {
    let incoming = from_headers(request.headers());
    let method = request.method();
    let route = request
        .extensions()
        .get::<MatchedPath>()
        .map_or("unmatched", MatchedPath::as_str);
    let span = request_span(
        || format!("{method} {route}").into(),
        incoming.as_ref(),
        || {
            vec![
                ("http.request.method", method.as_str().to_owned().into()),
                ("http.route", route.to_owned().into()),
            ]
        },
    );
    run(span, incoming, request, next, |span, response| {
        let status = response.status().as_u16();
        span.set("http.response.status_code", i64::from(status));
        if status >= 500 {
            span.fail(String::new());
        }
    })
    .await
}

/// The gRPC door's request span (`rpc.method` is the path, `/package.Service/Method`).
pub async fn grpc_request(request: Request, next: Next) -> Response {
    let incoming = from_headers(request.headers());
    let path = request.uri().path();
    let span = request_span(
        || path.to_owned().into(),
        incoming.as_ref(),
        || {
            vec![
                ("rpc.system", "grpc".into()),
                ("rpc.method", path.to_owned().into()),
            ]
        },
    );
    run(span, incoming, request, next, |_, _| {}).await
}

/// A door's request span (a server span) under the context the request brought in, else
/// the span it runs in.
pub fn request_span(
    name: impl FnOnce() -> std::borrow::Cow<'static, str>,
    incoming: Option<&TraceContext>,
    attributes: impl FnOnce() -> Vec<(&'static str, SpanValue)>,
) -> CoreSpan {
    CoreSpan::start(name, true, || trace::request_parent(incoming), attributes)
}

async fn run(
    mut span: CoreSpan,
    incoming: Option<TraceContext>,
    request: Request,
    next: Next,
    finish: impl FnOnce(&mut CoreSpan, &Response),
) -> Response {
    let response = trace::scope(incoming, span.within(next.run(request))).await;
    if span.is_recording() {
        finish(&mut span, &response);
    }
    response
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn headers_give_the_context_and_bad_ones_none() {
        let mut headers = HeaderMap::new();
        assert_eq!(from_headers(&headers), None);
        headers.insert(
            "traceparent",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01"
                .parse()
                .unwrap(),
        );
        headers.insert("tracestate", "k=v".parse().unwrap());
        let context = from_headers(&headers).unwrap();
        assert_eq!(context.tracestate.as_deref(), Some("k=v"));
        headers.insert("traceparent", "00-nothex".parse().unwrap());
        assert_eq!(from_headers(&headers), None);
    }
}
