//! The ops endpoints: `/openapi.json` documents every route of DESIGN §4 with its bodies, and
//! `/metrics` counts requests and tool calls in Prometheus text.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::Toold;

/// DESIGN §4's table, as OpenAPI paths with their methods.
const DESIGN_ROUTES: &[(&str, &str)] = &[
    ("/v1/sessions", "post"),
    ("/v1/sessions", "get"),
    ("/v1/sessions/{id}", "get"),
    ("/v1/sessions/{id}", "delete"),
    ("/v1/sessions/{id}/tools", "get"),
    ("/v1/sessions/{id}/batches", "post"),
    ("/v1/sessions/{id}/batches/{batch_id}", "get"),
    ("/v1/sessions/{id}/interrupt", "post"),
    ("/v1/sessions/{id}/approvals", "get"),
    ("/v1/sessions/{id}/approvals/{approval_id}", "post"),
    ("/v1/sessions/{id}/calls", "get"),
    ("/v1/sessions/{id}/events", "get"),
    ("/v1/events", "get"),
    ("/v1/results/{id}", "get"),
    ("/v1/tools", "get"),
    ("/healthz", "get"),
    ("/readyz", "get"),
    ("/metrics", "get"),
    ("/openapi.json", "get"),
];

#[tokio::test]
async fn the_openapi_document_lists_every_route_with_its_bodies() {
    let toold = Toold::start();
    let reply = toold.get("/openapi.json").await;
    assert_eq!(reply.status, StatusCode::OK);
    let doc = reply.body;
    assert!(
        doc["openapi"].as_str().unwrap().starts_with("3."),
        "{}",
        doc["openapi"]
    );
    for (path, method) in DESIGN_ROUTES {
        assert!(
            doc["paths"][path][method].is_object(),
            "{method} {path} missing from {}",
            doc["paths"]
        );
    }
    // Bodies are described: the batch request is one of the four shapes, results are typed,
    // errors have their body, and query parameters come from the handlers' types.
    let batch = &doc["paths"]["/v1/sessions/{id}/batches"]["post"];
    assert_eq!(
        batch["requestBody"]["content"]["application/json"]["schema"]["$ref"],
        "#/components/schemas/BatchRequestBody"
    );
    let schemas = &doc["components"]["schemas"];
    assert_eq!(
        schemas["BatchRequestBody"]["oneOf"]
            .as_array()
            .unwrap()
            .len(),
        4
    );
    assert!(schemas["ResultBody"]["properties"]["error_kind"].is_object());
    assert!(schemas["ErrorBody"]["properties"]["error"].is_object());
    assert!(
        schemas["SessionBody"]["required"]
            .as_array()
            .unwrap()
            .contains(&json!("owner"))
    );
    let names = |params: &Value| -> Vec<String> {
        params
            .as_array()
            .unwrap()
            .iter()
            .map(|p| p["name"].as_str().unwrap().to_owned())
            .collect()
    };
    let result_params = names(&doc["paths"]["/v1/results/{id}"]["get"]["parameters"]);
    for name in ["id", "offset", "limit"] {
        assert!(
            result_params.contains(&name.to_owned()),
            "{result_params:?}"
        );
    }
    let event_params = names(&doc["paths"]["/v1/events"]["get"]["parameters"]);
    for name in ["session", "tool", "type", "Last-Event-ID"] {
        assert!(event_params.contains(&name.to_owned()), "{event_params:?}");
    }
}

#[tokio::test]
async fn metrics_count_tool_calls_requests_and_batch_durations() {
    let toold = Toold::start();
    let id = toold.session().await;
    let batch = json!({"calls": [
        {"id": "a", "name": "bash", "input": {"command": "echo hi"}},
        {"id": "b", "name": "bash", "input": {"command": "echo hi"}},
        {"id": "c", "name": "reed_file", "input": {}},
    ]});
    let reply = toold
        .post(&format!("/v1/sessions/{id}/batches"), &batch)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let (status, text) = toold.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK);
    assert!(
        text.contains(r#"toold_tool_calls_total{tool="bash",outcome="ok"} 2"#),
        "{text}"
    );
    assert!(
        text.contains(r#"toold_tool_calls_total{tool="reed_file",outcome="unknown_tool"} 1"#),
        "{text}"
    );
    assert!(
        text.contains(
            r#"toold_http_requests_total{route="/v1/sessions/{id}/batches",method="POST",status="200"} 1"#
        ),
        "{text}"
    );
    assert!(
        text.contains("toold_batch_duration_seconds_count 1"),
        "{text}"
    );
}
