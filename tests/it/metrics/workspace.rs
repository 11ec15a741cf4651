//! The workspace's series: bytes in and out of sessions (`toold_workspace_bytes_total` by
//! `direction`), snapshots taken (a fork's included) and the fork latency histogram, each
//! with the value a run of uploads, downloads, a snapshot and a fork implies.

use std::time::Duration;

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::exposition::{promtool_check, sample, value};
use crate::http::harness::Toold;
use crate::support::deadline::within;

async fn metrics(toold: &Toold) -> String {
    let (status, text) = toold.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text
}

/// `/metrics` once `name{labels}` reads `expected` (a download's bytes are counted when its
/// body has been sent, a moment after the client read the last byte).
async fn once(toold: &Toold, name: &str, labels: &[(&str, &str)], expected: f64) -> String {
    within(Duration::from_secs(10), "the metric to settle", async {
        loop {
            let text = metrics(toold).await;
            if sample(&text, name, labels) == Some(expected) {
                return text;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    })
    .await
}

#[tokio::test]
async fn bytes_in_and_out_snapshots_and_fork_latency_show_in_metrics() {
    let toold = Toold::start();
    let session = toold.session().await;
    let text = metrics(&toold).await;
    assert_eq!(value(&text, "toold_snapshots_total", &[]), 0.0);

    let data = vec![7u8; 1000];
    let put = toold
        .request(Method::PUT, &format!("/v1/sessions/{session}/files/a.bin"))
        .body(data);
    let reply = toold.send(put).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    once(
        &toold,
        "toold_workspace_bytes_total",
        &[("direction", "in")],
        1000.0,
    )
    .await;

    let (status, body) = toold
        .get_text(&format!("/v1/sessions/{session}/files/a.bin"))
        .await;
    assert_eq!((status, body.len()), (StatusCode::OK, 1000));
    let ranged = toold
        .request(Method::GET, &format!("/v1/sessions/{session}/files/a.bin"))
        .header("range", "bytes=0-99");
    let response = ranged.send().await.unwrap();
    assert_eq!(response.status(), StatusCode::PARTIAL_CONTENT);
    assert_eq!(response.bytes().await.unwrap().len(), 100);
    once(
        &toold,
        "toold_workspace_bytes_total",
        &[("direction", "out")],
        1100.0,
    )
    .await;

    let reply = toold
        .post(&format!("/v1/sessions/{session}/snapshots"), &json!({}))
        .await;
    assert!(reply.status.is_success(), "{}", reply.body);
    once(&toold, "toold_snapshots_total", &[], 1.0).await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{session}/fork"),
            &json!({"count": 2}),
        )
        .await;
    assert!(reply.status.is_success(), "{}", reply.body);
    // The fork's own snapshot counts; the fork is one observation of its latency.
    let text = once(&toold, "toold_snapshots_total", &[], 2.0).await;
    assert_eq!(value(&text, "toold_fork_duration_seconds_count", &[]), 1.0);
    assert!(value(&text, "toold_fork_duration_seconds_sum", &[]) > 0.0);
    assert_eq!(
        value(
            &text,
            "toold_fork_duration_seconds_bucket",
            &[("le", "+Inf")]
        ),
        1.0
    );
    assert!(
        text.contains("# TYPE toold_fork_duration_seconds histogram"),
        "{text}"
    );
    promtool_check(&text);
}
