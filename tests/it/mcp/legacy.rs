//! The 2025-11-25 era on `/mcp`: `initialize` opens an MCP session bound to its principal's
//! default session (created from `[mcp]` on first use, shared with the 2026 era's stateless
//! requests and the principal's other MCP sessions), `tools/list` and `tools/call` run in it,
//! and ending the MCP session (DELETE) leaves it open.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use super::{LEGACY, McpClient, McpReply, audit_rows, tool_names};
use crate::http::harness::Toold;

#[tokio::test]
async fn a_legacy_session_lists_and_calls_tools_in_the_default_session() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    let init = mcp.initialize().await;
    let result = init.result();
    assert_eq!(result["protocolVersion"], LEGACY);
    assert_eq!(result["serverInfo"]["name"], "toold");
    assert!(result["capabilities"]["tools"].is_object(), "{result}");

    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let session = sessions[0]["id"].as_str().unwrap().to_owned();
    assert_eq!(sessions[0]["permission_mode"], "workspace_write");

    let listed = mcp.legacy("tools/list", json!({})).await;
    let names = tool_names(listed.result());
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    assert!(names.contains(&"bash".to_owned()), "{names:?}");
    let read_file = &listed.result()["tools"][names.iter().position(|n| n == "read_file").unwrap()];
    assert_eq!(
        read_file["annotations"]["readOnlyHint"], true,
        "{read_file}"
    );
    assert!(read_file["inputSchema"]["properties"]["file_path"].is_object());
    // Everything fits one page, and the same session lists the same tools in the same order.
    assert!(listed.result().get("nextCursor").is_none());
    let again = mcp.legacy("tools/list", json!({})).await;
    assert_eq!(tool_names(again.result()), names);
    // The 2026 fields are left out for a legacy peer.
    assert!(
        listed.result().get("resultType").is_none(),
        "{}",
        listed.text
    );

    let wrote = mcp
        .call_tool(
            "bash",
            json!({"command": "echo hello > note.txt && echo wrote"}),
        )
        .await;
    assert_eq!(wrote.result()["isError"], false, "{}", wrote.text);
    assert!(wrote.text_content().contains("wrote"), "{}", wrote.text);
    let read = mcp
        .call_tool("read_file", json!({"file_path": "note.txt"}))
        .await;
    assert_eq!(read.result()["isError"], false, "{}", read.text);
    assert!(read.text_content().contains("hello"), "{}", read.text);

    let rows = audit_rows(&toold, &session).await;
    let tools: Vec<&str> = rows
        .iter()
        .map(|row| row["tool"].as_str().unwrap())
        .collect();
    assert_eq!(tools, ["bash", "read_file"], "{rows:?}");

    // Ending the MCP session leaves the default session open, and the next MCP session, as
    // a stateless request, finds the file there.
    let ended = in_session(&toold, reqwest::Method::DELETE, &init)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::NO_CONTENT);
    let info = toold.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(info.status, StatusCode::OK, "{}", info.body);
    let mut next = McpClient::new(&toold, "/mcp");
    next.initialize().await;
    let again = next
        .call_tool("read_file", json!({"file_path": "note.txt"}))
        .await;
    assert!(again.text_content().contains("hello"), "{}", again.text);
    let mut stateless = McpClient::new(&toold, "/mcp");
    let same = stateless
        .call_tool("read_file", json!({"file_path": "note.txt"}))
        .await;
    assert!(same.text_content().contains("hello"), "{}", same.text);
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    assert_eq!(audit_rows(&toold, &session).await.len(), 4);
}

#[tokio::test]
async fn legacy_sessions_share_their_principals_default_session_and_a_bad_cursor_is_invalid_params()
{
    let toold = Toold::start_with(
        std::sync::Arc::new(tempfile::tempdir().unwrap()),
        &["--auth-token", "secret-one", "--auth-token", "secret-two"],
    );
    let mut first = McpClient::new(&toold, "/mcp");
    let mut second = McpClient::new(&toold, "/mcp");
    first.initialize().await;
    second.initialize().await;
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");

    let default = sessions[0]["id"].as_str().unwrap().to_owned();
    first
        .call_tool("bash", json!({"command": "echo one > mine.txt"}))
        .await;
    let shared = second
        .call_tool("read_file", json!({"file_path": "mine.txt"}))
        .await;
    assert_eq!(shared.result()["isError"], false, "{}", shared.text);
    assert!(shared.text_content().contains("one"), "{}", shared.text);

    // Another principal's MCP session is bound to that principal's default session.
    let mut other = McpClient::new(&toold, "/mcp").token("secret-two");
    other.initialize().await;
    let elsewhere = other
        .call_tool("read_file", json!({"file_path": "mine.txt"}))
        .await;
    assert_eq!(elsewhere.result()["isError"], true, "{}", elsewhere.text);
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 2, "{sessions}");

    // A default session closed over HTTP is replaced for the MCP sessions bound to it.
    let closed = toold.delete(&format!("/v1/sessions/{default}")).await;
    assert!(closed.status.is_success(), "{}", closed.body);
    let fresh = first
        .call_tool("read_file", json!({"file_path": "mine.txt"}))
        .await;
    assert_eq!(fresh.result()["isError"], true, "{}", fresh.text);
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    let open: Vec<&str> = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap())
        .collect();
    assert!(!open.contains(&default.as_str()), "{sessions}");
    assert_eq!(open.len(), 2, "{sessions}");

    let bad = first.legacy("tools/list", json!({"cursor": "nope"})).await;
    assert_eq!(bad.status, StatusCode::OK);
    assert_eq!(bad.message["error"]["code"], -32602, "{}", bad.text);
}

#[tokio::test]
async fn an_open_legacy_stream_ends_with_the_daemon_and_does_not_hold_its_drain() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    let init = mcp.initialize().await;
    let stream = in_session(&toold, reqwest::Method::GET, &init)
        .header("accept", "text/event-stream")
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let started = std::time::Instant::now();
    let status = tokio::task::spawn_blocking(move || toold.terminate())
        .await
        .unwrap();
    assert!(status.success(), "{status}");
    // The default shutdown grace is 30 s; an open stream used to hold the drain that long.
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    drop(stream);
}

/// A bare `method` request to `/mcp` in the legacy session `init` opened.
fn in_session(toold: &Toold, method: reqwest::Method, init: &McpReply) -> reqwest::RequestBuilder {
    toold
        .client
        .request(method, format!("{}/mcp", toold.base))
        .header(
            "mcp-session-id",
            init.headers["mcp-session-id"].to_str().unwrap(),
        )
        .header("mcp-protocol-version", LEGACY)
}
