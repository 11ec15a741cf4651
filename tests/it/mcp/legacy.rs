//! The 2025-11-25 era on `/mcp`: `initialize` opens an MCP session bound to a toold session
//! of its own (created from `[mcp]`), `tools/list` and `tools/call` run in it, and ending the
//! MCP session (DELETE) closes it.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::json;

use super::{LEGACY, McpClient, McpReply, audit_rows, tool_names};
use crate::http::harness::Toold;

#[tokio::test]
async fn a_legacy_session_lists_and_calls_tools_in_a_session_of_its_own() {
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

    // Ending the MCP session closes its toold session.
    let ended = in_session(&toold, reqwest::Method::DELETE, &init)
        .send()
        .await
        .unwrap();
    assert_eq!(ended.status(), StatusCode::NO_CONTENT);
    let mut closed = false;
    for _ in 0..100 {
        // A closed session is unknown to `GET /v1/sessions/{id}`.
        let info = toold.get(&format!("/v1/sessions/{session}")).await;
        if info.status == StatusCode::NOT_FOUND {
            closed = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(closed, "the MCP session's own session is still open");
}

#[tokio::test]
async fn each_legacy_session_gets_its_own_session_and_a_bad_cursor_is_invalid_params() {
    let toold = Toold::start();
    let mut first = McpClient::new(&toold, "/mcp");
    let mut second = McpClient::new(&toold, "/mcp");
    first.initialize().await;
    second.initialize().await;
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 2, "{sessions}");

    first
        .call_tool("bash", json!({"command": "echo one > mine.txt"}))
        .await;
    let other = second
        .call_tool("read_file", json!({"file_path": "mine.txt"}))
        .await;
    assert_eq!(other.result()["isError"], true, "{}", other.text);

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
