//! The gates over real HTTP: load shedding (429), the request timeout (408) and shutting down
//! (503 or a refused connection), each with the documented error body.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::{Reply, Toold};

fn sleep_batch(ms: u64) -> Value {
    json!({"calls": [{"id": "s", "name": "sleep", "input": {"duration_ms": ms}}]})
}

fn assert_error(reply: &Reply, status: StatusCode, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], code, "{}", reply.body);
    assert!(reply.body["error"]["message"].is_string(), "{}", reply.body);
}

/// Posts a long `sleep` batch in the background and returns once its call has started (seen
/// on an event stream opened before it, which holds no request permit once its head is sent).
async fn hold_a_request(
    toold: &Arc<Toold>,
    session: &str,
    ms: u64,
) -> tokio::task::JoinHandle<Reply> {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, None)
        .await;
    let running = {
        let (toold, session) = (toold.clone(), session.to_owned());
        tokio::spawn(async move {
            toold
                .post(&format!("/v1/sessions/{session}/batches"), &sleep_batch(ms))
                .await
        })
    };
    while let Some(frame) = events.next().await {
        if frame.event == "tool:pre" {
            return running;
        }
    }
    panic!("the event stream ended before the sleep started");
}

#[tokio::test]
async fn a_request_over_the_concurrency_limit_is_shed_with_429() {
    let toold = Arc::new(Toold::start_with_config(
        "[server]\nmax_concurrent_requests = 1\n",
    ));
    let id = toold.session().await;
    let _running = hold_a_request(&toold, &id, 300_000).await;
    assert_error(
        &toold.get(&format!("/v1/sessions/{id}")).await,
        StatusCode::TOO_MANY_REQUESTS,
        "overloaded",
    );
    // Probes pass the load-shedding gate.
    assert_eq!(toold.get("/healthz").await.status, StatusCode::OK);
}

#[tokio::test]
async fn a_slow_request_times_out_with_408() {
    let toold = Toold::start_with_config("[server]\nrequest_timeout_ms = 300\n");
    let id = toold.session().await;
    let reply = toold
        .post(&format!("/v1/sessions/{id}/batches"), &sleep_batch(300_000))
        .await;
    assert_error(&reply, StatusCode::REQUEST_TIMEOUT, "timeout");
    // The daemon stays up and answers the next request.
    assert_eq!(
        toold.get(&format!("/v1/sessions/{id}")).await.status,
        StatusCode::OK
    );
}

#[tokio::test]
async fn while_shutting_down_new_requests_are_refused_and_running_batches_finish() {
    let toold = Arc::new(Toold::start());
    let id = toold.session().await;
    let running = hold_a_request(&toold, &id, 1_500).await;
    toold.signal_terminate();
    // The listener closes on SIGTERM: a new request is refused at connect, or, if it gets in
    // before the close, answered 503 with the error body. It is never served.
    let started = std::time::Instant::now();
    loop {
        let sent = toold
            .client
            .get(format!("{}/v1/sessions/{id}", toold.base))
            .send()
            .await;
        match sent {
            // Refused at connect, or a kept-alive connection the draining server closed: either
            // way the request was not served.
            Err(_) => break,
            Ok(response) if response.status() == StatusCode::SERVICE_UNAVAILABLE => {
                let body: Value = serde_json::from_slice(&response.bytes().await.unwrap()).unwrap();
                assert_eq!(body["error"]["code"], "shutting_down", "{body}");
                break;
            }
            // The signal may not have been handled yet.
            Ok(response) => {
                assert_eq!(response.status(), StatusCode::OK);
                assert!(
                    started.elapsed().as_secs() < 30,
                    "SIGTERM never took effect"
                );
                tokio::time::sleep(std::time::Duration::from_millis(20)).await;
            }
        }
    }
    // The batch that was running when the signal came finishes within the grace period.
    let reply = running.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(
        reply.body["results"][0]["is_error"], false,
        "{}",
        reply.body
    );
    let mut toold = Arc::into_inner(toold).expect("no other holder");
    assert!(toold.wait().success());
}
