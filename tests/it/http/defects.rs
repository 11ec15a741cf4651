//! Two defects found when toold was tried from outside (issue 16), through the real daemon: a
//! registered tool the session's mode or a bare deny rule kept out of its pool is refused as
//! `permission_denied` naming the mode or the rule (and audited so), not as an unknown tool;
//! and a `bash` call stopped by its own `timeout` is kind `timeout`, not `execution`.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::Toold;

async fn session(toold: &Toold, body: Value) -> String {
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// Runs one call; its result and its audit row.
async fn call(toold: &Toold, session: &str, name: &str, input: Value) -> (Value, Value) {
    let body = json!({"calls": [{"id": "c", "name": name, "input": input}]});
    let reply = toold
        .post(&format!("/v1/sessions/{session}/batches"), &body)
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let result = reply.body["results"][0].clone();
    let calls = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    let row = calls.body["calls"]
        .as_array()
        .and_then(|rows| rows.last())
        .cloned()
        .unwrap_or(Value::Null);
    (result, row)
}

#[tokio::test]
async fn a_tool_kept_out_by_the_mode_is_denied_naming_the_mode() {
    let toold = Toold::start();
    let id = session(&toold, json!({"permission_mode": "read_only"})).await;
    let input = json!({"file_path": "x.txt", "content": "x"});
    let (result, row) = call(&toold, &id, "write_file", input).await;
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("PermissionDeniedError: "), "{output}");
    assert!(output.contains("read_only"), "names the mode: {output}");
    assert!(!output.contains("did you mean"), "{output}");
    assert_eq!(row["error_kind"], "permission_denied", "{row}");
    assert_eq!(row["decision"]["decision"], "deny", "{row}");
    assert_eq!(row["decision"]["decided_by"]["by"], "mode", "{row}");
    assert_eq!(row["decision"]["decided_by"]["mode"], "read_only", "{row}");

    // Published like any other denial.
    let mut events = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, Some(0))
        .await;
    let decision = tokio::time::timeout(std::time::Duration::from_secs(10), async {
        loop {
            let frame = events.next().await.expect("the event stream stays open");
            if frame.event == "permission:decision" {
                break frame;
            }
        }
    })
    .await
    .expect("a permission:decision event");
    assert_eq!(decision.data["tool"], "write_file", "{}", decision.data);
    assert_eq!(
        decision.data["data"]["decision"], "deny",
        "{}",
        decision.data
    );
}

#[tokio::test]
async fn a_tool_kept_out_by_the_tool_filter_names_the_filter_not_the_mode() {
    let toold = Toold::start();
    let id = session(
        &toold,
        json!({"permission_mode": "danger_full_access",
               "tools": {"mode": "read_only", "deny": ["bash"]}}),
    )
    .await;
    let input = json!({"file_path": "x.txt", "content": "x"});
    let (result, row) = call(&toold, &id, "write_file", input).await;
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("tool filter (tools.mode) is read_only"),
        "{output}"
    );
    assert_eq!(row["decision"]["decided_by"]["by"], "rule", "{row}");
    assert_eq!(
        row["decision"]["decided_by"]["rule"], "tools.mode: read_only",
        "{row}"
    );

    let (result, row) = call(&toold, &id, "bash", json!({"command": "echo hi"})).await;
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("tool filter (tools.deny) \"bash\""),
        "{output}"
    );
    assert_eq!(
        row["decision"]["decided_by"]["rule"], "tools.deny: bash",
        "{row}"
    );
    assert_eq!(row["decision"]["decided_by"]["source"], "session", "{row}");
}

#[tokio::test]
async fn a_tool_kept_out_by_a_bare_deny_rule_is_denied_naming_the_rule() {
    let toold = Toold::start();
    let id = session(
        &toold,
        json!({"permission_mode": "danger_full_access", "rules": {"deny": ["bash"]}}),
    )
    .await;
    let (result, row) = call(&toold, &id, "bash", json!({"command": "echo hi"})).await;
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("rule \"bash\""), "names the rule: {output}");
    assert_eq!(row["decision"]["decision"], "deny", "{row}");
    assert_eq!(row["decision"]["decided_by"]["by"], "rule", "{row}");
    assert_eq!(row["decision"]["decided_by"]["rule"], "bash", "{row}");
    assert_eq!(row["decision"]["decided_by"]["source"], "session", "{row}");

    // A name no tool has is still unknown, with a suggestion.
    let (result, _) = call(&toold, &id, "reed_file", json!({})).await;
    assert_eq!(result["error_kind"], "unknown_tool", "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("did you mean \"read_file\""),
        "{result}"
    );
}

#[tokio::test]
async fn a_bash_call_past_its_timeout_is_kind_timeout() {
    let toold = Toold::start();
    let id = session(&toold, json!({"permission_mode": "danger_full_access"})).await;
    let input = json!({"command": "echo started; sleep 30", "timeout": 300});
    let (result, row) = call(&toold, &id, "bash", input).await;
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["error_kind"], "timeout", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.starts_with("TimeoutError: started\n"), "{output}");
    assert!(output.contains("timed out after 300 ms"), "{output}");
    assert_eq!(row["error_kind"], "timeout", "{row}");
}
