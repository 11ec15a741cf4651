//! The 2026-07-28 era (stateless requests) on `/mcp`, which run in the caller's default
//! session, and both eras on `/v1/sessions/{id}/mcp`, which run in that existing session:
//! a deny rule of the session refuses an MCP call as it refuses an HTTP one, and the audit log
//! shows it.

use reqwest::StatusCode;
use serde_json::json;

use super::{McpClient, audit_rows, tool_names};
use crate::http::harness::Toold;

#[tokio::test]
async fn stateless_requests_share_the_callers_default_session() {
    let toold = Toold::start_with(
        std::sync::Arc::new(tempfile::tempdir().unwrap()),
        &["--auth-token", "secret-one", "--auth-token", "secret-two"],
    );
    let mut mcp = McpClient::new(&toold, "/mcp");

    let discovered = mcp.stateless("server/discover", json!({}), None).await;
    assert_eq!(discovered.status, StatusCode::OK, "{}", discovered.text);
    let versions = discovered.result()["supportedVersions"].to_string();
    assert!(
        versions.contains("2026-07-28") && versions.contains("2025-11-25"),
        "{versions}"
    );

    let listed = mcp.stateless("tools/list", json!({}), None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert!(tool_names(listed.result()).contains(&"grep_search".to_owned()));
    assert_eq!(listed.result()["resultType"], "complete", "{}", listed.text);

    let wrote = mcp
        .call_tool(
            "bash",
            json!({"command": "echo shared > note.txt && echo ok"}),
        )
        .await;
    assert_eq!(wrote.result()["isError"], false, "{}", wrote.text);
    let read = mcp
        .call_tool("read_file", json!({"file_path": "note.txt"}))
        .await;
    assert!(read.text_content().contains("shared"), "{}", read.text);

    // One default session for the token, holding both calls.
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let session = sessions[0]["id"].as_str().unwrap();
    assert_eq!(audit_rows(&toold, session).await.len(), 2);

    // Another token has a default session of its own, which does not see the first's files.
    let mut other = McpClient::new(&toold, "/mcp").token("secret-two");
    let elsewhere = other
        .call_tool("read_file", json!({"file_path": "note.txt"}))
        .await;
    assert_eq!(elsewhere.result()["isError"], true, "{}", elsewhere.text);
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 2, "{sessions}");

    // Without a token the gate refuses, as on every route.
    let anonymous = toold
        .client
        .post(format!("{}/mcp", toold.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(anonymous.status(), StatusCode::UNAUTHORIZED);
}

#[tokio::test]
async fn the_session_path_runs_in_that_session_and_a_deny_rule_refuses_the_call() {
    let toold = Toold::start();
    let created = toold
        .post(
            "/v1/sessions",
            &json!({"rules": {"deny": ["read_file(./secret.txt)"]}}),
        )
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let session = created.body["id"].as_str().unwrap().to_owned();
    let workspace = toold.workspace(&session).await;
    std::fs::write(workspace.join("secret.txt"), "hidden").unwrap();
    std::fs::write(workspace.join("open.txt"), "visible").unwrap();
    let path = format!("/v1/sessions/{session}/mcp");

    let mut stateless = McpClient::new(&toold, &path);
    let denied = stateless
        .call_tool("read_file", json!({"file_path": "secret.txt"}))
        .await;
    assert_eq!(denied.result()["isError"], true, "{}", denied.text);
    assert_eq!(
        denied.result()["_meta"]["dev.toold/errorKind"],
        "permission_denied"
    );
    assert!(!denied.text_content().contains("hidden"));

    let mut legacy = McpClient::new(&toold, &path);
    legacy.initialize().await;
    let read = legacy
        .call_tool("read_file", json!({"file_path": "open.txt"}))
        .await;
    assert!(read.text_content().contains("visible"), "{}", read.text);

    // The MCP session lives on the path that opened it.
    let moved = legacy.on_path("/mcp").legacy("tools/list", json!({})).await;
    assert_eq!(moved.message["error"]["code"], -32600, "{}", moved.text);
    assert!(moved.text.contains(&session), "{}", moved.text);

    // No session of its own was made, and both calls are in this session's audit log.
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let rows = audit_rows(&toold, &session).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(rows[0]["error_kind"], "permission_denied", "{rows:?}");
    assert_eq!(rows[0]["tool"], "read_file");
    assert_eq!(rows[1]["is_error"], false);

    let unknown = McpClient::new(&toold, "/v1/sessions/sess_nope/mcp")
        .post_raw(&[], b"{}".to_vec())
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text);
}
