//! Approvals over gRPC, for real: an `ask` rule holds a call of an `Execute` stream until a
//! gRPC client answers with `ResolveApproval` (the approval seen through `permission:ask`):
//! allowed, denied, left to time out, refused at once in a non-interactive session, and
//! resolved twice at the same time (exactly one wins). The audit row names who decided.

use serde_json::{Value, json};
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::metadata::MetadataValue;
use toold::api::grpc::proto::{
    self, ExecuteRequest, ExecuteResponse, ToolResult, execute_request, execute_response,
};

use crate::grpc::harness::{Client, Toold, call, next};

const TOKEN: &str = "approver-secret";

fn authed<T>(message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value = MetadataValue::try_from(format!("Bearer {TOKEN}")).unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}

/// A daemon whose settings ask before any `echo`, with `extra` settings lines.
fn daemon(extra: &str) -> (Toold, tempfile::TempDir) {
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("toold.toml");
    let settings = format!("[permissions]\nask = [\"bash(echo:*)\"]\n{extra}");
    std::fs::write(&file, settings).unwrap();
    let toold = Toold::start_with(&["--config", file.to_str().unwrap(), "--auth-token", TOKEN]);
    (toold, config)
}

async fn session(client: &mut Client, interactive: bool) -> String {
    client
        .create_session(authed(proto::CreateSessionRequest {
            interactive,
            ..Default::default()
        }))
        .await
        .unwrap()
        .into_inner()
        .id
}

/// An `Execute` stream of one `echo` call.
async fn execute_echo(
    client: &mut Client,
    session: &str,
    text: &str,
) -> tonic::Streaming<ExecuteResponse> {
    let (requests, outgoing) = mpsc::channel(4);
    let kind = |kind| ExecuteRequest { kind: Some(kind) };
    let start = proto::ExecuteStart {
        session_id: session.to_owned(),
    };
    let echo = call("c1", "bash", json!({"command": format!("echo {text}")}));
    for message in [
        execute_request::Kind::Start(start),
        execute_request::Kind::Call(echo),
        execute_request::Kind::End(proto::ExecuteEnd {}),
    ] {
        requests.send(kind(message)).await.unwrap();
    }
    client
        .execute(authed(ReceiverStream::new(outgoing)))
        .await
        .unwrap()
        .into_inner()
}

/// Waits for the call's `permission:ask` and returns the approval id.
async fn asked(responses: &mut tonic::Streaming<ExecuteResponse>) -> String {
    loop {
        let response = next(responses).await.expect("the stream goes on");
        if let Some(execute_response::Kind::Event(event)) = response.kind
            && event.r#type == "permission:ask"
        {
            assert_eq!(event.call_id, "c1");
            let data: Value = serde_json::from_str(&event.data_json).unwrap();
            return data["approval_id"].as_str().unwrap().to_owned();
        }
    }
}

async fn result(responses: &mut tonic::Streaming<ExecuteResponse>) -> ToolResult {
    loop {
        let response = next(responses).await.expect("the result follows");
        if let Some(execute_response::Kind::Result(result)) = response.kind {
            return result;
        }
    }
}

async fn resolve(
    client: &mut Client,
    session: &str,
    approval_id: &str,
    decision: &str,
) -> Result<(), tonic::Status> {
    client
        .resolve_approval(authed(proto::ResolveApprovalRequest {
            session_id: session.to_owned(),
            approval_id: approval_id.to_owned(),
            decision: decision.into(),
            ..Default::default()
        }))
        .await
        .map(drop)
}

/// The audit row's decision for the session's one call.
async fn decision(toold: &Toold, session: &str) -> Value {
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
    audit["calls"][0]["decision"].clone()
}

#[tokio::test]
async fn an_approval_resolved_over_grpc_runs_the_call_and_names_the_approver() {
    let (toold, _config) = daemon("");
    let mut client = toold.client().await;
    let session = session(&mut client, true).await;
    let mut responses = execute_echo(&mut client, &session, "approved-run").await;
    let approval_id = asked(&mut responses).await;
    resolve(&mut client, &session, &approval_id, "allow")
        .await
        .expect("the approval is resolved");
    let result = result(&mut responses).await;
    assert!(!result.is_error, "{}", result.output);
    assert!(result.output.contains("approved-run"), "{}", result.output);

    let decision = decision(&toold, &session).await;
    let decided_by = &decision["decided_by"];
    assert_eq!(decided_by["approver"], "grpc", "{decision}");
    assert_eq!(decided_by["approval_id"], approval_id.as_str());
    let token = decided_by["token"].as_str().unwrap();
    assert!(
        token.starts_with("sha256:") && !token.contains("secret"),
        "{token}"
    );
}

#[tokio::test]
async fn a_denial_over_grpc_refuses_the_call() {
    let (toold, _config) = daemon("");
    let mut client = toold.client().await;
    let session = session(&mut client, true).await;
    let mut responses = execute_echo(&mut client, &session, "never-runs").await;
    let approval_id = asked(&mut responses).await;
    resolve(&mut client, &session, &approval_id, "deny")
        .await
        .expect("the approval is resolved");
    let result = result(&mut responses).await;
    assert!(result.is_error);
    assert_eq!(result.error_kind, "permission_denied", "{}", result.output);
    assert!(!result.output.contains("never-runs\n"), "{}", result.output);
    let decision = decision(&toold, &session).await;
    assert_eq!(decision["decision"], "deny", "{decision}");
    assert_eq!(decision["decided_by"]["approver"], "grpc", "{decision}");
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_a_denial_and_a_late_answer_is_not_found() {
    let (toold, _config) = daemon("approval_timeout_ms = 200\n");
    let mut client = toold.client().await;
    let session = session(&mut client, true).await;
    let mut responses = execute_echo(&mut client, &session, "too-late").await;
    let approval_id = asked(&mut responses).await;
    let result = result(&mut responses).await;
    assert_eq!(result.error_kind, "permission_denied", "{}", result.output);
    let decision = decision(&toold, &session).await;
    assert_eq!(decision["decided_by"]["by"], "timeout", "{decision}");
    let late = resolve(&mut client, &session, &approval_id, "allow")
        .await
        .expect_err("the approval is settled");
    assert_eq!(late.code(), tonic::Code::NotFound, "{late:?}");
}

#[tokio::test]
async fn a_non_interactive_session_is_refused_at_once_with_a_reason() {
    let (toold, _config) = daemon("");
    let mut client = toold.client().await;
    let session = session(&mut client, false).await;
    let mut responses = execute_echo(&mut client, &session, "refused").await;
    let result = result(&mut responses).await;
    assert_eq!(result.error_kind, "permission_denied", "{}", result.output);
    assert!(
        result.output.contains("interactive"),
        "the reason says why: {}",
        result.output
    );
    let decision = decision(&toold, &session).await;
    assert_eq!(decision["decided_by"]["by"], "rule", "{decision}");
}

#[tokio::test]
async fn of_two_concurrent_resolutions_over_grpc_exactly_one_wins() {
    let (toold, _config) = daemon("");
    let mut client = toold.client().await;
    let session = session(&mut client, true).await;
    let mut responses = execute_echo(&mut client, &session, "raced").await;
    let approval_id = asked(&mut responses).await;
    let (mut first, mut second) = (toold.client().await, toold.client().await);
    let (allow, deny) = tokio::join!(
        resolve(&mut first, &session, &approval_id, "allow"),
        resolve(&mut second, &session, &approval_id, "deny"),
    );
    assert_eq!(
        usize::from(allow.is_ok()) + usize::from(deny.is_ok()),
        1,
        "{allow:?} {deny:?}"
    );
    let loser = allow.as_ref().err().or(deny.as_ref().err()).unwrap();
    assert!(
        matches!(
            loser.code(),
            tonic::Code::AlreadyExists | tonic::Code::NotFound
        ),
        "{loser:?}"
    );
    let result = result(&mut responses).await;
    assert_eq!(result.is_error, deny.is_ok(), "{}", result.output);
    let decision = decision(&toold, &session).await;
    let expected = if allow.is_ok() { "allow" } else { "deny" };
    assert_eq!(decision["decision"], expected, "{decision}");
}
