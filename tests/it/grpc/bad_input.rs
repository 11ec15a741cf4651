//! Bad input over gRPC: each gets the status of the one error table, or, when it is a call's
//! own problem, that call's error result; nothing else in the batch is lost.

use serde_json::json;
use tokio::sync::mpsc;
use tokio_stream::wrappers::ReceiverStream;
use tonic::Code;
use toold::api::grpc::proto::{self, ExecuteRequest, execute_request, execute_response};

use crate::grpc::harness::{Toold, call, next};

#[tokio::test]
async fn invalid_json_input_is_that_calls_input_validation_error() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    std::fs::write(workspace.join("ok.txt"), "fine\n").unwrap();
    let mut broken = call("bad", "read_file", json!({}));
    broken.input_json = "{\"file_path\": ".into();
    let batch = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: session,
            calls: vec![
                broken,
                call(
                    "ok",
                    "read_file",
                    json!({"file_path": workspace.join("ok.txt")}),
                ),
                call("nope", "reed_file", json!({})),
            ],
            idempotency_key: String::new(),
        })
        .await
        .expect("a call's bad input is not a status")
        .into_inner();
    let bad = &batch.results[0];
    assert!(bad.is_error);
    assert_eq!(bad.error_kind, "input_validation");
    assert!(
        bad.output.starts_with("InputValidationError: "),
        "{}",
        bad.output
    );
    assert!(!batch.results[1].is_error, "{}", batch.results[1].output);
    assert!(batch.results[1].output.contains("fine"));
    assert_eq!(batch.results[2].error_kind, "unknown_tool");
    assert!(
        batch.results[2].output.contains("read_file"),
        "a suggestion: {}",
        batch.results[2].output
    );
}

#[tokio::test]
async fn unknown_sessions_formats_and_broken_envelopes_get_statuses() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let unknown_format = client
        .list_tools(proto::ListToolsRequest {
            session_id: session.clone(),
            format: "gemini".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown_format.code(), Code::InvalidArgument);
    assert!(
        unknown_format.message().contains("gemini"),
        "{unknown_format:?}"
    );

    let unknown_session = client
        .list_tools(proto::ListToolsRequest {
            session_id: "sess_nope".into(),
            format: "anthropic".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown_session.code(), Code::NotFound);
    assert!(
        unknown_session.message().contains("sess_nope"),
        "{unknown_session:?}"
    );
    let batch = |calls| proto::ExecuteBatchRequest {
        session_id: session.clone(),
        calls,
        idempotency_key: String::new(),
    };
    let mut in_unknown = batch(vec![]);
    in_unknown.session_id = "sess_nope".into();
    assert_eq!(
        client.execute_batch(in_unknown).await.unwrap_err().code(),
        Code::NotFound
    );
    let duplicate = vec![
        call("a", "read_file", json!({})),
        call("a", "read_file", json!({})),
    ];
    let duplicate = client.execute_batch(batch(duplicate)).await.unwrap_err();
    assert_eq!(duplicate.code(), Code::AlreadyExists, "{duplicate:?}");
    let nameless = client
        .execute_batch(batch(vec![call("a", "", json!({}))]))
        .await
        .unwrap_err();
    assert_eq!(nameless.code(), Code::InvalidArgument, "{nameless:?}");

    for (options, fragment) in [
        ("{not json", "options_json"),
        ("[1]", "options_json"),
        (r#"{"colour":1}"#, "colour"),
    ] {
        let refused = client
            .create_session(proto::CreateSessionRequest {
                options_json: options.into(),
                ..Default::default()
            })
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{options}");
        assert!(refused.message().contains(fragment), "{refused:?}");
    }
    let outside = client
        .create_session(proto::CreateSessionRequest {
            working_directory: "/etc".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_ne!(outside.code(), Code::Ok);
    assert!(outside.message().contains("/etc"), "{outside:?}");
    let bad_type = client
        .subscribe(proto::SubscribeRequest {
            r#type: "tool:exploded".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(bad_type.code(), Code::InvalidArgument);
    let no_session = client
        .subscribe(proto::SubscribeRequest {
            session_id: "sess_nope".into(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(no_session.code(), Code::NotFound);
}

#[tokio::test]
async fn an_execute_stream_must_start_with_a_known_session() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    let open = |first: ExecuteRequest| {
        let (requests, outgoing) = mpsc::channel(4);
        requests.try_send(first).unwrap();
        (requests, ReceiverStream::new(outgoing))
    };
    let (_keep, without_start) = open(ExecuteRequest {
        kind: Some(execute_request::Kind::Call(call(
            "a",
            "read_file",
            json!({}),
        ))),
    });
    let refused = client.execute(without_start).await.unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let start = |id: &str| ExecuteRequest {
        kind: Some(execute_request::Kind::Start(proto::ExecuteStart {
            session_id: id.into(),
        })),
    };
    let (_keep, unknown) = open(start("sess_nope"));
    assert_eq!(
        client.execute(unknown).await.unwrap_err().code(),
        Code::NotFound
    );

    // A broken call inside a stream is that call's result; the batch carries on.
    let (requests, stream) = open(start(&session));
    let mut broken = call("bad", "read_file", json!({}));
    broken.input_json = "not json".into();
    requests
        .send(ExecuteRequest {
            kind: Some(execute_request::Kind::Call(broken)),
        })
        .await
        .unwrap();
    requests
        .send(ExecuteRequest {
            kind: Some(execute_request::Kind::Call(call(
                "bad",
                "read_file",
                json!({}),
            ))),
        })
        .await
        .unwrap();
    requests
        .send(ExecuteRequest {
            kind: Some(execute_request::Kind::End(proto::ExecuteEnd {})),
        })
        .await
        .unwrap();
    let mut responses = client.execute(stream).await.unwrap().into_inner();
    let mut results = Vec::new();
    while let Some(response) = next(&mut responses).await {
        if let Some(execute_response::Kind::Result(result)) = response.kind {
            results.push(result);
        }
    }
    assert_eq!(results.len(), 2);
    assert_eq!(results[0].error_kind, "input_validation");
    assert!(
        results[1].is_error,
        "a duplicate id in a stream is refused as a call"
    );
}
