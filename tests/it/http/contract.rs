//! The OpenAPI document as a contract (what `.ci/run`'s Schemathesis run holds the daemon
//! to): a closed session's own resources are gone while its history stays readable by id,
//! bodies are objects, bounds the document states are enforced, and the document states what
//! the handlers accept (rules, batch shapes, SSE frames, observers' 403s).

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::Toold;

#[tokio::test]
async fn a_closed_sessions_own_resources_are_gone_and_its_history_stays_readable() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batch = toold
        .run_batch(
            &id,
            json!([{"id": "w", "name": "write_file", "input": {"file_path": "a.txt", "content": "x"}}]),
        )
        .await;
    let batch_id = batch["batch_id"].as_str().unwrap().to_owned();
    let open_calls = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    assert_eq!(open_calls.status, StatusCode::OK, "{}", open_calls.body);
    assert_eq!(open_calls.body["calls"].as_array().unwrap().len(), 1);

    assert_eq!(
        toold.delete(&format!("/v1/sessions/{id}")).await.status,
        StatusCode::OK
    );
    for path in [
        format!("/v1/sessions/{id}"),
        format!("/v1/sessions/{id}/calls"),
        format!("/v1/sessions/{id}/batches/{batch_id}"),
        format!("/v1/sessions/{id}/batches/{batch_id}/calls"),
        format!("/v1/sessions/{id}/approvals"),
        format!("/v1/sessions/{id}/events"),
        format!("/v1/sessions/{id}/tools"),
    ] {
        let reply = toold.get(&path).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            reply.body
        );
    }
    let closed = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    assert!(
        closed.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("is closed"),
        "{}",
        closed.body
    );

    // The audit log, whole or by batch, is read by session id.
    let audit = toold.get(&format!("/v1/calls?session={id}")).await;
    assert_eq!(audit.status, StatusCode::OK, "{}", audit.body);
    let rows = audit.body["calls"].as_array().unwrap();
    assert_eq!(rows.len(), 1, "{}", audit.body);
    assert_eq!(rows[0]["tool"], "write_file");
    let by_batch = toold
        .get(&format!("/v1/calls?session={id}&batch_id={batch_id}"))
        .await;
    assert_eq!(by_batch.body["calls"], audit.body["calls"]);
    let unknown = toold.get("/v1/calls?session=sess_nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    // Without a session: every session's rows (newest first).
    let every = toold.get("/v1/calls").await;
    assert_eq!(every.status, StatusCode::OK, "{}", every.body);
    assert_eq!(every.body["calls"], audit.body["calls"]);
}

#[tokio::test]
async fn bodies_are_objects_and_stated_bounds_are_enforced() {
    let toold = Toold::start();
    // serde would read a session request from an array; the API takes objects only.
    for body in ["[null, null]", "[]", "7", "\"x\""] {
        let reply = toold
            .post_bytes("/v1/sessions", body.as_bytes().to_vec())
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.body
        );
        assert!(
            reply.body["error"]["message"]
                .as_str()
                .unwrap()
                .contains("must be a JSON object"),
            "{}",
            reply.body
        );
    }
    assert!(
        toold.get("/v1/sessions").await.body["sessions"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // metadata is an object: null is `{}`.
    let created = toold.post("/v1/sessions", &json!({"metadata": null})).await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    assert_eq!(created.body["metadata"], json!({}));
    let id = created.body["id"].as_str().unwrap();

    for limit in ["0", "1001", "4294967296"] {
        let reply = toold
            .get(&format!("/v1/sessions/{id}/calls?limit={limit}"))
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{limit}: {}",
            reply.body
        );
    }
    assert_eq!(
        toold
            .get(&format!("/v1/sessions/{id}/calls?limit=1000"))
            .await
            .status,
        StatusCode::OK
    );

    // A seq beyond a signed 64-bit integer is no seq.
    let too_big = toold
        .send(
            toold
                .request_as(
                    None,
                    reqwest::Method::GET,
                    &format!("/v1/sessions/{id}/events"),
                )
                .header("last-event-id", "9223372036854775808"),
        )
        .await;
    assert_eq!(too_big.status, StatusCode::BAD_REQUEST, "{}", too_big.body);
}

#[tokio::test]
async fn the_document_states_what_the_handlers_accept() {
    let toold = Toold::start();
    let doc = toold.get("/openapi.json").await.body;
    let schema = |name: &str| -> Value {
        // Local references resolve against the document itself.
        let mut schema = doc["components"]["schemas"][name].clone();
        schema["components"] = doc["components"].clone();
        schema
    };
    let valid = |name: &str, instance: &Value| {
        jsonschema::validator_for(&schema(name))
            .unwrap()
            .is_valid(instance)
    };

    // Rules: the daemon's tool names and aliases, and bash with plain words.
    for rule in [
        "read_file",
        "Bash",
        "bash(git status)",
        "bash(npm run test:*)",
    ] {
        assert!(valid("Rule", &json!(rule)), "{rule}");
    }
    for rule in ["nope", "read_file(", "bash()", ""] {
        assert!(!valid("Rule", &json!(rule)), "{rule}");
    }
    // Batch bodies: four shapes told apart by format; tool calls need ids and names.
    for body in [
        json!({"calls": [{"id": "a", "name": "read_file", "input": 5}]}),
        json!({"format": "anthropic", "content": [{"type": "text"}, 3]}),
        json!({"format": "openai", "output": [{"type": "function_call", "call_id": "c", "name": "x"}]}),
        json!({"format": "openai_chat", "message": {"tool_calls": null}}),
    ] {
        assert!(valid("BatchRequestBody", &body), "{body}");
    }
    for body in [
        json!({"calls": [{"id": "", "name": "read_file"}]}),
        json!({"format": "", "message": {}}),
        json!({"format": "anthropic", "content": [{"type": "tool_use", "name": "x"}]}),
        json!({"format": "openai_chat", "message": {"tool_calls": [{"id": "c"}]}}),
        json!([]),
    ] {
        assert!(!valid("BatchRequestBody", &body), "{body}");
    }
    // Every write may answer an observer 403; event streams document one SSE frame.
    let paths = doc["paths"].as_object().unwrap();
    for (path, operations) in paths.iter().filter(|(path, _)| path.starts_with("/v1/")) {
        for (method, operation) in operations.as_object().unwrap() {
            if method != "get" {
                assert!(operation["responses"]["403"].is_object(), "{method} {path}");
            }
        }
    }
    let stream = &doc["paths"]["/v1/events"]["get"]["responses"]["200"]["content"]["text/event-stream"]
        ["schema"];
    assert_eq!(stream["$ref"], "#/components/schemas/SseFrame");
    let params = doc["paths"]["/v1/events"]["get"]["parameters"]
        .as_array()
        .unwrap();
    let resume = params
        .iter()
        .find(|p| p["name"] == "Last-Event-ID")
        .unwrap();
    assert_eq!(resume["schema"]["type"], "integer", "{resume}");
    let types = params.iter().find(|p| p["name"] == "type").unwrap();
    assert_eq!(
        types["schema"]["enum"].as_array().unwrap().len(),
        13,
        "{types}"
    );
}
