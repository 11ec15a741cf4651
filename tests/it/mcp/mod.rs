//! The MCP door of the real daemon (`http::harness::Toold`, reqwest): both protocol eras over
//! Streamable HTTP on `/mcp` and `/v1/sessions/{id}/mcp`, each call through the one pipeline
//! (the audit log shows it), and bad input answered without harm to the daemon; and `toold
//! mcp`, one session over stdio (`stdio`, its own small line client).
//!
//! [`McpClient`] is a small client written from the MCP revisions, not from toold or rmcp:
//! a legacy (2025-11-25) client initializes and then sends `Mcp-Session-Id`; a stateless
//! (2026-07-28) one sends `_meta` with its protocol version and capabilities and the
//! `MCP-Protocol-Version`, `Mcp-Method` and `Mcp-Name` headers on every request.

mod bad_input;
mod cancellation;
mod catalog;
mod input_required;
mod langchain;
mod legacy;
mod list_changed;
mod old_clients;
mod parallel;
mod pipeline;
mod progress;
mod prompts;
mod results;
mod settings;
mod stateless;
mod stdio;
mod two_processes;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::http::harness::Toold;

pub const LEGACY: &str = "2025-11-25";
pub const STATELESS: &str = "2026-07-28";

/// An answer: status, headers, and the JSON-RPC message (from a JSON body or the SSE event
/// carrying it); `Null` when neither held one, `text` is the raw body then. `messages` holds
/// every JSON-RPC message of the answer in order (notifications before the response on an
/// SSE stream).
pub struct McpReply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub message: Value,
    pub messages: Vec<Value>,
    pub text: String,
}

impl McpReply {
    pub fn result(&self) -> &Value {
        assert!(
            self.message.get("result").is_some(),
            "no result: {} {}",
            self.status,
            self.text
        );
        &self.message["result"]
    }

    /// The notifications of the answer named `method`, in the order they came.
    pub fn notifications(&self, method: &str) -> Vec<&Value> {
        self.messages
            .iter()
            .filter(|message| message.get("id").is_none() && message["method"] == method)
            .collect()
    }

    /// The text of a `tools/call` result's first content block.
    pub fn text_content(&self) -> &str {
        self.result()["content"][0]["text"].as_str().unwrap()
    }
}

pub struct McpClient<'t> {
    toold: &'t Toold,
    path: String,
    /// Legacy era: set by `initialize`.
    session: Option<String>,
    next_id: u64,
    /// The bearer token sent; the daemon's first one unless changed with [`Self::token`].
    token: Option<String>,
    /// What a stateless request declares in `_meta` (`clientCapabilities`); none by default.
    capabilities: Value,
}

impl<'t> McpClient<'t> {
    pub fn new(toold: &'t Toold, path: &str) -> McpClient<'t> {
        McpClient {
            toold,
            path: path.to_owned(),
            session: None,
            next_id: 1,
            token: toold.token.clone(),
            capabilities: json!({}),
        }
    }

    /// The same client (its legacy session too) speaking to another path.
    pub fn on_path(&self, path: &str) -> McpClient<'t> {
        McpClient {
            toold: self.toold,
            path: path.to_owned(),
            session: self.session.clone(),
            next_id: self.next_id,
            token: self.token.clone(),
            capabilities: self.capabilities.clone(),
        }
    }

    /// Sends `token` instead of the daemon's first one.
    pub fn token(mut self, token: &str) -> McpClient<'t> {
        self.token = Some(token.to_owned());
        self
    }

    /// Declares `capabilities` in every stateless request's `_meta`.
    pub fn capabilities(mut self, capabilities: Value) -> McpClient<'t> {
        self.capabilities = capabilities;
        self
    }

    /// A POST of `body` with the MCP content negotiation headers and `headers`.
    pub async fn post_raw(&self, headers: &[(&str, &str)], body: Vec<u8>) -> McpReply {
        let response = self.send_raw(headers, body).await;
        let status = response.status();
        let headers = response.headers().clone();
        let text = response.text().await.unwrap();
        McpReply {
            status,
            headers,
            message: jsonrpc_message(&text),
            messages: jsonrpc_messages(&text),
            text,
        }
    }

    /// [`Self::post_raw`]'s response, its body not read yet (a stream to read as it comes).
    pub async fn send_raw(&self, headers: &[(&str, &str)], body: Vec<u8>) -> reqwest::Response {
        let mut builder = self
            .toold
            .client
            .post(format!("{}{}", self.toold.base, self.path))
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(token) = &self.token {
            builder = builder.bearer_auth(token);
        }
        if let Some(session) = &self.session {
            builder = builder.header("mcp-session-id", session);
        }
        for (name, value) in headers {
            builder = builder.header(*name, *value);
        }
        builder.send().await.expect("request sent")
    }

    pub fn request(&mut self, method: &str, params: Value) -> Value {
        let id = self.next_id;
        self.next_id += 1;
        json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
    }

    /// The 2025 handshake: `initialize`, keeping the session id, then `initialized`.
    pub async fn initialize(&mut self) -> McpReply {
        self.initialize_with(json!({})).await
    }

    /// [`Self::initialize`] declaring `capabilities`.
    pub async fn initialize_with(&mut self, capabilities: Value) -> McpReply {
        let body = self.request(
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": capabilities,
                   "clientInfo": {"name": "toold-tests", "version": "1"}}),
        );
        let reply = self.post_raw(&[], body.to_string().into_bytes()).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
        let session = reply.headers["mcp-session-id"].to_str().unwrap().to_owned();
        self.session = Some(session);
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let ack = self
            .post_raw(
                &[("mcp-protocol-version", LEGACY)],
                initialized.to_string().into_bytes(),
            )
            .await;
        assert_eq!(ack.status, StatusCode::ACCEPTED, "{}", ack.text);
        reply
    }

    /// A request in the legacy session `initialize` opened.
    pub async fn legacy(&mut self, method: &str, params: Value) -> McpReply {
        let body = self.request(method, params);
        self.post_raw(
            &[("mcp-protocol-version", LEGACY)],
            body.to_string().into_bytes(),
        )
        .await
    }

    /// A self-contained 2026-07-28 request; `name` is the tool name for `Mcp-Name`.
    pub async fn stateless(&mut self, method: &str, params: Value, name: Option<&str>) -> McpReply {
        let mut params = params;
        // Added to whatever `_meta` the params already carry (a `progressToken`).
        let meta = params["_meta"].as_object().cloned().unwrap_or_default();
        params["_meta"] = json!({
            "io.modelcontextprotocol/protocolVersion": STATELESS,
            "io.modelcontextprotocol/clientCapabilities": self.capabilities,
            "io.modelcontextprotocol/clientInfo": {"name": "toold-tests", "version": "1"},
        });
        params["_meta"].as_object_mut().unwrap().extend(meta);
        let body = self.request(method, params);
        let mut headers = vec![("mcp-protocol-version", STATELESS), ("mcp-method", method)];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        self.post_raw(&headers, body.to_string().into_bytes()).await
    }

    /// `tools/call` in whichever era the client speaks (legacy once initialized).
    pub async fn call_tool(&mut self, name: &str, arguments: Value) -> McpReply {
        let params = json!({"name": name, "arguments": arguments});
        self.call_tool_with(name, params).await
    }

    /// `tools/call` asking for progress under `token` (`_meta.progressToken`).
    pub async fn call_tool_with_progress(
        &mut self,
        name: &str,
        arguments: Value,
        token: Value,
    ) -> McpReply {
        let params = json!({"name": name, "arguments": arguments,
                            "_meta": {"progressToken": token}});
        self.call_tool_with(name, params).await
    }

    /// `tools/call` with whole `params` (`name`, `arguments` and any other field, such as a
    /// 2026 retry's `inputResponses` and `requestState`); `name` for the `Mcp-Name` header.
    pub async fn call_tool_with(&mut self, name: &str, params: Value) -> McpReply {
        if self.session.is_some() {
            self.legacy("tools/call", params).await
        } else {
            self.stateless("tools/call", params, Some(name)).await
        }
    }
}

/// The JSON-RPC response in a body: the body itself, or the SSE `data:` event with an id.
fn jsonrpc_message(text: &str) -> Value {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return value;
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .find(|message| message.get("id").is_some())
        .unwrap_or(Value::Null)
}

/// Every JSON-RPC message in a body: the body itself, or each SSE `data:` event in order.
fn jsonrpc_messages(text: &str) -> Vec<Value> {
    if let Ok(value) = serde_json::from_str::<Value>(text) {
        return vec![value];
    }
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect()
}

/// The tool names of a `tools/list` result.
pub fn tool_names(result: &Value) -> Vec<String> {
    result["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

/// The audit rows of `session` (`GET /v1/sessions/{id}/calls`).
pub async fn audit_rows(toold: &Toold, session: &str) -> Vec<Value> {
    let reply = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["calls"].as_array().unwrap().clone()
}
