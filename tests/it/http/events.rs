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

/// A batch of `n` reads of one small file: many events in a burst, cheaply.
fn read_batch(file: &std::path::Path, n: usize) -> serde_json::Value {
    json!({"calls": (0..n).map(|i| json!({"id": format!("r{i}"), "name": "read_file", "input": {"file_path": file}})).collect::<Vec<_>>()})
}

#[tokio::test]
async fn a_subscriber_that_falls_behind_gets_lagged_and_resumes_without_loss() {
    // A tiny buffer: the burst of a 300-call batch cannot fit in it.
    let toold = Toold::start_with_config("[server]\nevent_buffer = 2\n");
    let id = toold.session().await;
    let file = toold.workspace(&id).await.join("small.txt");
    std::fs::write(&file, "small\n").unwrap();
    let events = format!("/v1/sessions/{id}/events");

    // Subscribed before the batch and not read until it is over.
    let mut slow = toold.sse(&events, None, Some(0)).await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &read_batch(&file, 300),
        )
        .await;
    assert_eq!(reply.status, reqwest::StatusCode::OK);
    let mut seen: Vec<u64> = Vec::new();
    let resume_after = loop {
        let frame = slow
            .next()
            .await
            .expect("a lagged event before the stream ends");
        if frame.event == "lagged" {
            assert_eq!(frame.id, None, "a lagged frame carries no id");
            break frame.data["resume_after"].as_u64().unwrap();
        }
        assert_ne!(frame.event, "batch:end", "the subscriber never lagged");
        seen.push(frame.id.unwrap().parse().unwrap());
    };
    assert!(slow.next().await.is_none(), "the stream ends after lagged");
    assert_eq!(seen.last().copied().unwrap_or(0), resume_after);

    // Resuming from resume_after replays the rest from the store.
    let mut resumed = toold.sse(&events, None, Some(resume_after)).await;
    loop {
        let frame = resumed.next().await.unwrap();
        assert_ne!(frame.event, "lagged");
        seen.push(frame.id.unwrap().parse().unwrap());
        if frame.event == "batch:end" {
            break;
        }
    }
    let expected: Vec<u64> = (1..=*seen.last().unwrap()).collect();
    assert_eq!(seen, expected, "every event exactly once, in order");
    // session:start, batch:start, 300 × (queued, pre, post), batch:end at least.
    assert!(seen.len() >= 3 + 300 * 3, "{} events", seen.len());
}
