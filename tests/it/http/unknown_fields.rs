//! Batch bodies refuse members toold does not know (issue 35): in the envelope of every
//! shape and in each toold call, with a 400 in the usual error body that names the member,
//! the ones expected and the one likely meant; provider items keep the members their SDKs add.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::bad_input::assert_error;
use super::harness::Toold;

/// The message of a 400 `invalid_request` answer to `body`.
async fn refused(toold: &Toold, batches: &str, body: Value) -> String {
    let reply = toold.post(batches, &body).await;
    assert_error(&reply, StatusCode::BAD_REQUEST, "invalid_request");
    reply.body["error"]["message"].as_str().unwrap().to_owned()
}

#[tokio::test]
async fn a_call_with_arguments_instead_of_input_is_a_400_naming_both() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batches = format!("/v1/sessions/{id}/batches");

    let message = refused(
        &toold,
        &batches,
        json!({"calls": [{"id": "c1", "name": "bash", "arguments": {"command": "echo hi"}}]}),
    )
    .await;
    assert_eq!(
        message,
        "unknown field \"arguments\" in calls[0]; expected one of: id, name, input \
         (did you mean \"input\"?)"
    );

    let message = refused(
        &toold,
        &batches,
        json!({"calls": [], "idempotencykey": "retry-1"}),
    )
    .await;
    assert!(message.contains("\"idempotencykey\""), "{message}");
    assert!(
        message.contains("did you mean \"idempotency_key\"?"),
        "{message}"
    );

    // Streamed or not, the body is refused before anything runs.
    let streamed = toold
        .send(
            toold
                .request(reqwest::Method::POST, &batches)
                .header("content-type", "application/json")
                .header("accept", "text/event-stream")
                .body(r#"{"calls":[{"id":"c","name":"bash","args":{}}]}"#),
        )
        .await;
    assert_error(&streamed, StatusCode::BAD_REQUEST, "invalid_request");
    let calls = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    assert_eq!(calls.body["calls"], json!([]), "{}", calls.body);

    // The same shape of refusal as a session body's unknown member.
    let session = toold
        .post("/v1/sessions", &json!({"intractive": true}))
        .await;
    assert_error(&session, StatusCode::BAD_REQUEST, "invalid_request");
    assert!(
        session.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("intractive")
    );
}

#[tokio::test]
async fn every_shapes_envelope_refuses_unknown_members() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batches = format!("/v1/sessions/{id}/batches");
    let cases = [
        (
            json!({"format": "anthropic", "content": [], "model": "claude"}),
            "unknown field \"model\" in the batch body; expected one of: format, content, \
             idempotency_key",
        ),
        (
            json!({"format": "openai", "output": [], "idempotency-key": "k"}),
            "unknown field \"idempotency-key\" in the batch body; expected one of: format, output, \
             idempotency_key (did you mean \"idempotency_key\"?)",
        ),
        (
            json!({"format": "openai_chat", "message": {"role": "assistant"}, "choices": []}),
            "unknown field \"choices\" in the batch body; expected one of: format, message, \
             idempotency_key",
        ),
        (
            json!({"content": [{"type": "tool_use", "id": "t", "name": "bash", "input": {}}]}),
            "unknown field \"content\" in the batch body; expected one of: calls, \
             idempotency_key, format (an anthropic body says \"format\": \"anthropic\")",
        ),
    ];
    for (body, expected) in cases {
        assert_eq!(
            refused(&toold, &batches, body.clone()).await,
            expected,
            "{body}"
        );
    }
}

#[tokio::test]
async fn provider_items_keep_the_fields_their_sdks_add() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batches = format!("/v1/sessions/{id}/batches");
    let echo = |word: &str| json!({"command": format!("echo {word}")});

    let anthropic = toold
        .post(
            &batches,
            &json!({"format": "anthropic", "idempotency_key": "a-1", "content": [
                {"type": "text", "text": "running it", "citations": null},
                {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": echo("a"),
                 "cache_control": {"type": "ephemeral"}}]}),
        )
        .await;
    assert_eq!(anthropic.status, StatusCode::OK, "{}", anthropic.body);
    assert_eq!(anthropic.body["content"][0]["content"], "a\n");

    let arguments = echo("b").to_string();
    let openai = toold
        .post(
            &batches,
            &json!({"format": "openai", "output": [
                {"type": "reasoning", "id": "rs_1", "summary": [], "encrypted_content": null},
                {"type": "function_call", "id": "fc_1", "call_id": "call_b", "name": "bash",
                 "arguments": arguments, "status": "completed"}]}),
        )
        .await;
    assert_eq!(openai.status, StatusCode::OK, "{}", openai.body);
    assert_eq!(openai.body["input"][0]["output"], "b\n");

    let arguments = echo("c").to_string();
    let chat = toold
        .post(
            &batches,
            &json!({"format": "openai_chat", "message": {
                "role": "assistant", "content": null, "refusal": null, "annotations": [],
                "tool_calls": [{"id": "call_c", "type": "function", "index": 0,
                                "function": {"name": "bash", "arguments": arguments}}]}}),
        )
        .await;
    assert_eq!(chat.status, StatusCode::OK, "{}", chat.body);
    assert_eq!(chat.body["messages"][0]["content"], "c\n");
}
