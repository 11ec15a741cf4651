//! `toold tail -o json` across a graceful restart of the daemon: every event of the session
//! is printed exactly once, in seq order, as the server's event JSON, including those of a
//! batch running when the daemon was stopped and of one that ran while the client was
//! disconnected (replayed after the last seq it printed).

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt, BufReader, Lines};
use tokio::process::ChildStdout;

use super::harness::client;
use crate::http::harness::{SseReader, Toold};

fn echo_batch(tag: &str, n: usize) -> Value {
    json!({"calls": (0..n)
        .map(|i| json!({"id": format!("{tag}{i}"), "name": "bash", "input": {"command": format!("echo {tag}{i}")}}))
        .collect::<Vec<_>>()})
}

/// Lines of the tail until (and with) the next `batch:end`, each parsed (30 s guard).
async fn until_batch_end(lines: &mut Lines<BufReader<ChildStdout>>) -> Vec<Value> {
    until_batch_end_or(lines, |_| false).await
}

/// Lines of the tail until (and with) the next `batch:end` or event that `stop` picks.
async fn until_batch_end_or(
    lines: &mut Lines<BufReader<ChildStdout>>,
    stop: impl Fn(&Value) -> bool,
) -> Vec<Value> {
    let mut events = Vec::new();
    loop {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("the tail prints the batch within 30 s")
            .unwrap()
            .expect("the tail goes on");
        let event: Value = serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("a line that is not JSON ({err}): {line:?}"));
        let end = event["type"] == "batch:end" || stop(&event);
        events.push(event);
        if end {
            return events;
        }
    }
}

/// The stored events of a stream until its `ends`-th `batch:end`.
async fn stored_until(stream: &mut SseReader, ends: usize) -> Vec<Value> {
    let mut events = Vec::new();
    let mut seen = 0;
    while seen < ends {
        let frame = stream.next().await.expect("the stream goes on");
        seen += usize::from(frame.event == "batch:end");
        events.push(frame.data);
    }
    events
}

/// Reads the tail's lines until one is `event` of call `call`; they are kept in `printed`.
async fn until_event(
    lines: &mut Lines<BufReader<ChildStdout>>,
    printed: &mut Vec<Value>,
    event: &str,
    call: &str,
) {
    loop {
        let mut batch =
            until_batch_end_or(lines, |e| e["type"] == event && e["call_id"] == call).await;
        let found = batch.last().is_some_and(|e| e["type"] == event);
        printed.append(&mut batch);
        if found {
            return;
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn tail_json_prints_every_event_exactly_once_across_a_daemon_restart() {
    let toold = Toold::start();
    let session = toold.session().await;
    let mut tail = client(
        &toold,
        &[
            "tail",
            "--session",
            &session,
            "-o",
            "json",
            "--since-seq",
            "0",
        ],
    )
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    let batches = format!("/v1/sessions/{session}/batches");
    let reply = toold.post(&batches, &echo_batch("a", 3)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let mut printed = until_batch_end(&mut lines).await;

    // A batch running when SIGTERM comes: the daemon drains it while the stream goes away,
    // so the rest of its events reach the tail from the next daemon's replay.
    let running =
        json!({"calls": [{"id": "s0", "name": "bash", "input": {"command": "sleep 1; echo s0"}}]});
    let url = format!("{}{batches}", toold.base);
    let draining = tokio::spawn(async move {
        reqwest::Client::new()
            .post(url)
            .header("content-type", "application/json")
            .body(running.to_string())
            .send()
            .await
            .map(|reply| reply.status())
    });
    until_event(&mut lines, &mut printed, "tool:pre", "s0").await;
    let toold = tokio::task::spawn_blocking(move || toold.terminate_and_restart(&[]))
        .await
        .unwrap();
    assert_eq!(
        draining.await.unwrap().ok(),
        Some(StatusCode::OK),
        "the drain finished the batch"
    );
    printed.extend(until_batch_end(&mut lines).await);

    // A batch run while the client is away or reconnecting: it must come from the replay.
    let reply = toold.post(&batches, &echo_batch("b", 3)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    printed.extend(until_batch_end(&mut lines).await);

    let seqs: Vec<u64> = printed.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert!(
        seqs.windows(2).all(|w| w[0] < w[1]),
        "no duplicate, in order: {seqs:?}"
    );
    let posts = |tag: &str| {
        printed
            .iter()
            .filter(|e| e["type"] == "tool:post" && e["call_id"].as_str().unwrap().starts_with(tag))
            .count()
    };
    assert_eq!(
        (posts("a"), posts("s"), posts("b")),
        (3, 1, 3),
        "{printed:?}"
    );
    // Exactly what the store holds for the session, event for event (no gap).
    let mut stored = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    assert_eq!(printed, stored_until(&mut stored, 3).await);

    tail.kill().await.unwrap();
    let mut notices = String::new();
    tail.stderr
        .take()
        .unwrap()
        .read_to_string(&mut notices)
        .await
        .unwrap();
    assert!(notices.contains("reconnecting"), "{notices}");
    assert!(
        notices.contains("reconnected, resuming after seq"),
        "{notices}"
    );
}

#[tokio::test]
async fn tail_text_prints_one_line_per_event_with_the_filters_applied() {
    let toold = Toold::start();
    let session = toold.session().await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{session}/batches"),
            &echo_batch("t", 2),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let mut tail = client(
        &toold,
        &[
            "tail",
            "--type",
            "tool:post",
            "--tool",
            "bash",
            "--since-seq",
            "0",
        ],
    )
    .spawn()
    .unwrap();
    let mut lines = BufReader::new(tail.stdout.take().unwrap()).lines();
    let mut calls = Vec::new();
    for _ in 0..2 {
        let line = tokio::time::timeout(Duration::from_secs(30), lines.next_line())
            .await
            .expect("a line within 30 s")
            .unwrap()
            .unwrap();
        let columns: Vec<&str> = line.split_whitespace().collect();
        // Not a terminal: no colour codes around the session.
        assert_eq!(
            &columns[1..4],
            [session.as_str(), "tool:post", "bash"],
            "{line}"
        );
        calls.push(columns[4].to_owned());
    }
    // The two calls ran in parallel: either may end first.
    calls.sort();
    assert_eq!(calls, ["t0", "t1"]);
    tail.kill().await.unwrap();

    let bad_type = super::harness::run(&toold, &["tail", "--type", "tool:nope"]).await;
    assert_eq!(bad_type.code, 2, "{bad_type:?}");
    assert!(bad_type.stderr.contains("tool:nope"), "{bad_type:?}");
}
