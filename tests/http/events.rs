//! Event streams: a client that disconnects and resumes with `Last-Event-ID` sees every event
//! exactly once; the filters of `/v1/events` apply.

use std::collections::BTreeSet;

use serde_json::json;

use super::harness::Toold;

fn echo_batch(n: usize) -> serde_json::Value {
    json!({"calls": (0..n).map(|i| json!({"id": format!("c{i}"), "name": "bash", "input": {"command": format!("echo {i}")}})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn a_resumed_subscriber_sees_every_event_exactly_once() {
    let toold = Toold::start();
    let id = toold.session().await;
    let events = format!("/v1/sessions/{id}/events");
    let batches = format!("/v1/sessions/{id}/batches");

    // From the beginning: replayed session:start, then live events of a first batch.
    let mut first = toold.sse(&events, None, Some(0)).await;
    toold.post(&batches, &echo_batch(3)).await;
    let mut seen: Vec<u64> = Vec::new();
    loop {
        let frame = first.next().await.unwrap();
        seen.push(frame.id.unwrap().parse().unwrap());
        if frame.event == "batch:end" {
            break;
        }
    }
    drop(first);

    // While disconnected, two more batches run; then resume.
    toold.post(&batches, &echo_batch(2)).await;
    toold.post(&batches, &echo_batch(2)).await;
    let last = *seen.last().unwrap();
    let mut resumed = toold.sse(&events, None, Some(last)).await;
    toold.post(&batches, &echo_batch(1)).await;
    let mut batch_ends = 0;
    while batch_ends < 3 {
        let frame = resumed.next().await.unwrap();
        assert_eq!(frame.data["session_id"], id.as_str());
        seen.push(frame.id.unwrap().parse().unwrap());
        if frame.event == "batch:end" {
            batch_ends += 1;
        }
    }
    let unique: BTreeSet<u64> = seen.iter().copied().collect();
    assert_eq!(unique.len(), seen.len(), "duplicates in {seen:?}");
    let expected: Vec<u64> = (seen[0]..=*seen.last().unwrap()).collect();
    assert_eq!(seen, expected, "a gap or disorder");
    assert_eq!(seen[0], 1);
}

#[tokio::test]
async fn the_global_stream_filters_by_session_tool_and_type() {
    let toold = Toold::start();
    let a = toold.session().await;
    let b = toold.session().await;
    let mut posts = toold
        .sse(
            &format!("/v1/events?session={a}&type=tool:post&tool=bash"),
            None,
            Some(0),
        )
        .await;
    toold
        .post(&format!("/v1/sessions/{b}/batches"), &echo_batch(1))
        .await;
    toold
        .post(&format!("/v1/sessions/{a}/batches"), &echo_batch(2))
        .await;
    for _ in 0..2 {
        let frame = posts.next().await.unwrap();
        assert_eq!(frame.event, "tool:post");
        assert_eq!(frame.data["session_id"], a.as_str());
        assert_eq!(frame.data["tool"], "bash");
    }
    assert_eq!(
        toold.get("/v1/sessions/sess_nope/events").await.status,
        reqwest::StatusCode::NOT_FOUND
    );
}
