//! The HTTP provider door, with a small Rust provider in the test: register, stream the
//! invocations (SSE), post progress and the result, end the connection; and every bad
//! request (malformed JSON, wrong types, unknown fields, unknown or another's connection, a
//! huge body, a second stream) answered through the one error table.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{daemon, session};
use crate::auth::{AGENT_A, AGENT_B, call};
use crate::http::bad_input::assert_error;

fn registration() -> Value {
    json!({
        "provider": "web",
        "tools": [{
            "name": "add",
            "description": "Adds a and b.",
            "input_schema": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}}, "required": ["a", "b"]},
            "read_only": true,
            "concurrency_safe": true,
            "required_permission": "read_only"
        }]
    })
}

#[tokio::test]
async fn an_http_provider_registers_streams_and_answers() {
    let toold = daemon("");
    let registered = toold.post("/v1/providers", &registration()).await;
    assert_eq!(
        registered.status,
        StatusCode::CREATED,
        "{}",
        registered.body
    );
    assert_eq!(registered.body["tools"], json!(["web__add"]));
    let connection = registered.body["connection_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let base = format!("/v1/providers/{connection}");
    let mut invocations = toold.sse(&format!("{base}/invocations"), None, None).await;
    let second = call(
        &toold,
        AGENT_A,
        Method::GET,
        &format!("{base}/invocations"),
        None,
    )
    .await;
    assert_error(&second, StatusCode::CONFLICT, "conflict");

    let id = session(&toold, &["web"]).await;
    let batch = toold.call_one(&id, "web__add", json!({"a": 2, "b": 3}));
    let provider = async {
        let frame = invocations.next().await.expect("an invocation");
        assert_eq!(frame.event, "invoke", "{frame:?}");
        assert_eq!(frame.data["tool"], "add");
        assert_eq!(frame.data["session_id"], id.as_str());
        assert_eq!(frame.data["call_id"], "c1");
        assert!(frame.data.get("child_session").is_none(), "{frame:?}");
        let sum =
            frame.data["input"]["a"].as_f64().unwrap() + frame.data["input"]["b"].as_f64().unwrap();
        let invocation = frame.data["invocation_id"].as_str().unwrap().to_owned();
        let path = format!("{base}/invocations/{invocation}");
        let progress = toold
            .post(
                &format!("{path}/progress"),
                &json!({"data": {"half": true}}),
            )
            .await;
        assert_eq!(progress.status, StatusCode::NO_CONTENT, "{}", progress.body);
        // Another principal's answer is refused as for a connection it does not know.
        let foreign = call(
            &toold,
            AGENT_B,
            Method::POST,
            &format!("{path}/result"),
            Some(json!({"output": "6"})),
        )
        .await;
        assert_error(&foreign, StatusCode::NOT_FOUND, "not_found");
        let answered = toold
            .post(
                &format!("{path}/result"),
                &json!({"output": sum.to_string()}),
            )
            .await;
        assert_eq!(answered.body, json!({"accepted": true}));
        let again = toold
            .post(&format!("{path}/result"), &json!({"output": "7"}))
            .await;
        assert_eq!(
            again.body,
            json!({"accepted": false}),
            "a second result is ignored"
        );
    };
    let (result, ()) = tokio::join!(batch, provider);
    assert_eq!(result["output"], "5", "{result}");
    assert_eq!(result["is_error"], false, "{result}");

    let listed = toold.get("/v1/providers").await;
    assert_eq!(
        listed.body["providers"][0]["connections"][0]["transport"], "http",
        "{}",
        listed.body
    );
    let ended = toold.delete(&base).await;
    assert_eq!(ended.status, StatusCode::NO_CONTENT, "{}", ended.body);
    assert_eq!(
        invocations.next().await.map(|f| f.event),
        None,
        "the stream ends with the connection"
    );
    assert_eq!(
        toold.get("/v1/providers").await.body["providers"],
        json!([])
    );
    assert_error(
        &toold.delete(&base).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
}

#[tokio::test]
async fn bad_provider_requests_get_clear_errors() {
    let toold = daemon("");
    let malformed = toold
        .post_bytes("/v1/providers", b"{\"provider\": ".to_vec())
        .await;
    assert_error(&malformed, StatusCode::BAD_REQUEST, "invalid_request");
    let wrong_type = toold
        .post("/v1/providers", &json!({"provider": 7, "tools": []}))
        .await;
    assert_error(&wrong_type, StatusCode::BAD_REQUEST, "invalid_request");
    let unknown_field = toold
        .post(
            "/v1/providers",
            &json!({"provider": "p", "tools": [{"name": "t", "colour": "red"}]}),
        )
        .await;
    assert_error(&unknown_field, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        unknown_field.body.to_string().contains("colour"),
        "{}",
        unknown_field.body
    );
    let bad_flag = toold
        .post(
            "/v1/providers",
            &json!({"provider": "p", "tools": [{"name": "t", "required_permission": "root"}]}),
        )
        .await;
    assert_error(&bad_flag, StatusCode::BAD_REQUEST, "invalid_request");
    let bad_schema = toold
        .post(
            "/v1/providers",
            &json!({"provider": "p", "tools": [{"name": "t", "input_schema": {"type": "array"}}]}),
        )
        .await;
    assert_error(&bad_schema, StatusCode::BAD_REQUEST, "invalid_request");
    let global = toold
        .post(
            "/v1/providers",
            &json!({"provider": "p", "global": true, "tools": [{"name": "t"}]}),
        )
        .await;
    assert_error(&global, StatusCode::FORBIDDEN, "forbidden");
    let mut huge = b"{\"provider\": \"p\", \"tools\": [], \"pad\": \"".to_vec();
    huge.resize(20 * 1024 * 1024, b'x');
    huge.extend_from_slice(b"\"}");
    assert_error(
        &toold.post_bytes("/v1/providers", huge).await,
        StatusCode::PAYLOAD_TOO_LARGE,
        "payload_too_large",
    );

    let unknown = "/v1/providers/conn_nope";
    assert_error(
        &toold
            .post(
                &format!("{unknown}/invocations/inv_x/result"),
                &json!({"output": ""}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &toold
            .post(
                &format!("{unknown}/invocations/inv_x/progress"),
                &json!({"data": 1}),
            )
            .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &call(
            &toold,
            AGENT_A,
            Method::GET,
            &format!("{unknown}/invocations"),
            None,
        )
        .await,
        StatusCode::NOT_FOUND,
        "not_found",
    );
    assert_error(
        &toold.delete(unknown).await,
        StatusCode::NOT_FOUND,
        "not_found",
    );

    let registered = toold.post("/v1/providers", &registration()).await;
    let connection = registered.body["connection_id"].as_str().unwrap();
    let result = format!("/v1/providers/{connection}/invocations/inv_x/result");
    assert_error(
        &toold.post(&result, &json!({"output": 5})).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_error(
        &toold.post_bytes(&result, b"not json".to_vec()).await,
        StatusCode::BAD_REQUEST,
        "invalid_request",
    );
    assert_eq!(
        toold.post(&result, &json!({"output": "x"})).await.body,
        json!({"accepted": false}),
        "an unknown invocation is ignored"
    );
    let held = call(
        &toold,
        AGENT_B,
        Method::POST,
        "/v1/providers",
        Some(registration()),
    )
    .await;
    assert_error(&held, StatusCode::CONFLICT, "conflict");
}
