//! Bad input over HTTP: each gets its documented status and error body, and the daemon stays
//! up afterwards.

use reqwest::StatusCode;
use serde_json::json;

use super::harness::{Reply, Toold};

/// An error answer: `status`, the table's `code`, and a message.
pub fn assert_error(reply: &Reply, status: StatusCode, code: &str) {
    assert_eq!(reply.status, status, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], code, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .is_some_and(|m| !m.is_empty())
    );
}

#[tokio::test]
async fn bad_input_gets_its_status_and_error_body_and_the_daemon_stays_up() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batches = format!("/v1/sessions/{id}/batches");

    let malformed = toold.post_bytes(&batches, b"{\"calls\": [".to_vec()).await;
    assert_error(&malformed, StatusCode::BAD_REQUEST, "invalid_request");

    let envelope = toold.post(&batches, &json!({"calls": "not a list"})).await;
    assert_error(&envelope, StatusCode::BAD_REQUEST, "invalid_request");
    let not_object = toold.post(&batches, &json!([1, 2])).await;
    assert_error(&not_object, StatusCode::BAD_REQUEST, "invalid_request");

    let unknown_session = toold
        .post("/v1/sessions/sess_nope/batches", &json!({"calls": []}))
        .await;
    assert_error(&unknown_session, StatusCode::NOT_FOUND, "not_found");

    let duplicate = toold
        .post(
            &batches,
            &json!({"calls": [{"id": "a", "name": "sleep", "input": {"duration_ms": 1}},
                               {"id": "a", "name": "sleep", "input": {"duration_ms": 1}}]}),
        )
        .await;
    assert_error(&duplicate, StatusCode::CONFLICT, "conflict");

    let mut huge = b"{\"calls\":[],\"pad\":\"".to_vec();
    huge.resize(20 * 1024 * 1024, b'x');
    huge.extend_from_slice(b"\"}");
    let too_large = toold.post_bytes(&batches, huge).await;
    assert_error(
        &too_large,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );

    let unknown_format = toold
        .post(&batches, &json!({"format": "gemini", "calls": []}))
        .await;
    assert_error(&unknown_format, StatusCode::BAD_REQUEST, "invalid_request");
    let unknown_tools_format = toold
        .get(&format!("/v1/sessions/{id}/tools?format=gemini"))
        .await;
    assert_error(
        &unknown_tools_format,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );

    let non_utf8 = toold
        .post_bytes(&batches, b"{\"calls\": [\"\xff\xfe\"]}".to_vec())
        .await;
    assert_error(&non_utf8, StatusCode::BAD_REQUEST, "invalid_request");

    let mut deep = "[".repeat(10_000);
    deep.push_str(&"]".repeat(10_000));
    let nested = toold.post_bytes(&batches, deep.into_bytes()).await;
    assert_error(&nested, StatusCode::BAD_REQUEST, "invalid_request");

    let negative = toold.get("/v1/results/res_x?offset=-1").await;
    assert_error(&negative, StatusCode::BAD_REQUEST, "invalid_request");
    let words = toold.get("/v1/results/res_x?limit=lots").await;
    assert_error(&words, StatusCode::BAD_REQUEST, "invalid_request");

    let bad_session = toold
        .post("/v1/sessions", &json!({"permission_mode": "root"}))
        .await;
    assert_error(&bad_session, StatusCode::BAD_REQUEST, "invalid_request");
    let bad_type = toold.get("/v1/events?type=tool:nope").await;
    assert_error(&bad_type, StatusCode::BAD_REQUEST, "invalid_request");

    // Still up, and still running batches.
    assert_eq!(toold.get("/healthz").await.status, StatusCode::OK);
    let ok = toold
        .post(
            &batches,
            &json!({"calls": [{"id": "e", "name": "bash", "input": {"command": "echo ok"}}]}),
        )
        .await;
    assert_eq!(ok.body["results"][0]["output"], "ok\n");
}
