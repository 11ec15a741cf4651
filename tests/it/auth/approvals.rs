//! A call of A's waiting for a person: B can neither see, answer nor interrupt it (each a
//! missing session's 404), O sees it and cannot answer (403); A answers, and the call runs on
//! as if nobody else had tried.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;
use toold::api::grpc::proto;

use super::{AGENT_A, AGENT_B, OBSERVER, bash, daemon, get, grpc_client, post, session_of, with};

#[tokio::test]
async fn only_the_sessions_agent_sees_and_answers_its_pending_approval() {
    let toold = std::sync::Arc::new(daemon());
    let a = session_of(&toold, AGENT_A, json!({"interactive": true})).await;
    let running = {
        let (toold, a) = (toold.clone(), a.clone());
        tokio::spawn(async move {
            post(
                &toold,
                AGENT_A,
                &format!("/v1/sessions/{a}/batches"),
                bash("echo ask waiting"),
            )
            .await
        })
    };
    let approvals = format!("/v1/sessions/{a}/approvals");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let approval = loop {
        let listed = get(&toold, AGENT_A, &approvals).await;
        if let Some(first) = listed.body["approvals"].as_array().and_then(|a| a.first()) {
            break first["id"].as_str().unwrap().to_owned();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let answer = format!("{approvals}/{approval}");

    // B: not found, whichever way it asks; the daemon-wide list (/ui's) has nothing of A's.
    let listed = get(&toold, AGENT_B, &approvals).await;
    assert_eq!(listed.status, StatusCode::NOT_FOUND, "{}", listed.body);
    let every = get(&toold, AGENT_B, "/v1/approvals").await;
    assert_eq!(every.status, StatusCode::OK, "{}", every.body);
    assert_eq!(every.body["approvals"], json!([]), "{}", every.body);
    let own = get(&toold, AGENT_A, "/v1/approvals").await;
    assert_eq!(
        own.body["approvals"][0]["id"],
        approval.as_str(),
        "{}",
        own.body
    );
    let allowed = post(&toold, AGENT_B, &answer, json!({"decision": "allow"})).await;
    assert_eq!(allowed.status, StatusCode::NOT_FOUND, "{}", allowed.body);
    assert!(!allowed.body.to_string().contains(&approval));
    let interrupted = post(
        &toold,
        AGENT_B,
        &format!("/v1/sessions/{a}/interrupt"),
        json!({}),
    )
    .await;
    assert_eq!(
        interrupted.status,
        StatusCode::NOT_FOUND,
        "{}",
        interrupted.body
    );
    let mut client = grpc_client(&toold).await;
    let request = with(
        AGENT_B,
        proto::ResolveApprovalRequest {
            session_id: a.clone(),
            approval_id: approval.clone(),
            decision: "allow".into(),
            ..Default::default()
        },
    );
    let refused = client.resolve_approval(request).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::NotFound, "{refused:?}");

    // O: sees it (in the daemon-wide list too), cannot answer it.
    let every = get(&toold, OBSERVER, "/v1/approvals").await;
    assert_eq!(
        every.body["approvals"][0]["id"],
        approval.as_str(),
        "{}",
        every.body
    );
    let seen = get(&toold, OBSERVER, &approvals).await;
    assert_eq!(
        seen.body["approvals"][0]["id"],
        approval.as_str(),
        "{}",
        seen.body
    );
    let denied = post(&toold, OBSERVER, &answer, json!({"decision": "deny"})).await;
    assert_eq!(denied.status, StatusCode::FORBIDDEN, "{}", denied.body);

    // A answers; the call runs as asked, nobody else's attempt having touched it.
    let allowed = post(&toold, AGENT_A, &answer, json!({"decision": "allow"})).await;
    assert_eq!(allowed.status, StatusCode::OK, "{}", allowed.body);
    let ran = running.await.unwrap();
    assert_eq!(
        ran.body["results"][0]["output"], "ask waiting\n",
        "{}",
        ran.body
    );
    let calls = get(&toold, AGENT_A, &format!("/v1/sessions/{a}/calls")).await;
    let row = &calls.body["calls"][0];
    assert_eq!(row["principal"], "agent-a", "{row}");
    assert_eq!(row["decision"]["decision"], "allow", "{row}");
}
