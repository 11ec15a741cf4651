//! `ResolveApproval` for real: an `ask` rule in an interactive session holds a call of an
//! `Execute` stream until a gRPC client allows it (seen through `permission:ask`), and the
//! audit row names the gRPC door and the token's fingerprint as the approver.

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use toold::api::grpc::proto::{self, ExecuteRequest, execute_request, execute_response};

use crate::harness::{Toold, call, next};

const TOKEN: &str = "approver-secret";

fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value = MetadataValue::try_from(format!("Bearer {TOKEN}")).unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

#[tokio::test]
async fn an_approval_resolved_over_grpc_runs_the_call_and_names_the_approver() {
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("toold.toml");
    std::fs::write(&file, "[permissions]\nask = [\"bash(echo:*)\"]\n").unwrap();
    let toold = Toold::start_with(&["--config", file.to_str().unwrap(), "--auth-token", TOKEN]);
    let mut client = toold.client().await;
    let session = client
        .create_session(authed(proto::CreateSessionRequest {
            interactive: true,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .id;
    let (requests, outgoing) = mpsc::channel(4);
    let kind = |kind| ExecuteRequest { kind: Some(kind) };
    let start = proto::ExecuteStart {
        session_id: session.clone(),
    };
    requests
        .send(kind(execute_request::Kind::Start(start)))
        .await
        .unwrap();
    let echo = call("c1", "bash", json!({"command": "echo approved-run"}));
    requests
        .send(kind(execute_request::Kind::Call(echo)))
        .await
        .unwrap();
    requests
        .send(kind(execute_request::Kind::End(proto::ExecuteEnd {})))
        .await
        .unwrap();
    let mut responses = client
        .execute(authed(ReceiverStream::new(outgoing)))
        .await
        .unwrap()
        .into_inner();
    let approval_id = loop {
        let response = next(&mut responses).await.expect("the stream goes on");
        if let Some(execute_response::Kind::Event(event)) = response.kind
            && event.r#type == "permission:ask"
        {
            assert_eq!(event.call_id, "c1");
            let data: Value = serde_json::from_str(&event.data_json).unwrap();
            break data["approval_id"].as_str().unwrap().to_owned();
        }
    };
    client
        .resolve_approval(authed(proto::ResolveApprovalRequest {
            session_id: session.clone(),
            approval_id: approval_id.clone(),
            decision: "allow".into(),
            ..Default::default()
        }))
        .await
        .expect("the approval is resolved");
    let result = loop {
        let response = next(&mut responses).await.expect("the result follows");
        if let Some(execute_response::Kind::Result(result)) = response.kind {
            break result;
        }
    };
    assert!(!result.is_error, "{}", result.output);
    assert!(result.output.contains("approved-run"), "{}", result.output);

    let audit = reqwest::Client::new()
        .get(format!("{}/v1/sessions/{session}/calls", toold.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap()
        .bytes()
        .await
        .unwrap();
    let audit: Value = serde_json::from_slice(&audit).unwrap();
    let decided_by = &audit["calls"][0]["decision"]["decided_by"];
    assert_eq!(decided_by["approver"], "grpc", "{audit}");
    assert_eq!(decided_by["approval_id"], approval_id.as_str());
    let token = decided_by["token"].as_str().unwrap();
    assert!(
        token.starts_with("sha256:") && !token.contains("secret"),
        "{token}"
    );
}
