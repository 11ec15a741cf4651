//! HTTP hooks: the hook event's JSON POSTed to the configured URL; a 2xx answer's body is read
//! like a command hook's stdout (empty means "nothing to say").
//!
//! The call's trace context goes along as `traceparent` (and `tracestate`) headers.
//! One `reqwest` client for all HTTP hooks (the crate `web_fetch` already uses): no proxy, no
//! redirects (a hook URL is the operator's, and a redirect elsewhere is a misconfiguration to
//! report, not follow), the body read up to [`MAX_HOOK_OUTPUT_BYTES`]. Any other status, a
//! connection failure, a timeout or an oversized body is a hook failure. Deliberately absent:
//! what the body means (that is [`super::runner`]).

use std::time::Duration;

use super::reply::{HookReply, MAX_HOOK_OUTPUT_BYTES};
use crate::tool::trace;

pub(crate) struct HttpHook {
    url: String,
    client: reqwest::Client,
}

impl HttpHook {
    pub(crate) fn new(url: String, client: reqwest::Client) -> HttpHook {
        HttpHook { url, client }
    }

    /// The client HTTP hooks share.
    pub(crate) fn client() -> Result<reqwest::Client, String> {
        reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()
            .map_err(|err| format!("building the HTTP hook client: {err}"))
    }

    pub(crate) async fn run(&self, input: &[u8], timeout: Duration) -> HookReply {
        match tokio::time::timeout(timeout, self.post(input)).await {
            Err(_) => HookReply::Failed(format!("timed out after {} ms", timeout.as_millis())),
            Ok(Err(why)) => HookReply::Failed(why),
            Ok(Ok(body)) => HookReply::Answered(body),
        }
    }

    async fn post(&self, input: &[u8]) -> Result<Vec<u8>, String> {
        let mut request = self
            .client
            .post(&self.url)
            .header("content-type", "application/json");
        // The hook's span (or the request's context when spans are not exported).
        if let Some(context) = trace::current() {
            request = request.header("traceparent", context.traceparent());
            if let Some(state) = &context.tracestate {
                request = request.header("tracestate", state);
            }
        }
        let mut response = request
            .body(input.to_vec())
            .send()
            .await
            .map_err(|err| format!("request failed: {err}"))?;
        let status = response.status();
        if !status.is_success() {
            return Err(format!("answered HTTP {}", status.as_u16()));
        }
        let mut body = Vec::new();
        while let Some(chunk) = response
            .chunk()
            .await
            .map_err(|err| format!("reading the answer: {err}"))?
        {
            body.extend_from_slice(&chunk);
            if body.len() > MAX_HOOK_OUTPUT_BYTES {
                return Err(format!("its answer exceeded {MAX_HOOK_OUTPUT_BYTES} bytes"));
            }
        }
        Ok(body)
    }
}
