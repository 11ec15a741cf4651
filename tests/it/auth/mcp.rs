//! The MCP door: B cannot reach A's session by its path (404, as a missing session), nor by
//! A's legacy MCP session id (the calls fail as for a missing session, nothing runs); a
//! stateless request runs in the caller's own default session; an observer calls nothing.

use reqwest::StatusCode;
use serde_json::json;

use super::{AGENT_A, AGENT_B, MISSING, OBSERVER, daemon, get, like_missing, session_of};
use crate::http::harness::Reply;
use crate::mcp::McpClient;

/// The audit rows of `session`, read as A.
async fn rows(toold: &crate::http::harness::Toold, session: &str) -> Vec<serde_json::Value> {
    let reply = get(toold, AGENT_A, &format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["calls"].as_array().unwrap().clone()
}

#[tokio::test]
async fn another_agent_reaches_no_session_of_a_through_the_mcp_door() {
    let toold = daemon();
    let a = session_of(&toold, AGENT_A, json!({})).await;

    // A's session's own endpoint, both eras: as a missing session.
    let path = format!("/v1/sessions/{a}/mcp");
    let mut b_on_a = McpClient::new(&toold, &path).token(AGENT_B);
    let mut b_on_missing =
        McpClient::new(&toold, &format!("/v1/sessions/{MISSING}/mcp")).token(AGENT_B);
    let echo = json!({"command": "echo from-b > b.txt"});
    let theirs = b_on_a.call_tool("bash", echo.clone()).await;
    let missing = b_on_missing.call_tool("bash", echo).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.text);
    let body = |text: &str| serde_json::from_str(text).unwrap_or_default();
    let as_reply = |status, text: &str| Reply {
        status,
        headers: Default::default(),
        body: body(text),
    };
    like_missing(
        &as_reply(theirs.status, &theirs.text),
        &as_reply(missing.status, &missing.text),
        (&a, MISSING),
        &[],
    );
    assert!(
        rows(&toold, &a).await.is_empty(),
        "B's call ran in A's session"
    );

    // A's legacy MCP session, its id presented by B: every request fails as for a session B
    // cannot see, and nothing runs in A's session.
    let mut as_mcp = McpClient::new(&toold, "/mcp").token(AGENT_A);
    as_mcp.initialize().await;
    let listed = as_mcp.legacy("tools/list", json!({})).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let mut hijack = as_mcp.on_path("/mcp").token(AGENT_B);
    let called = hijack
        .call_tool("bash", json!({"command": "echo hijack"}))
        .await;
    let error = &called.message["error"];
    assert!(
        error["message"]
            .as_str()
            .unwrap_or_default()
            .contains("unknown session"),
        "{}",
        called.text
    );
    let sessions = get(&toold, AGENT_A, "/v1/sessions").await.body["sessions"].clone();
    let ids: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    let mcp_session = ids
        .iter()
        .find(|id| **id != a)
        .expect("the MCP session's own")
        .to_string();
    assert!(
        rows(&toold, &mcp_session).await.is_empty(),
        "B's call ran in A's MCP session"
    );

    // A stateless request of B runs in B's own default session, which A cannot see.
    let mut stateless = McpClient::new(&toold, "/mcp").token(AGENT_B);
    let ran = stateless
        .call_tool("bash", json!({"command": "echo b-default"}))
        .await;
    assert_eq!(ran.result()["isError"], false, "{}", ran.text);
    let b_sessions = get(&toold, AGENT_B, "/v1/sessions").await.body["sessions"].clone();
    assert_eq!(b_sessions.as_array().unwrap().len(), 1, "{b_sessions}");
    assert_eq!(b_sessions[0]["principal"], "agent-b");
    let a_sessions = get(&toold, AGENT_A, "/v1/sessions").await.body["sessions"].to_string();
    assert!(
        !a_sessions.contains(b_sessions[0]["id"].as_str().unwrap()),
        "{a_sessions}"
    );

    // The observer: its tools/call on A's session is refused, and nothing runs.
    let mut observer = McpClient::new(&toold, &path).token(OBSERVER);
    let refused = observer
        .call_tool("bash", json!({"command": "echo o"}))
        .await;
    assert!(
        refused.message.get("error").is_some() || refused.result()["isError"] == true,
        "{}",
        refused.text
    );
    assert!(rows(&toold, &a).await.is_empty(), "the observer's call ran");
}
