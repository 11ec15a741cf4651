//! The one listener serves both doors whether each connection runs inside `RepollOnSelfWake`
//! or not (`[server] repoll_self_wake`): HTTP/1.1 POSTs on one kept-alive connection (the
//! requests whose connection task wakes itself) and gRPC calls on one HTTP/2 connection.

use serde_json::{Value, json};

use crate::grpc::harness::{Toold, call};
use toold::api::grpc::proto;

/// The daemon with `repoll_self_wake` set in a settings file.
fn start(repoll_self_wake: bool) -> (Toold, tempfile::TempDir) {
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("toold.toml");
    std::fs::write(
        &file,
        format!("[server]\nrepoll_self_wake = {repoll_self_wake}\n"),
    )
    .unwrap();
    let toold = Toold::start_with(&["--config", file.to_str().unwrap()]);
    (toold, config)
}

/// A JSON POST: the status and the body.
async fn post_json(http: &reqwest::Client, url: &str, body: &Value) -> (u16, Value) {
    let reply = http
        .post(url)
        .header("content-type", "application/json")
        .body(body.to_string())
        .send()
        .await
        .unwrap();
    let status = reply.status().as_u16();
    let bytes = reply.bytes().await.unwrap();
    (
        status,
        serde_json::from_slice(&bytes).unwrap_or(Value::Null),
    )
}

async fn both_doors_answer(repoll_self_wake: bool) {
    let (toold, _config) = start(repoll_self_wake);
    // One connection for every HTTP request, so each POST after the first meets a connection
    // task that has already served one.
    let http = reqwest::Client::builder()
        .http1_only()
        .pool_max_idle_per_host(1)
        .build()
        .unwrap();
    let created = post_json(&http, &format!("{}/v1/sessions", toold.base), &json!({})).await;
    assert_eq!(created.0, 201, "{}", created.1);
    let created = created.1;
    let session = created["id"].as_str().unwrap().to_owned();
    let workspace = std::path::PathBuf::from(created["working_directory"].as_str().unwrap());
    std::fs::write(workspace.join("note.txt"), "on the one listener\n").unwrap();
    for round in 0..5 {
        let batch = json!({"calls": [
            {"id": format!("r{round}"), "name": "read_file", "input": {"file_path": "note.txt"}}
        ]});
        let url = format!("{}/v1/sessions/{session}/batches", toold.base);
        let (status, body) = post_json(&http, &url, &batch).await;
        assert_eq!(status, 200, "round {round}: {body}");
        let result = &body["results"][0];
        assert_eq!(result["is_error"], false, "{body}");
        assert!(
            result["output"]
                .as_str()
                .unwrap()
                .contains("on the one listener"),
            "{body}"
        );
    }

    let mut grpc = toold.client().await;
    for round in 0..5 {
        let answer = grpc
            .execute_batch(proto::ExecuteBatchRequest {
                session_id: session.clone(),
                calls: vec![call(
                    &format!("g{round}"),
                    "read_file",
                    json!({"file_path": "note.txt"}),
                )],
                idempotency_key: String::new(),
            })
            .await
            .expect("the gRPC door answers")
            .into_inner();
        let result = &answer.results[0];
        assert!(!result.is_error, "{result:?}");
        assert!(result.output.contains("on the one listener"), "{result:?}");
    }
    // And HTTP again after gRPC, on the same listener.
    let health = http
        .get(format!("{}/healthz", toold.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
}

#[tokio::test]
async fn both_doors_answer_with_repoll_on_self_wake() {
    both_doors_answer(true).await;
}

#[tokio::test]
async fn both_doors_answer_without_repoll_on_self_wake() {
    both_doors_answer(false).await;
}
