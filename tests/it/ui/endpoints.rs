//! What the dashboard added to the API: `GET /v1/approvals` (every session's pending
//! approvals in one list), `GET /v1/events?recent=N` (a stream opening with the stored
//! events among the newest N seqs) and `GET /v1/sessions/{id}/batches/{batch_id}/calls` (one
//! batch's audit rows), against the real daemon.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use crate::http::approvals::pending;
use crate::http::harness::{SseReader, Toold};

#[tokio::test]
async fn every_sessions_pending_approvals_in_one_list() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, "[permissions]\nask = [\"write_file\"]\n").unwrap();
    let toold = Toold::start_with(dir, &["--config", file.to_str().unwrap()]);
    let document = toold.get("/openapi.json").await.body;
    for path in [
        "/v1/approvals",
        "/ui",
        "/ui/app.js",
        "/ui/tail.js",
        "/ui/app.css",
    ] {
        assert!(
            document["paths"][path]["get"].is_object(),
            "{path} is documented"
        );
    }
    let empty = toold.get("/v1/approvals").await;
    assert_eq!(empty.status, StatusCode::OK);
    assert_eq!(empty.body, json!({"approvals": []}));
    let mut sessions = Vec::new();
    let mut batches = Vec::new();
    for name in ["a.txt", "b.txt"] {
        let session = toold.session_with(&json!({"interactive": true})).await;
        let body = json!({"calls": [{"id": "w", "name": "write_file", "input": {"file_path": name, "content": "x"}}]});
        let request = toold
            .client
            .post(format!("{}/v1/sessions/{session}/batches", toold.base))
            .header("content-type", "application/json")
            .body(serde_json::to_vec(&body).unwrap());
        batches.push(tokio::spawn(request.send()));
        pending(&toold, &session).await;
        sessions.push(session);
    }
    let every = toold.get("/v1/approvals").await;
    assert_eq!(every.status, StatusCode::OK, "{}", every.body);
    let listed: Vec<(&str, &str, &str)> = every.body["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| {
            (
                a["session_id"].as_str().unwrap(),
                a["tool"].as_str().unwrap(),
                a["input"]["file_path"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        listed,
        vec![
            (sessions[0].as_str(), "write_file", "a.txt"),
            (sessions[1].as_str(), "write_file", "b.txt"),
        ]
    );
    // Each is the same approval the session's own list shows, and resolving it empties both.
    for (approval, session) in every.body["approvals"]
        .as_array()
        .unwrap()
        .iter()
        .zip(&sessions)
    {
        let own = pending(&toold, session).await;
        assert_eq!(&own, approval);
        let id = approval["id"].as_str().unwrap();
        let reply = toold
            .post(
                &format!("/v1/sessions/{session}/approvals/{id}"),
                &json!({"decision": "deny"}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    for batch in batches {
        assert_eq!(batch.await.unwrap().unwrap().status(), StatusCode::OK);
    }
    assert_eq!(
        toold.get("/v1/approvals").await.body,
        json!({"approvals": []})
    );
}

/// The seqs of the next `n` frames.
async fn next_seqs(stream: &mut SseReader, n: usize) -> Vec<u64> {
    let mut seqs = Vec::new();
    while seqs.len() < n {
        let frame = stream.next().await.expect("the stream goes on");
        seqs.push(frame.data["seq"].as_u64().unwrap());
    }
    seqs
}

#[tokio::test]
async fn a_stream_can_open_with_the_newest_stored_events() {
    let toold = Toold::start();
    let session = toold.session().await;
    let calls: Vec<_> = (0..3)
        .map(|i| json!({"id": format!("c{i}"), "name": "read_file", "input": {"file_path": "none.txt"}}))
        .collect();
    toold.run_batch(&session, json!(calls)).await;
    // Every event so far, up to the batch's end: the newest seq.
    let mut all = toold.sse("/v1/events", None, Some(0)).await;
    let mut last_error = 0;
    let newest = loop {
        let frame = all.next().await.unwrap();
        let seq = frame.data["seq"].as_u64().unwrap();
        if frame.event == "tool:error" {
            last_error = seq;
        }
        if frame.event == "batch:end" {
            break seq;
        }
    };
    assert!(newest >= 8, "{newest}");

    // The newest five, then live ones with no gap.
    let mut recent = toold.sse("/v1/events?recent=5", None, None).await;
    toold.session().await;
    assert_eq!(
        next_seqs(&mut recent, 6).await,
        (newest - 4..=newest + 1).collect::<Vec<_>>()
    );
    // Filtered: only the matching events among the newest seqs (which reach back to the
    // last error, not to the two before it).
    let reach = newest + 1 - last_error + 1;
    let mut errors = toold
        .sse(
            &format!("/v1/events?recent={reach}&type=tool:error"),
            None,
            None,
        )
        .await;
    assert_eq!(next_seqs(&mut errors, 1).await, vec![last_error]);
    // Last-Event-ID wins over recent (a reconnection resumes where it was).
    let mut resumed = toold.sse("/v1/events?recent=5", None, Some(0)).await;
    assert_eq!(next_seqs(&mut resumed, 1).await, vec![1]);
    // More than exists: everything stored.
    let mut everything = toold.sse("/v1/events?recent=100000", None, None).await;
    assert_eq!(next_seqs(&mut everything, 1).await, vec![1]);
    // Zero: live only.
    let mut live = toold.sse("/v1/events?recent=0", None, None).await;
    toold.session().await;
    assert_eq!(next_seqs(&mut live, 1).await, vec![newest + 2]);

    for bad in ["recent=abc", "recent=-1", "recent=100001", "recent=1.5"] {
        let reply = toold.get(&format!("/v1/events?{bad}")).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{bad}");
        assert_eq!(reply.body["error"]["code"], "invalid_request", "{bad}");
    }
}

#[tokio::test]
async fn a_batchs_audit_rows_without_paging_through_the_session() {
    let toold = Toold::start();
    let (a, b) = (toold.session().await, toold.session().await);
    let read =
        |id: &str| json!({"id": id, "name": "read_file", "input": {"file_path": "none.txt"}});
    let first = toold.run_batch(&a, json!([read("x"), read("y")])).await;
    let second = toold.run_batch(&a, json!([read("x")])).await;
    let first_id = first["batch_id"].as_str().unwrap();
    let reply = toold
        .get(&format!("/v1/sessions/{a}/batches/{first_id}/calls"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let rows: Vec<(&str, &str)> = reply.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| {
            (
                row["batch_id"].as_str().unwrap(),
                row["call_id"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(rows, [(first_id, "x"), (first_id, "y")]);
    // The same rows as the session's whole log has for that batch.
    let log = toold.get(&format!("/v1/sessions/{a}/calls")).await;
    let from_log: Vec<_> = log.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["batch_id"] == first_id)
        .cloned()
        .collect();
    assert_eq!(reply.body["calls"].as_array().unwrap(), &from_log);
    let second_id = second["batch_id"].as_str().unwrap();
    let alone = toold
        .get(&format!("/v1/sessions/{a}/batches/{second_id}/calls"))
        .await;
    assert_eq!(alone.body["calls"].as_array().unwrap().len(), 1);
    // Another session's view of the batch, and an unknown batch: no rows; an unknown
    // session: 404.
    for path in [
        format!("/v1/sessions/{b}/batches/{first_id}/calls"),
        format!("/v1/sessions/{a}/batches/batch_nope/calls"),
    ] {
        let reply = toold.get(&path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}");
        assert_eq!(reply.body["calls"], json!([]), "{path}");
    }
    let unknown = toold
        .get(&format!("/v1/sessions/sess_nope/batches/{first_id}/calls"))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.body["error"]["code"], "not_found");
}
