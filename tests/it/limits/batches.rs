//! `concurrent_batches_per_principal`: whole and streamed batches over HTTP and gRPC, per
//! principal, and the slot's return when a batch ends, fails or is dropped by its client.

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::json;
use toold::api::grpc::proto::ExecuteBatchRequest;

use super::{assert_grpc_limited, assert_limited, hold, limited, run};
use crate::auth::{AGENT_A, AGENT_B, bash, grpc_client, session_of, with};
use crate::grpc::harness::call;
use crate::mcp::McpClient;

const KEY: &str = "concurrent_batches_per_principal";

#[tokio::test]
async fn a_principal_runs_at_most_its_batches_at_once_and_others_are_not_limited() {
    let toold = Arc::new(limited("concurrent_batches_per_principal = 1"));
    let a1 = session_of(&toold, AGENT_A, json!({})).await;
    let a2 = session_of(&toold, AGENT_A, json!({})).await;
    let b1 = session_of(&toold, AGENT_B, json!({})).await;
    let (held, dir) = hold(&toold, AGENT_A, &a1).await;

    // A's second batch, whole or streamed, in another of its sessions: refused.
    assert_limited(&run(&toold, AGENT_A, &a2, bash("echo hi")).await, KEY);
    let streamed = toold
        .request_as(
            Some(AGENT_A),
            Method::POST,
            &format!("/v1/sessions/{a2}/batches"),
        )
        .header("accept", "text/event-stream")
        .header("content-type", "application/json")
        .body(bash("echo hi").to_string());
    assert_limited(&toold.send(streamed).await, KEY);
    let mut client = grpc_client(&toold).await;
    let batch = |session: &str| ExecuteBatchRequest {
        session_id: session.to_owned(),
        calls: vec![call("c1", "bash", json!({"command": "echo hi"}))],
        idempotency_key: String::new(),
    };
    assert_grpc_limited(client.execute_batch(with(AGENT_A, batch(&a2))).await, KEY);

    // B is not limited by A.
    let reply = run(&toold, AGENT_B, &b1, bash("echo from b")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    client
        .execute_batch(with(AGENT_B, batch(&b1)))
        .await
        .unwrap();

    // Once A's batch ends, its slot is A's again.
    std::fs::write(dir.join("release"), "").unwrap();
    let reply = held.await.unwrap();
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(
        reply.body["results"][0]["output"]
            .as_str()
            .unwrap()
            .contains("released")
    );
    let reply = run(&toold, AGENT_A, &a2, bash("echo again")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn an_mcp_call_over_the_limit_is_a_json_rpc_error_naming_the_limit() {
    let toold = Arc::new(limited("concurrent_batches_per_principal = 1"));
    let a1 = session_of(&toold, AGENT_A, json!({})).await;
    let a2 = session_of(&toold, AGENT_A, json!({})).await;
    let (held, dir) = hold(&toold, AGENT_A, &a1).await;
    let path = format!("/v1/sessions/{a2}/mcp");
    let mut mcp = McpClient::new(&toold, &path).token(AGENT_A);
    let refused = mcp.call_tool("bash", json!({"command": "echo hi"})).await;
    let error = &refused.message["error"];
    assert_eq!(error["code"], -32029, "{}", refused.text);
    assert_eq!(error["data"]["code"], "limit_exceeded", "{}", refused.text);
    assert!(
        error["message"].as_str().unwrap().contains(KEY),
        "{}",
        refused.text
    );
    std::fs::write(dir.join("release"), "").unwrap();
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
    let called = mcp.call_tool("bash", json!({"command": "echo hi"})).await;
    assert_eq!(
        called.message["result"]["isError"], false,
        "{}",
        called.text
    );
}

#[tokio::test]
async fn a_batch_that_fails_or_is_dropped_by_its_client_gives_its_slot_back() {
    let toold = Arc::new(limited("concurrent_batches_per_principal = 1"));
    let a1 = session_of(&toold, AGENT_A, json!({})).await;
    let keyed = |command: &str| {
        let mut body = bash(command);
        body["idempotency_key"] = json!("k1");
        body
    };
    // A batch that fails inside its run (a key reused with another body) ...
    let reply = run(&toold, AGENT_A, &a1, keyed("echo one")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    for _ in 0..3 {
        let reply = run(&toold, AGENT_A, &a1, keyed("echo two")).await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.body);
    }
    // ... or before it (malformed, an unknown tool's batch is fine, a bad envelope is not).
    for _ in 0..3 {
        let reply = run(&toold, AGENT_A, &a1, json!({"calls": "nope"})).await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    }
    let reply = run(&toold, AGENT_A, &a1, bash("echo three")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);

    // A client that goes away: its batch runs on, holding the slot, until it ends.
    let (abandoned, dir) = hold(&toold, AGENT_A, &a1).await;
    abandoned.abort();
    assert!(abandoned.await.is_err_and(|err| err.is_cancelled()));
    let a2 = session_of(&toold, AGENT_A, json!({})).await;
    assert_limited(&run(&toold, AGENT_A, &a2, bash("echo hi")).await, KEY);
    std::fs::write(dir.join("release"), "").unwrap();
    // It ends on its own; then the slot is free (polled: the end is not observable otherwise).
    for attempt in 0.. {
        let reply = run(&toold, AGENT_A, &a2, bash("echo after")).await;
        if reply.status == StatusCode::OK {
            break;
        }
        assert_limited(&reply, KEY);
        assert!(attempt < 200, "the dropped batch's slot never came back");
        tokio::time::sleep(std::time::Duration::from_millis(100)).await;
    }
}

#[tokio::test]
async fn without_limits_a_principal_runs_batches_and_sessions_freely() {
    let toold = Arc::new(limited(
        "concurrent_batches_per_principal = 0\nsessions_per_principal = 0\n\
         requests_per_second_per_principal = 0",
    ));
    let mut sessions = Vec::new();
    for _ in 0..4 {
        sessions.push(session_of(&toold, AGENT_A, json!({})).await);
    }
    let (held, dir) = hold(&toold, AGENT_A, &sessions[0]).await;
    let replies = futures::future::join_all(
        sessions[1..]
            .iter()
            .cycle()
            .take(12)
            .map(|id| run(&toold, AGENT_A, id, bash("echo free"))),
    )
    .await;
    for reply in replies {
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    }
    std::fs::write(dir.join("release"), "").unwrap();
    assert_eq!(held.await.unwrap().status, StatusCode::OK);
}
