//! What the MCP door answers to requests it cannot serve: an unknown tool and an unknown
//! method (JSON-RPC errors), malformed JSON and a JSON-RPC batch array (refused by rmcp with
//! 415 before any handler runs), a body past the limit (413), a protocol version header that
//! disagrees with the body (400, -32020), a foreign `Origin` or `Host` (403); the daemon serves
//! on.

use reqwest::StatusCode;
use serde_json::json;

use super::McpClient;
use crate::http::harness::Toold;

#[tokio::test]
async fn unknown_tools_and_methods_are_jsonrpc_errors_in_both_eras() {
    let toold = Toold::start();
    let mut stateless = McpClient::new(&toold, "/mcp");
    let unknown = stateless.call_tool("reed_file", json!({})).await;
    assert_eq!(unknown.message["error"]["code"], -32602, "{}", unknown.text);
    assert!(unknown.text.contains("reed_file"), "{}", unknown.text);
    let method = stateless
        .stateless("tools/frobnicate", json!({}), None)
        .await;
    assert_eq!(method.status, StatusCode::NOT_FOUND, "{}", method.text);
    assert_eq!(method.message["error"]["code"], -32601, "{}", method.text);

    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    let unknown = legacy.call_tool("reed_file", json!({})).await;
    assert_eq!(unknown.message["error"]["code"], -32602, "{}", unknown.text);
    let method = legacy.legacy("tools/frobnicate", json!({})).await;
    assert_eq!(method.message["error"]["code"], -32601, "{}", method.text);
    let ping = legacy.legacy("ping", json!({})).await;
    assert_eq!(ping.result(), &json!({}));
}

#[tokio::test]
async fn malformed_bodies_batches_and_foreign_origins_are_refused_and_the_daemon_serves_on() {
    let toold = Toold::start();
    let mcp = McpClient::new(&toold, "/mcp");

    let malformed = mcp
        .post_raw(&[], b"{\"jsonrpc\": \"2.0\", \"id\": 1,".to_vec())
        .await;
    assert!(
        malformed.status.is_client_error(),
        "{} {}",
        malformed.status,
        malformed.text
    );

    let batch = json!([
        {"jsonrpc": "2.0", "id": 1, "method": "ping"},
        {"jsonrpc": "2.0", "id": 2, "method": "ping"},
    ]);
    let refused = mcp.post_raw(&[], batch.to_string().into_bytes()).await;
    assert!(
        refused.status.is_client_error(),
        "{} {}",
        refused.status,
        refused.text
    );

    // Past the server's body limit (16 MiB by default): rmcp reads the body and answers 413
    // as soon as it passes the limit. (Just past it, so the rest of the upload still fits the
    // socket's buffers: reqwest reports a reset connection, not the early answer, when the
    // server stops reading a much larger upload; curl sees the 413 for 20 MB.)
    let huge = mcp.post_raw(&[], vec![b' '; (16 << 20) + 4096]).await;
    assert_eq!(huge.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", huge.text);

    // A protocol version header that disagrees with the request's `_meta`: -32020, 400.
    let mismatch = mcp
        .post_raw(
            &[
                ("mcp-protocol-version", "2025-11-25"),
                ("mcp-method", "tools/list"),
            ],
            json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string()
            .into_bytes(),
        )
        .await;
    assert_eq!(
        mismatch.status,
        StatusCode::BAD_REQUEST,
        "{}",
        mismatch.text
    );
    assert_eq!(
        mismatch.message["error"]["code"], -32020,
        "{}",
        mismatch.text
    );

    let foreign = mcp
        .post_raw(&[("origin", "http://evil.example")], b"{}".to_vec())
        .await;
    assert_eq!(foreign.status, StatusCode::FORBIDDEN, "{}", foreign.text);

    // DNS rebinding: a loopback listener answers only to its own names.
    let rebound = mcp
        .post_raw(&[("host", "evil.example")], b"{}".to_vec())
        .await;
    assert_eq!(rebound.status, StatusCode::FORBIDDEN, "{}", rebound.text);

    // The listener's own origin is accepted.
    let own_origin = toold.base.clone();
    let mut same = McpClient::new(&toold, "/mcp");
    let listed = same.stateless("tools/list", json!({}), None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    let with_origin = mcp
        .post_raw(
            &[
                ("origin", own_origin.as_str()),
                ("mcp-protocol-version", "2026-07-28"),
                ("mcp-method", "server/discover"),
            ],
            json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover", "params": {"_meta": {
                "io.modelcontextprotocol/protocolVersion": "2026-07-28",
                "io.modelcontextprotocol/clientCapabilities": {}}}})
            .to_string()
            .into_bytes(),
        )
        .await;
    assert_eq!(with_origin.status, StatusCode::OK, "{}", with_origin.text);
}
