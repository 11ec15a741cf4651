//! The gRPC door, with the generated client: every RPC B makes about A's session or result
//! fails as one about a missing id does (`NOT_FOUND`, the same message); B's `Subscribe` to
//! every session shows only B's; O's writes are `PERMISSION_DENIED`.

use serde_json::json;
use toold::api::grpc::proto::{self, ExecuteRequest, execute_request};

use super::{AGENT_A, AGENT_B, MISSING, OBSERVER, daemon, grpc_client, with};
use crate::grpc::harness::{Client, call, next};

/// The writing RPCs about `session` as `token`; each one's refusal.
async fn writes(client: &mut Client, token: &str, session: &str) -> Vec<tonic::Status> {
    let id = || session.to_owned();
    let batch = proto::ExecuteBatchRequest {
        session_id: id(),
        calls: vec![call("c1", "bash", json!({"command": "echo hi"}))],
        idempotency_key: String::new(),
    };
    let approval = proto::ResolveApprovalRequest {
        session_id: id(),
        approval_id: "appr_1".into(),
        decision: "allow".into(),
        ..Default::default()
    };
    vec![
        client.execute_batch(with(token, batch)).await.unwrap_err(),
        match client
            .execute(with(
                token,
                tokio_stream::iter(execute_messages(session, &[])),
            ))
            .await
        {
            Ok(_) => panic!("Execute accepted in {session}"),
            Err(status) => status,
        },
        client
            .resolve_approval(with(token, approval))
            .await
            .unwrap_err(),
        client
            .interrupt(with(token, proto::InterruptRequest { session_id: id() }))
            .await
            .unwrap_err(),
        client
            .close_session(with(token, proto::CloseSessionRequest { session_id: id() }))
            .await
            .unwrap_err(),
    ]
}

/// The reading RPCs about `session` and `result` as `token`: each one's answer.
async fn reads(
    client: &mut Client,
    token: &str,
    session: &str,
    result: &str,
) -> Vec<Result<(), tonic::Status>> {
    let id = || session.to_owned();
    let subscribe = proto::SubscribeRequest {
        session_id: id(),
        ..Default::default()
    };
    let tools = proto::ListToolsRequest {
        session_id: id(),
        format: String::new(),
    };
    let read = proto::GetResultRequest {
        result_id: result.to_owned(),
        offset: 0,
        limit: 10,
    };
    vec![
        client.subscribe(with(token, subscribe)).await.map(drop),
        client.list_tools(with(token, tools)).await.map(drop),
        client.get_result(with(token, read)).await.map(drop),
    ]
}

/// An `Execute` stream's messages: start in `session`, `commands` as calls, end.
fn execute_messages(session: &str, commands: &[&str]) -> Vec<ExecuteRequest> {
    let kind = |kind| ExecuteRequest { kind: Some(kind) };
    let start = proto::ExecuteStart {
        session_id: session.to_owned(),
    };
    let mut messages = vec![kind(execute_request::Kind::Start(start))];
    for (n, command) in commands.iter().enumerate() {
        let call = call(&format!("c{n}"), "bash", json!({"command": command}));
        messages.push(kind(execute_request::Kind::Call(call)));
    }
    messages.push(kind(execute_request::Kind::End(proto::ExecuteEnd {})));
    messages
}

#[tokio::test]
async fn another_agents_session_is_a_missing_one_over_grpc() {
    let toold = daemon();
    let mut client = grpc_client(&toold).await;
    let a = client
        .create_session(with(AGENT_A, proto::CreateSessionRequest::default()))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(a.principal, "agent-a");
    let ran = client
        .execute_batch(with(
            AGENT_A,
            proto::ExecuteBatchRequest {
                session_id: a.id.clone(),
                calls: vec![call("big", "bash", json!({"command": "seq 1 400000"}))],
                idempotency_key: String::new(),
            },
        ))
        .await
        .unwrap()
        .into_inner();
    let result = ran.results[0].result_id.clone();
    assert!(!result.is_empty(), "offloaded");
    let missing_result = "res_00000000000000000000000000000000";

    let mut theirs = writes(&mut client, AGENT_B, &a.id).await;
    let mut missing = writes(&mut client, AGENT_B, MISSING).await;
    let errors =
        |answers: Vec<Result<(), tonic::Status>>| answers.into_iter().map(|a| a.unwrap_err());
    theirs.extend(errors(reads(&mut client, AGENT_B, &a.id, &result).await));
    missing.extend(errors(
        reads(&mut client, AGENT_B, MISSING, missing_result).await,
    ));
    for (theirs, missing) in theirs.iter().zip(&missing) {
        assert_eq!(theirs.code(), tonic::Code::NotFound, "{theirs:?}");
        assert_eq!(theirs.code(), missing.code());
        let message = theirs
            .message()
            .replace(&a.id, MISSING)
            .replace(&result, missing_result);
        assert_eq!(message, missing.message());
    }

    // The observer reads, and every write is refused.
    for answer in reads(&mut client, OBSERVER, &a.id, &result).await {
        answer.expect("an observer reads");
    }
    for status in writes(&mut client, OBSERVER, &a.id).await {
        assert_eq!(status.code(), tonic::Code::PermissionDenied, "{status:?}");
    }
    let refused = client
        .create_session(with(OBSERVER, proto::CreateSessionRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
}

#[tokio::test]
async fn an_agents_subscription_to_every_session_shows_only_its_own() {
    let toold = daemon();
    let mut client = grpc_client(&toold).await;
    let session = proto::CreateSessionRequest::default;
    let a = client
        .create_session(with(AGENT_A, session()))
        .await
        .unwrap()
        .into_inner();
    let b = client
        .create_session(with(AGENT_B, session()))
        .await
        .unwrap()
        .into_inner();
    // Replayed from the first event (A's session's start among them), then live.
    let all = proto::SubscribeRequest {
        after_seq: Some(0),
        ..Default::default()
    };
    let mut events = client
        .subscribe(with(AGENT_B, all))
        .await
        .unwrap()
        .into_inner();
    for (token, id) in [(AGENT_A, &a.id), (AGENT_B, &b.id)] {
        let messages = execute_messages(id, &["echo one", "echo two"]);
        let mut responses = client
            .execute(with(token, tokio_stream::iter(messages)))
            .await
            .unwrap()
            .into_inner();
        while next(&mut responses).await.is_some() {}
    }
    loop {
        let event = next(&mut events).await.expect("B's events");
        assert_eq!(event.session_id, b.id, "A's event reached B: {event:?}");
        if event.r#type == "batch:end" {
            assert_eq!(event.actor, "agent-b");
            break;
        }
    }
}
