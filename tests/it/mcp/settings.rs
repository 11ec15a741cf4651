//! `[mcp]` in the settings file: the permission mode of the sessions the MCP door creates, and
//! the browser origins it accepts besides the listener's own.

use reqwest::StatusCode;
use serde_json::json;

use super::{McpClient, tool_names};
use crate::http::harness::Toold;

#[tokio::test]
async fn the_mcp_settings_shape_the_sessions_the_door_creates_and_the_origins_it_accepts() {
    let toold = Toold::start_with_config(
        "[mcp]\npermission_mode = \"read_only\"\nallowed_origins = [\"https://app.example:443\"]\n",
    );
    let mut mcp = McpClient::new(&toold, "/mcp");
    mcp.initialize().await;
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    assert_eq!(sessions[0]["permission_mode"], "read_only", "{sessions}");
    // A read-only session's pool holds no writing tool.
    let names = tool_names(mcp.legacy("tools/list", json!({})).await.result());
    assert!(names.contains(&"read_file".to_owned()), "{names:?}");
    assert!(!names.contains(&"write_file".to_owned()), "{names:?}");

    let discover =
        json!({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": {
        "io.modelcontextprotocol/protocolVersion": "2026-07-28",
        "io.modelcontextprotocol/clientCapabilities": {}}}})
        .to_string();
    let headers = |origin| {
        [
            ("origin", origin),
            ("mcp-protocol-version", "2026-07-28"),
            ("mcp-method", "server/discover"),
        ]
    };
    let stateless = McpClient::new(&toold, "/mcp");
    let listed = stateless
        .post_raw(
            &headers("https://app.example"),
            discover.clone().into_bytes(),
        )
        .await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let other = stateless
        .post_raw(&headers("https://other.example"), discover.into_bytes())
        .await;
    assert_eq!(other.status, StatusCode::FORBIDDEN, "{}", other.text);
}
