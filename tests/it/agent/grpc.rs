//! Child sessions through the gRPC door: made with `parent_session_id` in `options_json`, and
//! `Subscribe{session_id: parent}` carrying the child's events with the child's session id.

use serde_json::json;
use toold::api::grpc::proto;

use crate::grpc::harness::{Toold, call, next};

#[tokio::test]
async fn subscribing_to_the_parent_over_grpc_gets_the_childs_events() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (parent, workspace) = toold.session(&mut client).await;
    let mut events = client
        .subscribe(proto::SubscribeRequest {
            session_id: parent.clone(),
            r#type: "tool:post".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let child = client
        .create_session(proto::CreateSessionRequest {
            permission_mode: "read_only".into(),
            options_json: json!({"parent_session_id": parent}).to_string(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(child.working_directory, workspace.to_str().unwrap());
    assert_eq!(child.permission_mode, "read_only");
    let wider = client
        .create_session(proto::CreateSessionRequest {
            permission_mode: "danger_full_access".into(),
            options_json: json!({"parent_session_id": parent}).to_string(),
            ..Default::default()
        })
        .await
        .unwrap_err();
    assert_eq!(wider.code(), tonic::Code::PermissionDenied);
    assert!(
        wider.message().contains("wider than the parent's"),
        "{wider:?}"
    );

    let batch = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: child.id.clone(),
            calls: vec![call("g", "glob_search", json!({"pattern": "*"}))],
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    assert!(!batch.results[0].is_error, "{:?}", batch.results[0]);
    let event = next(&mut events).await.expect("the stream stays open");
    assert_eq!(event.session_id, child.id);
    assert_eq!(event.call_id, "g");
    assert_eq!(event.r#type, "tool:post");
}
