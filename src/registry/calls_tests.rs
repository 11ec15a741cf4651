//! Envelope parsing: each provider shape, and every way a body can be broken.

use serde_json::json;

use super::*;

#[test]
fn each_shape_parses_into_calls() {
    let toold = json!({"calls": [{"id": "a", "name": "echo", "input": {"x": 1}}],
        "idempotency_key": "k"});
    let parsed = BatchRequest::from_json(&toold).unwrap();
    assert_eq!(parsed.format, BatchFormat::Toold);
    assert_eq!(
        parsed.calls,
        vec![ToolCall::new("a", "echo", json!({"x": 1}))]
    );
    assert_eq!(
        parsed.idempotency.as_ref().map(|i| i.key.as_str()),
        Some("k")
    );

    let anthropic = json!({"format": "anthropic", "content": [
        {"type": "text", "text": "thinking"},
        {"type": "tool_use", "id": "tu_1", "name": "echo", "input": {"x": 2}}]});
    let parsed = BatchRequest::from_json(&anthropic).unwrap();
    assert_eq!(
        parsed.calls,
        vec![ToolCall::new("tu_1", "echo", json!({"x": 2}))]
    );

    let openai = json!({"format": "openai", "output": [
        {"type": "reasoning", "id": "r"},
        {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "echo",
         "arguments": "{\"x\":3}"}]});
    let parsed = BatchRequest::from_json(&openai).unwrap();
    assert_eq!(
        parsed.calls,
        vec![ToolCall::new("call_1", "echo", json!({"x": 3}))]
    );

    let chat = json!({"format": "openai_chat", "message": {"role": "assistant", "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "echo", "arguments": "{}"}}]}});
    let parsed = BatchRequest::from_json(&chat).unwrap();
    assert_eq!(parsed.calls, vec![ToolCall::new("c1", "echo", json!({}))]);

    let no_calls = json!({"format": "openai_chat", "message": {"role": "assistant",
        "content": "hi", "tool_calls": null}});
    assert!(BatchRequest::from_json(&no_calls).unwrap().calls.is_empty());
}

#[test]
fn malformed_arguments_are_the_calls_problem_not_the_batchs() {
    let openai = json!({"format": "openai", "output": [
        {"type": "function_call", "call_id": "c1", "name": "echo", "arguments": "{\"x\":"},
        {"type": "function_call", "call_id": "c2", "name": "echo", "arguments": 5}]});
    let parsed = BatchRequest::from_json(&openai).unwrap();
    assert!(matches!(parsed.calls[0].input, CallInput::Malformed { .. }));
    assert!(matches!(parsed.calls[1].input, CallInput::Malformed { .. }));
}

#[test]
fn broken_envelopes_are_refused_with_a_reason() {
    let cases = [
        (json!([1, 2]), "must be a JSON object"),
        (
            json!({"format": 3, "calls": []}),
            "\"format\" must be a string",
        ),
        (json!({"calls": "nope"}), "\"calls\" must be an array"),
        (json!({}), "\"calls\" must be an array"),
        (
            json!({"calls": [{"name": "x"}]}),
            "\"id\" must be a non-empty string",
        ),
        (
            json!({"calls": [{"id": "", "name": "x"}]}),
            "\"id\" must be a non-empty string",
        ),
        (
            json!({"calls": [{"id": "a", "name": 7}]}),
            "\"name\" must be a non-empty string",
        ),
        (
            json!({"calls": [], "idempotency_key": 1}),
            "\"idempotency_key\" must be a string",
        ),
        (
            json!({"format": "anthropic", "content": {}}),
            "\"content\" must be an array",
        ),
        (
            json!({"format": "openai", "output": [{"type": "function_call", "name": "x"}]}),
            "\"call_id\" must be a non-empty string",
        ),
        (
            json!({"format": "openai_chat", "message": []}),
            "\"message\" must be an object",
        ),
        (
            json!({"format": "openai_chat", "message": {"tool_calls": {}}}),
            "must be an array",
        ),
        (
            json!({"format": "openai_chat", "message": {"tool_calls": [{"id": "c"}]}}),
            "\"function\" is missing",
        ),
    ];
    for (body, expected) in cases {
        let err = BatchRequest::from_json(&body).unwrap_err();
        assert!(matches!(err, EnvelopeError::Malformed(_)), "{body}");
        assert!(err.to_string().contains(expected), "{body}: {err}");
    }
    let unknown = BatchRequest::from_json(&json!({"format": "gemini"})).unwrap_err();
    assert_eq!(unknown, EnvelopeError::UnknownFormat("gemini".into()));
    let duplicate = json!({"calls": [{"id": "a", "name": "x"}, {"id": "a", "name": "y"}]});
    assert_eq!(
        BatchRequest::from_json(&duplicate).unwrap_err(),
        EnvelopeError::DuplicateCallId("a".into())
    );
}

#[test]
fn results_mirror_the_request_shape() {
    let ok = ToolResult {
        id: "c1".into(),
        name: "echo".into(),
        is_error: false,
        output: "hi".into(),
        error_kind: None,
        duration_ms: 1.5,
        offloaded: None,
        structured: None,
        metadata: Default::default(),
    };
    assert_eq!(
        format_results(BatchFormat::Anthropic, "b", std::slice::from_ref(&ok)),
        json!({"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "c1", "content": "hi", "is_error": false}]})
    );
    assert_eq!(
        format_results(BatchFormat::OpenAi, "b", std::slice::from_ref(&ok)),
        json!({"input": [{"type": "function_call_output", "call_id": "c1", "output": "hi"}]})
    );
    assert_eq!(
        format_results(BatchFormat::OpenAiChat, "b", std::slice::from_ref(&ok)),
        json!({"messages": [{"role": "tool", "tool_call_id": "c1", "content": "hi"}]})
    );
    let toold = format_results(BatchFormat::Toold, "b", std::slice::from_ref(&ok));
    assert_eq!(toold["batch_id"], "b");
    assert_eq!(toold["results"][0]["offloaded"], serde_json::Value::Null);
    assert_eq!(toold["results"][0]["error_kind"], serde_json::Value::Null);
    assert_eq!(
        format_result(BatchFormat::OpenAiChat, &ok)["tool_call_id"],
        "c1"
    );
}

#[test]
fn typed_calls_follow_the_toold_envelope_rules() {
    let read = |id: &str| ToolCall::new(id, "read_file", json!({"file_path": "a"}));
    let request = BatchRequest::from_calls(vec![read("a"), read("b")], Some("k".into())).unwrap();
    assert_eq!(request.format, BatchFormat::Toold);
    // A typed batch hashes as the same batch sent as a toold body, so a retry through the
    // other door is recognised.
    let body = BatchRequest::from_json(&json!({"calls": [
        {"id": "a", "name": "read_file", "input": {"file_path": "a"}},
        {"id": "b", "name": "read_file", "input": {"file_path": "a"}}],
        "idempotency_key": "k"}))
    .unwrap();
    assert_eq!(request.idempotency, body.idempotency);
    assert_eq!(
        request.idempotency.as_ref().map(|i| i.key.as_str()),
        Some("k")
    );
    // And as hashes were computed before (the text of the body as a `Value`), so the hashes
    // of batches already stored still match their retries.
    let text = json!({"calls": [
        {"id": "a", "name": "read_file", "input": {"file_path": "a"}},
        {"id": "b", "name": "read_file", "input": {"file_path": "a"}}],
        "idempotency_key": "k"})
    .to_string();
    let stored = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(text.as_bytes()));
    assert_eq!(request.idempotency.map(|i| i.request_hash), Some(stored));
    assert_eq!(
        BatchRequest::from_calls(vec![read("a"), read("a")], None),
        Err(EnvelopeError::DuplicateCallId("a".into()))
    );
    let nameless = ToolCall::new("a", "", json!({}));
    assert!(matches!(
        BatchRequest::from_calls(vec![nameless], None),
        Err(EnvelopeError::Malformed(message)) if message.contains("\"name\"")
    ));
    // A malformed input hashes as its raw text.
    let broken = ToolCall {
        id: "x".into(),
        name: "read_file".into(),
        input: CallInput::from_arguments("{oops"),
    };
    let request = BatchRequest::from_calls(vec![broken], Some("k".into())).unwrap();
    let as_body = BatchRequest::from_json(&json!({"calls": [
        {"id": "x", "name": "read_file", "input": "{oops"}], "idempotency_key": "k"}))
    .unwrap();
    assert_eq!(request.idempotency, as_body.idempotency);
    // Without a key nothing is hashed.
    assert_eq!(
        BatchRequest::from_calls(vec![read("a")], None)
            .unwrap()
            .idempotency,
        None
    );
}

#[test]
fn unknown_members_of_toolds_shapes_are_refused_with_a_hint() {
    let refused = |body: serde_json::Value| match BatchRequest::from_json(&body) {
        Err(EnvelopeError::UnknownField(unknown)) => unknown,
        other => panic!("{body}: {other:?}"),
    };
    let arguments = refused(json!({"calls": [
        {"id": "a", "name": "bash", "input": {}},
        {"id": "b", "name": "bash", "arguments": {"command": "ls"}}]}));
    assert_eq!(
        arguments.to_string(),
        "unknown field \"arguments\" in calls[1]; expected one of: id, name, input \
         (did you mean \"input\"?)"
    );
    let key = refused(json!({"calls": [], "idempotencykey": "k"}));
    assert_eq!(key.field, "idempotencykey");
    assert_eq!(key.place, "the batch body");
    assert_eq!(
        key.hint.as_deref(),
        Some("did you mean \"idempotency_key\"?")
    );
    let shape = refused(json!({"content": []}));
    assert_eq!(
        shape.hint.as_deref(),
        Some("an anthropic body says \"format\": \"anthropic\"")
    );
    for (body, field) in [
        (
            json!({"format": "anthropic", "content": [], "model": "m"}),
            "model",
        ),
        (
            json!({"format": "openai", "output": [], "calls": []}),
            "calls",
        ),
        (
            json!({"format": "openai_chat", "message": {}, "choices": []}),
            "choices",
        ),
        (
            json!({"format": "toold", "calls": [], "stream": true}),
            "stream",
        ),
    ] {
        assert_eq!(refused(body.clone()).field, field, "{body}");
    }
}

#[test]
fn provider_items_keep_the_members_their_sdks_add() {
    let anthropic = json!({"format": "anthropic", "idempotency_key": "k", "content": [
        {"type": "tool_use", "id": "tu", "name": "echo", "input": {},
         "cache_control": {"type": "ephemeral"}, "caller": {"type": "direct"}}]});
    assert_eq!(BatchRequest::from_json(&anthropic).unwrap().calls.len(), 1);
    let openai = json!({"format": "openai", "output": [
        {"type": "function_call", "id": "fc", "call_id": "c", "name": "echo",
         "arguments": "{}", "status": "completed", "namespace": null}]});
    assert_eq!(BatchRequest::from_json(&openai).unwrap().calls.len(), 1);
    let chat = json!({"format": "openai_chat", "message": {"role": "assistant",
        "content": null, "refusal": null, "annotations": [], "audio": null,
        "tool_calls": [{"id": "c", "type": "function", "index": 0,
                        "function": {"name": "echo", "arguments": "{}", "strict": true}}]}});
    assert_eq!(BatchRequest::from_json(&chat).unwrap().calls.len(), 1);
    // A call's input is its tool's business, whatever it holds.
    let toold = json!({"calls": [{"id": "a", "name": "echo", "input": {"arguments": 1}}]});
    assert_eq!(BatchRequest::from_json(&toold).unwrap().calls.len(), 1);
}
