//! `sessions_per_principal`: open sessions over HTTP and gRPC, per principal; a failed creation
//! takes no place, a closed session gives its place back.

use reqwest::StatusCode;
use serde_json::json;
use toold::api::grpc::proto::CreateSessionRequest;

use super::{assert_grpc_limited, assert_limited, limited};
use crate::auth::{ADMIN, AGENT_A, AGENT_B, call, grpc_client, post, session_of, with};

const KEY: &str = "sessions_per_principal";

#[tokio::test]
async fn a_principal_holds_at_most_its_sessions_and_a_closed_one_frees_its_place() {
    let toold = limited("sessions_per_principal = 2");
    // Refused creations take no place.
    for _ in 0..3 {
        let reply = post(
            &toold,
            AGENT_A,
            "/v1/sessions",
            json!({"working_directory": "/proc"}),
        )
        .await;
        assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
        let reply = post(
            &toold,
            AGENT_A,
            "/v1/sessions",
            json!({"permission_mode": 7}),
        )
        .await;
        assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    }
    let first = session_of(&toold, AGENT_A, json!({})).await;
    session_of(&toold, AGENT_A, json!({})).await;
    assert_limited(&post(&toold, AGENT_A, "/v1/sessions", json!({})).await, KEY);
    let mut client = grpc_client(&toold).await;
    let create = CreateSessionRequest::default;
    assert_grpc_limited(client.create_session(with(AGENT_A, create())).await, KEY);

    // B is not limited by A.
    session_of(&toold, AGENT_B, json!({})).await;
    client
        .create_session(with(AGENT_B, CreateSessionRequest::default()))
        .await
        .unwrap();

    // Closing one of A's gives its place back.
    let closed = call(
        &toold,
        AGENT_A,
        reqwest::Method::DELETE,
        &format!("/v1/sessions/{first}"),
        None,
    )
    .await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.body);
    client
        .create_session(with(AGENT_A, CreateSessionRequest::default()))
        .await
        .unwrap();
    assert_limited(&post(&toold, AGENT_A, "/v1/sessions", json!({})).await, KEY);
}

#[tokio::test]
async fn sessions_restored_after_a_restart_still_count() {
    let toold = limited("sessions_per_principal = 1");
    session_of(&toold, AGENT_A, json!({})).await;
    let file = toold.dir.path().join("toold.toml");
    let file = file.to_str().unwrap().to_owned();
    let toold = toold.terminate_and_restart(&["--config", &file, "--auth-token", ADMIN]);
    assert_limited(&post(&toold, AGENT_A, "/v1/sessions", json!({})).await, KEY);
    session_of(&toold, AGENT_B, json!({})).await;
}
