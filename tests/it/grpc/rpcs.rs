//! The unary RPCs against the real daemon: sessions, tools, whole batches (with idempotent
//! retries), offloaded results, closing, and approvals.

use serde_json::{Value, json};
use tonic::Code;
use toold::api::grpc::proto;

use crate::grpc::harness::{Toold, call};

#[tokio::test]
async fn create_session_takes_typed_fields_and_options() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let projects = toold.dir.path().join("projects").canonicalize().unwrap();
    let session = client
        .create_session(proto::CreateSessionRequest {
            working_directory: projects.display().to_string(),
            permission_mode: "read_only".into(),
            interactive: true,
            options_json: json!({"metadata": {"agent": "grpc-test"}, "tools": {"deny": ["bash"]}})
                .to_string(),
        })
        .await
        .expect("session created")
        .into_inner();
    assert!(session.id.starts_with("sess_"), "{}", session.id);
    assert_eq!(session.working_directory, projects.display().to_string());
    assert_eq!(session.permission_mode, "read_only");
    assert!(session.interactive);
    assert!(session.owner.starts_with("node-"), "{}", session.owner);
    // The options reached the core: `bash` is denied in this session's pool.
    let tools = client
        .list_tools(proto::ListToolsRequest {
            session_id: session.id.clone(),
            format: "toold".into(),
        })
        .await
        .unwrap()
        .into_inner();
    let tools: Vec<Value> = serde_json::from_str(&tools.tools_json).unwrap();
    assert!(tools.iter().all(|tool| tool["name"] != "bash"));
    assert!(tools.iter().any(|tool| tool["name"] == "read_file"));
}

#[tokio::test]
async fn list_tools_speaks_each_provider_format() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let list = |format: &str| proto::ListToolsRequest {
        session_id: session.clone(),
        format: format.into(),
    };
    let anthropic = client
        .list_tools(list("anthropic"))
        .await
        .unwrap()
        .into_inner();
    let anthropic: Vec<Value> = serde_json::from_str(&anthropic.tools_json).unwrap();
    let read = anthropic.iter().find(|t| t["name"] == "read_file").unwrap();
    assert!(read["input_schema"].is_object() && read["description"].is_string());
    let openai = client
        .list_tools(list("openai"))
        .await
        .unwrap()
        .into_inner();
    let openai: Vec<Value> = serde_json::from_str(&openai.tools_json).unwrap();
    assert!(
        openai
            .iter()
            .all(|t| t["type"] == "function" && t["parameters"].is_object())
    );
    // An empty format is the toold format, with the metadata.
    let toold_format = client.list_tools(list("")).await.unwrap().into_inner();
    let toold_format: Vec<Value> = serde_json::from_str(&toold_format.tools_json).unwrap();
    assert_eq!(toold_format.len(), anthropic.len());
}

#[tokio::test]
async fn execute_batch_runs_a_write_and_a_read_in_order_and_replays_a_retry() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let file = workspace.join("notes.txt");
    let request = proto::ExecuteBatchRequest {
        session_id: session.clone(),
        calls: vec![
            call(
                "w",
                "write_file",
                json!({"file_path": file, "content": "hello grpc\n"}),
            ),
            call("r", "read_file", json!({"file_path": file})),
        ],
        idempotency_key: "key-1".into(),
    };
    let batch = client
        .execute_batch(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(batch.batch_id.starts_with("batch_"), "{}", batch.batch_id);
    assert!(!batch.replayed);
    let ids: Vec<&str> = batch.results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["w", "r"]);
    for result in &batch.results {
        assert!(!result.is_error, "{}", result.output);
        assert_eq!(result.error_kind, "");
    }
    assert_eq!(batch.results[1].name, "read_file");
    assert!(
        batch.results[1].output.contains("hello grpc"),
        "{}",
        batch.results[1].output
    );
    assert_eq!(std::fs::read_to_string(&file).unwrap(), "hello grpc\n");

    // The same key and calls: the stored results, nothing runs again.
    std::fs::write(&file, "changed behind toold's back\n").unwrap();
    let retry = client
        .execute_batch(request.clone())
        .await
        .unwrap()
        .into_inner();
    assert!(retry.replayed);
    assert_eq!(retry.batch_id, batch.batch_id);
    assert_eq!(retry.results, batch.results);
    assert_eq!(
        std::fs::read_to_string(&file).unwrap(),
        "changed behind toold's back\n"
    );
    // The same key with other calls is a conflict.
    let mut other = request;
    other.calls.pop();
    let conflict = client.execute_batch(other).await.unwrap_err();
    assert_eq!(conflict.code(), Code::AlreadyExists, "{conflict:?}");
}

#[tokio::test]
async fn get_result_pages_through_an_offloaded_output() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let batch = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: session,
            calls: vec![call("big", "bash", json!({"command": "seq 1 20000"}))],
            idempotency_key: String::new(),
        })
        .await
        .unwrap()
        .into_inner();
    let result = &batch.results[0];
    assert!(!result.is_error, "{}", result.output);
    assert!(!result.result_id.is_empty(), "offloaded: {}", result.output);
    let expected: String = (1..=20000).map(|n| format!("{n}\n")).collect();
    assert_eq!(result.total_chars, expected.chars().count() as u64);
    let mut read = String::new();
    while (read.chars().count() as u64) < result.total_chars {
        let page = client
            .get_result(proto::GetResultRequest {
                result_id: result.result_id.clone(),
                offset: read.chars().count() as u64,
                limit: 40_000,
            })
            .await
            .unwrap()
            .into_inner();
        assert_eq!(page.result_id, result.result_id);
        assert_eq!(page.total_chars, result.total_chars);
        assert!(!page.content.is_empty());
        read.push_str(&page.content);
    }
    assert_eq!(read, expected);
    let missing = client
        .get_result(proto::GetResultRequest {
            result_id: "res_missing".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
}

#[tokio::test]
async fn close_session_ends_it_and_unknown_approvals_are_not_found() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let approval = client
        .resolve_approval(proto::ResolveApprovalRequest {
            session_id: session.clone(),
            approval_id: "appr_missing".into(),
            decision: "allow".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(approval.code(), Code::NotFound, "{approval:?}");
    assert!(approval.message().contains("appr_missing"), "{approval:?}");
    let bad_decision = client
        .resolve_approval(proto::ResolveApprovalRequest {
            session_id: session.clone(),
            approval_id: "appr_missing".into(),
            decision: "maybe".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(
        bad_decision.code(),
        Code::InvalidArgument,
        "{bad_decision:?}"
    );

    client
        .close_session(proto::CloseSessionRequest {
            session_id: session.clone(),
        })
        .await
        .expect("closed");
    let after = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: session.clone(),
            calls: vec![call("r", "read_file", json!({"file_path": "x"}))],
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(after.code(), Code::NotFound, "{after:?}");
    let interrupt = client
        .interrupt(proto::InterruptRequest {
            session_id: session,
        })
        .await
        .unwrap_err();
    assert_eq!(interrupt.code(), Code::NotFound);
}
