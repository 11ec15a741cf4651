//! Progress over MCP (DESIGN §8): a `tools/call` whose `_meta` carries a `progressToken` gets
//! the call's progress reports as `notifications/progress` for that token, in order and before
//! the result, in both eras (a 2026-07-28 answer turns into an SSE stream for them); a call
//! without a token gets none.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{McpClient, McpReply};
use crate::http::harness::Toold;

/// A call that reports progress (`bash` reports its pid when it starts) and takes a moment.
fn slow_echo() -> Value {
    json!({"command": "sleep 0.2; echo done"})
}

/// The reply's progress notifications all carry `token`, count up from 1, carry the report's
/// JSON text, and come before the result; returns how many there were.
fn assert_progress_before_result(reply: &McpReply, token: &Value) -> usize {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.result()["isError"], false, "{}", reply.text);
    assert!(reply.text_content().contains("done"), "{}", reply.text);
    let progress = reply.notifications("notifications/progress");
    assert!(!progress.is_empty(), "no progress: {}", reply.text);
    for (n, notification) in progress.iter().enumerate() {
        let params = &notification["params"];
        assert_eq!(&params["progressToken"], token, "{notification}");
        assert_eq!(
            params["progress"].as_f64(),
            Some((n + 1) as f64),
            "{notification}"
        );
        let report: Value = serde_json::from_str(params["message"].as_str().unwrap()).unwrap();
        assert!(report.is_object(), "{notification}");
    }
    // bash's first report names the process it started.
    let first: Value =
        serde_json::from_str(progress[0]["params"]["message"].as_str().unwrap()).unwrap();
    assert!(first["pid"].is_u64(), "{first}");
    let result_at = reply
        .messages
        .iter()
        .position(|message| message.get("id").is_some())
        .expect("a response");
    let last_progress_at = reply
        .messages
        .iter()
        .rposition(|message| message["method"] == "notifications/progress")
        .unwrap();
    assert!(last_progress_at < result_at, "{}", reply.text);
    progress.len()
}

#[tokio::test]
async fn a_legacy_call_with_a_progress_token_gets_its_progress_before_the_result() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    mcp.initialize().await;
    let token = json!("call-1");
    let reply = mcp
        .call_tool_with_progress("bash", slow_echo(), token.clone())
        .await;
    assert_progress_before_result(&reply, &token);

    let plain = mcp.call_tool("bash", slow_echo()).await;
    assert_eq!(plain.result()["isError"], false, "{}", plain.text);
    assert!(
        plain.notifications("notifications/progress").is_empty(),
        "{}",
        plain.text
    );
}

#[tokio::test]
async fn a_stateless_call_with_a_progress_token_is_answered_with_a_stream() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    let token = json!(7);
    let reply = mcp
        .call_tool_with_progress("bash", slow_echo(), token.clone())
        .await;
    assert_progress_before_result(&reply, &token);
    let content_type = reply.headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    // The 2026 result still carries its 2026 fields on the stream.
    assert!(reply.result().get("resultType").is_some(), "{}", reply.text);

    let plain = mcp.call_tool("bash", slow_echo()).await;
    assert_eq!(plain.result()["isError"], false, "{}", plain.text);
    assert!(
        plain.notifications("notifications/progress").is_empty(),
        "{}",
        plain.text
    );
    let content_type = plain.headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("application/json"),
        "{content_type}"
    );
}

#[tokio::test]
async fn a_call_with_a_progress_token_runs_in_its_session_and_is_audited_once() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    mcp.initialize().await;
    let session = toold.get("/v1/sessions").await.body["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let reply = mcp
        .call_tool_with_progress("bash", slow_echo(), json!("audited"))
        .await;
    assert_progress_before_result(&reply, &json!("audited"));
    let rows = super::audit_rows(&toold, &session).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    assert_eq!(rows[0]["tool"], "bash", "{rows:?}");
}
