//! Every endpoint once, and a batch in each of the four shapes with results in order.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::Toold;

#[tokio::test]
async fn ops_endpoints_and_the_catalogue_answer() {
    let toold = Toold::start();
    assert_eq!(toold.get("/healthz").await.body["status"], "ok");
    assert_eq!(toold.get("/readyz").await.body["status"], "ready");
    let tools = toold.get("/v1/tools").await;
    assert_eq!(tools.status, StatusCode::OK);
    let names: Vec<&str> = tools.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert!(
        names.contains(&"read_file") && names.contains(&"bash"),
        "{names:?}"
    );
    let unknown = toold.get("/v1/nope").await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
    assert_eq!(unknown.body["error"]["code"], "not_found");
    assert!(unknown.headers.contains_key("x-request-id"));
}

#[tokio::test]
async fn sessions_are_created_listed_inspected_and_closed() {
    let toold = Toold::start();
    let project = toold.projects();
    let created = toold
        .post(
            "/v1/sessions",
            &json!({"working_directory": project, "permission_mode": "read_only", "metadata": {"k": 1}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let id = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(created.body["permission_mode"], "read_only");
    let outside = toold
        .post("/v1/sessions", &json!({"working_directory": "/"}))
        .await;
    assert_eq!(outside.status, StatusCode::FORBIDDEN);
    assert!(
        outside.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("allowed root")
    );

    let listed = toold.get("/v1/sessions").await;
    assert_eq!(listed.body["sessions"][0]["id"], id.as_str());
    let got = toold.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(got.body["working_directory"], json!(project));
    assert!(got.body["owner"].as_str().unwrap().starts_with("node-"));

    for format in ["anthropic", "openai", "openai_chat", "mcp", "toold"] {
        let tools = toold
            .get(&format!("/v1/sessions/{id}/tools?format={format}"))
            .await;
        assert_eq!(tools.status, StatusCode::OK, "{format}");
        assert!(!tools.body["tools"].as_array().unwrap().is_empty());
    }
    let interrupted = toold
        .post(&format!("/v1/sessions/{id}/interrupt"), &json!({}))
        .await;
    assert_eq!(interrupted.body["interrupted"], true);
    let approvals = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(approvals.body, json!({"approvals": []}));
    let resolve = toold
        .post(
            &format!("/v1/sessions/{id}/approvals/appr_x"),
            &json!({"decision": "allow"}),
        )
        .await;
    assert_eq!(resolve.status, StatusCode::NOT_FOUND);

    let closed = toold.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(closed.body["closed"], true);
    assert_eq!(
        toold.get(&format!("/v1/sessions/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
}

#[tokio::test]
async fn a_batch_in_each_shape_answers_in_that_shape_in_order() {
    let toold = Toold::start();
    let id = toold.session().await;
    let path = format!("/v1/sessions/{id}/batches");
    let echo = |n: u32| json!({"command": format!("echo {n}")});

    let toold_shape = toold
        .post(
            &path,
            &json!({"calls": (0..3).map(|n| json!({"id": format!("c{n}"), "name": "bash", "input": echo(n)})).collect::<Vec<_>>()}),
        )
        .await;
    assert_eq!(toold_shape.status, StatusCode::OK, "{}", toold_shape.body);
    let batch_id = toold_shape.headers["x-toold-batch-id"]
        .to_str()
        .unwrap()
        .to_owned();
    assert_eq!(toold_shape.body["batch_id"], batch_id.as_str());
    let outputs: Vec<&str> = toold_shape.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["output"].as_str().unwrap())
        .collect();
    assert_eq!(outputs, ["0\n", "1\n", "2\n"]);

    let anthropic = toold
        .post(
            &path,
            &json!({"format": "anthropic", "content": [
                {"type": "text", "text": "running"},
                {"type": "tool_use", "id": "tu1", "name": "bash", "input": echo(1)},
                {"type": "tool_use", "id": "tu2", "name": "bash", "input": echo(2)},
            ]}),
        )
        .await;
    assert_eq!(anthropic.body["role"], "user");
    assert_eq!(anthropic.body["content"][0]["tool_use_id"], "tu1");
    assert_eq!(anthropic.body["content"][1]["content"], "2\n");

    let openai = toold
        .post(
            &path,
            &json!({"format": "openai", "output": [
                {"type": "function_call", "call_id": "f1", "name": "bash", "arguments": echo(1).to_string()},
                {"type": "function_call", "call_id": "f2", "name": "bash", "arguments": "{not json"},
            ]}),
        )
        .await;
    assert_eq!(openai.body["input"][0]["call_id"], "f1");
    assert_eq!(openai.body["input"][0]["output"], "1\n");
    assert!(
        openai.body["input"][1]["output"]
            .as_str()
            .unwrap()
            .starts_with("InputValidationError: ")
    );

    let chat = toold
        .post(
            &path,
            &json!({"format": "openai_chat", "message": {"role": "assistant", "tool_calls": [
                {"id": "k1", "type": "function", "function": {"name": "bash", "arguments": echo(7).to_string()}},
            ]}}),
        )
        .await;
    assert_eq!(
        chat.body,
        json!({"messages": [{"role": "tool", "tool_call_id": "k1", "content": "7\n"}]})
    );

    let stored = toold
        .get(&format!("/v1/sessions/{id}/batches/{batch_id}"))
        .await;
    assert_eq!(stored.body["status"], "completed");
    assert_eq!(stored.body["results"][2]["output"], "2\n");
    assert_eq!(
        toold
            .get(&format!("/v1/sessions/{id}/batches/batch_nope"))
            .await
            .status,
        StatusCode::NOT_FOUND
    );

    // The audit log, two rows a page.
    let mut cursor: Option<i64> = None;
    let mut rows = 0;
    loop {
        let query = cursor.map_or(String::new(), |c| format!("&cursor={c}"));
        let page = toold
            .get(&format!("/v1/sessions/{id}/calls?limit=2{query}"))
            .await;
        rows += page.body["calls"].as_array().unwrap().len();
        match page.body["next_cursor"].as_i64() {
            Some(next) => cursor = Some(next),
            None => break,
        }
    }
    assert_eq!(rows, 3 + 2 + 2 + 1);
}

#[tokio::test]
async fn a_streamed_batch_sends_progress_results_in_order_and_done() {
    let toold = Toold::start();
    let id = toold.session().await;
    let body = json!({"format": "anthropic", "content": [
        {"type": "tool_use", "id": "a", "name": "bash", "input": {"command": "echo one"}},
        {"type": "tool_use", "id": "b", "name": "bash", "input": {"command": "echo two"}},
    ]});
    let mut stream = toold
        .sse(&format!("/v1/sessions/{id}/batches"), Some(&body), None)
        .await;
    let batch_id = stream.headers["x-toold-batch-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let mut results = Vec::new();
    let mut done = Value::Null;
    while let Some(frame) = stream.next().await {
        match frame.event.as_str() {
            "result" => results.push(frame.data),
            "done" => done = frame.data,
            "tool:progress" => assert!(frame.data["call_id"].is_string()),
            other => panic!("unexpected event {other}"),
        }
    }
    assert_eq!(done["batch_id"], batch_id.as_str());
    assert_eq!(results[0]["tool_use_id"], "a");
    assert_eq!(results[1]["content"], "two\n");
    assert_eq!(results[1]["type"], "tool_result");
}

#[tokio::test]
async fn an_offloaded_output_reads_back_in_full_through_results() {
    let toold = Toold::start();
    let id = toold.session().await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &json!({"calls": [{"id": "big", "name": "bash", "input": {"command": "seq 1 400000"}}]}),
        )
        .await;
    let offloaded = &reply.body["results"][0]["offloaded"];
    let result_id = offloaded["result_id"]
        .as_str()
        .expect("offloaded")
        .to_owned();
    let total = offloaded["total_chars"].as_u64().unwrap();
    let mut content = String::new();
    while (content.len() as u64) < total {
        let page = toold
            .get(&format!(
                "/v1/results/{result_id}?offset={}&limit=1000000",
                content.len()
            ))
            .await;
        assert_eq!(page.body["total_chars"], total);
        content.push_str(page.body["content"].as_str().unwrap());
    }
    let expected: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(content, expected);
    assert_eq!(
        toold.get("/v1/results/res_unknown").await.status,
        StatusCode::NOT_FOUND
    );
}
