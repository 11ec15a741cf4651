//! langchain-mcp-adapters 0.3.2 (pinned with its `mcp` 1.x, installed by `.ci/mcp_clients.sh`)
//! with its default per-call sessions: each tool call opens a new 2025-era MCP session on
//! `/mcp`, and a file one call writes is read back by the next, because every legacy MCP
//! session of a principal is bound to that principal's default session.

use super::audit_rows;
use super::old_clients::{installed, run_client, script};
use crate::http::harness::Toold;

#[tokio::test]
async fn langchain_mcp_adapters_per_call_sessions_keep_one_workspace() {
    let Some(python) = installed("TOOLD_TEST_LANGCHAIN_PY", "the langchain-mcp-adapters test")
    else {
        return;
    };
    let toold = Toold::start();
    let url = format!("{}/mcp", toold.base);
    let seen = run_client(
        &python,
        &[
            script("langchain_per_call.py").to_str().unwrap(),
            &url,
            toold.token.as_deref().unwrap_or(""),
        ],
    )
    .await;
    assert_eq!(seen["adapters"], "0.3.2", "{seen}");
    assert!(seen["mcp"].as_str().unwrap().starts_with("1."), "{seen}");
    // get_tools' session, then one per call.
    assert!(seen["sessions"].as_u64().unwrap() >= 3, "{seen}");
    let read = seen["read"].as_str().unwrap();
    assert!(read.contains("kept between sessions"), "{seen}");

    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions.as_array().unwrap().len(), 1, "{sessions}");
    let session = sessions[0]["id"].as_str().unwrap();
    let tools: Vec<String> = audit_rows(&toold, session)
        .await
        .iter()
        .map(|row| row["tool"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(tools, ["write_file", "read_file"]);
}
