//! The daemon's life: idempotent retries (of a batch cut off by `kill -9` too), interrupts,
//! graceful restarts, `kill -9`, auth and refusing to start unprotected on a public address.

use std::process::{Command, Stdio};
use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use super::harness::Toold;
use crate::support::deadline::{OutputWithin, STEP};

#[tokio::test]
async fn an_idempotent_retry_does_not_run_a_write_twice() {
    let toold = Toold::start();
    let id = toold.session().await;
    let workspace = toold.get(&format!("/v1/sessions/{id}")).await.body["working_directory"]
        .as_str()
        .unwrap()
        .to_owned();
    let file = std::path::Path::new(&workspace).join("out.txt");
    let body = json!({"idempotency_key": "k1", "calls": [
        {"id": "w", "name": "write_file", "input": {"file_path": file, "content": "first\n"}}]});
    let path = format!("/v1/sessions/{id}/batches");
    let first = toold.post(&path, &body).await;
    assert_eq!(
        first.body["results"][0]["is_error"], false,
        "{}",
        first.body
    );
    std::fs::write(&file, "changed by someone else\n").unwrap();

    let retry = toold.post(&path, &body).await;
    assert_eq!(retry.status, StatusCode::OK);
    assert_eq!(retry.headers["x-toold-replayed"], "true");
    assert_eq!(retry.body, first.body);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "changed by someone else\n"
    );
    let calls = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    assert_eq!(calls.body["calls"].as_array().unwrap().len(), 1);

    let mut different = body.clone();
    different["calls"][0]["input"]["content"] = json!("second\n");
    let conflict = toold.post(&path, &different).await;
    assert_eq!(conflict.status, StatusCode::CONFLICT);
    assert_eq!(conflict.body["error"]["code"], "conflict");
}

/// Waits on the session's event stream until `call_id` has started.
async fn wait_for_start(toold: &Toold, session: &str, call_id: &str) {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    while let Some(frame) = events.next().await {
        if frame.event == "tool:pre" && frame.data["call_id"] == call_id {
            return;
        }
    }
    panic!("the event stream ended before {call_id} started");
}

#[tokio::test]
async fn interrupt_cancels_a_running_sleep() {
    let toold = Arc::new(Toold::start());
    let id = toold.session().await;
    let running = {
        let (toold, id) = (toold.clone(), id.clone());
        tokio::spawn(async move {
            toold
                .post(
                    &format!("/v1/sessions/{id}/batches"),
                    &json!({"calls": [{"id": "s", "name": "sleep", "input": {"duration_ms": 300000}}]}),
                )
                .await
                .body
        })
    };
    wait_for_start(&toold, &id, "s").await;
    let reply = toold
        .post(&format!("/v1/sessions/{id}/interrupt"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let body = running.await.unwrap();
    assert_eq!(body["results"][0]["error_kind"], "cancelled", "{body}");
}

#[tokio::test]
async fn a_graceful_restart_keeps_sessions_and_the_audit_log() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batch = json!({"calls": [{"id": "a", "name": "bash", "input": {"command": "echo a"}},
                                 {"id": "b", "name": "bash", "input": {"command": "echo b"}}]});
    toold
        .post(&format!("/v1/sessions/{id}/batches"), &batch)
        .await;
    let dir = toold.dir.clone();
    let status = toold.terminate();
    assert!(status.success(), "SIGTERM exits 0, got {status}");

    let again = Toold::start_with(dir, &[]);
    assert_eq!(
        again.get(&format!("/v1/sessions/{id}")).await.status,
        StatusCode::OK
    );
    let calls = again.get(&format!("/v1/sessions/{id}/calls")).await;
    let mut ids: Vec<&str> = calls.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    // Read-only calls run in parallel: the log is in completion order.
    ids.sort_unstable();
    assert_eq!(ids, ["a", "b"]);
    let more = again
        .post(&format!("/v1/sessions/{id}/batches"), &batch)
        .await;
    assert_eq!(more.body["results"][1]["output"], "b\n");
    // The event log continues after the stored seqs: no seq is reused.
    let mut events = again
        .sse(&format!("/v1/sessions/{id}/events"), None, Some(0))
        .await;
    let mut seqs = Vec::new();
    let mut ends = 0;
    while ends < 2 {
        let frame = events.next().await.unwrap();
        seqs.push(frame.id.unwrap().parse::<u64>().unwrap());
        ends += usize::from(frame.event == "batch:end");
    }
    assert!(seqs.windows(2).all(|w| w[0] < w[1]), "{seqs:?}");
}

#[tokio::test]
async fn kill_9_during_a_batch_keeps_an_audit_row_for_every_returned_result() {
    let toold = Toold::start();
    let id = toold.session().await;
    let body = json!({"calls": [
        {"id": "w1", "name": "bash", "input": {"command": "echo one > one.txt"}},
        {"id": "w2", "name": "bash", "input": {"command": "echo two > two.txt"}},
        {"id": "s", "name": "sleep", "input": {"duration_ms": 300000}}]});
    let mut stream = toold
        .sse(&format!("/v1/sessions/{id}/batches"), Some(&body), None)
        .await;
    let mut returned = Vec::new();
    while returned.len() < 2 {
        let frame = stream.next().await.unwrap();
        if frame.event == "result" {
            returned.push(frame.data["id"].as_str().unwrap().to_owned());
        }
    }
    let again = toold.kill_and_restart();
    let calls = again.get(&format!("/v1/sessions/{id}/calls")).await;
    let audited: Vec<&str> = calls.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["call_id"].as_str().unwrap())
        .collect();
    for call in &returned {
        assert!(
            audited.contains(&call.as_str()),
            "{call} missing from {audited:?}"
        );
    }
}

#[tokio::test]
async fn tokens_guard_everything_but_the_probes() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let toold = Toold::start_with(dir, &["--auth-token", "s3cret"]);
    let bare = reqwest::Client::new();
    let without = bare
        .get(format!("{}/v1/sessions", toold.base))
        .send()
        .await
        .unwrap();
    assert_eq!(without.status(), StatusCode::UNAUTHORIZED);
    let body: serde_json::Value = serde_json::from_slice(&without.bytes().await.unwrap()).unwrap();
    assert_eq!(body["error"]["code"], "unauthenticated");
    let wrong = bare
        .get(format!("{}/v1/sessions", toold.base))
        .bearer_auth("nope")
        .send()
        .await
        .unwrap();
    assert_eq!(wrong.status(), StatusCode::UNAUTHORIZED);
    for probe in ["/healthz", "/readyz"] {
        let open = bare
            .get(format!("{}{probe}", toold.base))
            .send()
            .await
            .unwrap();
        assert_eq!(open.status(), StatusCode::OK, "{probe}");
    }
    assert_eq!(toold.get("/v1/sessions").await.status, StatusCode::OK);
}

#[test]
fn it_refuses_to_listen_publicly_without_tokens() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toold"))
        .args(["serve", "--data-dir"])
        .arg(dir.path().join("data"))
        .env_remove("TOOLD_AUTH_TOKENS")
        .env_remove("TOOLD_CONFIG")
        .env("TOOLD_LISTEN", "0.0.0.0:0")
        .stdin(Stdio::null())
        .output_within(STEP, "toold serve")
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("non-loopback") && stderr.contains("0.0.0.0"),
        "{stderr}"
    );
    assert!(output.stdout.is_empty());
}

#[tokio::test]
async fn a_keyed_batch_cut_off_by_kill_9_is_answered_from_its_audit_rows_after_a_restart() {
    let toold = Toold::start();
    let id = toold.session().await;
    let path = format!("/v1/sessions/{id}/batches");
    let body = json!({"idempotency_key": "cut", "calls": [
        {"id": "s", "name": "sleep", "input": {"duration_ms": 300000}},
        {"id": "e", "name": "bash", "input": {"command": "echo cut off"}}]});
    let request = toold
        .client
        .post(format!("{}{path}", toold.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap());
    let running = tokio::spawn(request.send());
    wait_for_start(&toold, &id, "s").await;
    // The calls' `tool:queued` events reach the store within ~10 ms (the persister's linger
    // and the writer's): what the restart marks interrupted.
    tokio::time::sleep(std::time::Duration::from_millis(300)).await;
    let again = toold.kill_and_restart();
    assert!(running.await.unwrap().is_err(), "cut off");
    let retry = again.post(&path, &body).await;
    assert_eq!(retry.status, StatusCode::OK, "{}", retry.body);
    assert_eq!(retry.headers["x-toold-replayed"], "true");
    let results = retry.body["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["s", "e"]);
    let rows = again.get(&format!("/v1/sessions/{id}/calls")).await;
    for result in results {
        assert_eq!(result["error_kind"], "cancelled", "{result}");
        let row = rows.body["calls"]
            .as_array()
            .unwrap()
            .iter()
            .find(|row| row["call_id"] == result["id"])
            .expect("the result's audit row");
        assert_eq!(row["batch_id"], retry.body["batch_id"]);
        assert_eq!(row["interrupted"], true);
    }
    assert_eq!(
        again.post(&path, &body).await.body,
        retry.body,
        "replayed alike"
    );
}
