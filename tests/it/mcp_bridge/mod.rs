//! The MCP bridge (issue 18) against real MCP servers from npm, installed by `.ci/run`:
//! `@modelcontextprotocol/server-filesystem` over stdio and `@modelcontextprotocol/server-everything`
//! over stdio and over Streamable HTTP (`support::mcp_servers`), mounted in the real daemon
//! (`http::harness::Toold`) with `[[mcp_servers]]` settings, and driven only over HTTP/JSON
//! and `/proc`: the tools' names in every definition format, calls through the pipeline
//! (rules, hooks, audit, events, offload, progress, timeouts), a killed server restarted, no
//! process left behind, toold's own MCP door mounted in another toold, and bad settings
//! refused at start-up. Without the servers installed, each test is skipped (locally) or
//! fails (in CI).
//!
//! Every server here is mounted with `defer = false` unless the test is about deferral, so
//! its tools are offered (and callable) from the session's first batch.

mod calls;
mod config;
mod contained;
mod door;
mod grpc;
mod names;
pub mod observed;
mod offloads;
mod processes;
mod restart;
mod safety;
mod support_check;
mod timing;

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::http::harness::Toold;
use crate::support::mcp_servers::{McpServers, ServerEntry, settings};

/// The servers, or `None` (the test is skipped) when they are not installed.
pub fn servers(what: &str) -> Option<McpServers> {
    McpServers::locate(what)
}

/// The daemon with `head` (other settings) and these `[[mcp_servers]]`.
pub fn start(head: &str, entries: &[ServerEntry]) -> Toold {
    Toold::start_with_config(&settings(head, entries))
}

/// `entry` offered at once (not deferred).
pub fn eager(entry: ServerEntry) -> ServerEntry {
    entry.set("defer", false)
}

/// A session naming the session-scoped `servers` it wants; its id.
pub async fn session(toold: &Toold, servers: &[&str]) -> String {
    let reply = toold
        .post("/v1/sessions", &json!({"mcp_servers": servers}))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// One call in a batch of its own; its result (`results[0]`).
pub async fn call(toold: &Toold, session: &str, name: &str, input: Value) -> Value {
    toold.call_one(session, name, input).await
}

/// The result's output, failing the test if the call failed.
pub fn ok_output(result: &Value) -> &str {
    assert_eq!(result["is_error"], false, "{result}");
    result["output"].as_str().unwrap()
}

/// `GET /v1/mcp/servers`' entries.
pub async fn listing(toold: &Toold) -> Vec<Value> {
    let reply = toold.get("/v1/mcp/servers").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["servers"]
        .as_array()
        .unwrap_or_else(|| panic!("no servers array: {}", reply.body))
        .clone()
}

/// The listing's entry for server `name` (of `session`, for a session-scoped one), once
/// `ready` holds for it; fails after `within` with the listing.
pub async fn wait_for(
    toold: &Toold,
    name: &str,
    session: Option<&str>,
    within: Duration,
    ready: impl Fn(&Value) -> bool,
) -> Value {
    let deadline = Instant::now() + within;
    loop {
        let servers = listing(toold).await;
        let found = servers.iter().find(|server| {
            server["name"] == name && session.is_none_or(|session| server["session_id"] == session)
        });
        if let Some(server) = found.filter(|server| ready(server)) {
            return server.clone();
        }
        assert!(
            Instant::now() < deadline,
            "server {name} ({session:?}) not as expected after {within:?}: {servers:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// The pid of server `name`'s process once it is ready.
pub async fn ready_pid(toold: &Toold, name: &str, session: Option<&str>) -> u32 {
    let server = wait_for(toold, name, session, Duration::from_secs(20), |server| {
        server["state"] == "ready"
    })
    .await;
    server["pid"]
        .as_u64()
        .unwrap_or_else(|| panic!("a ready stdio server has a pid: {server}")) as u32
}

/// The names of a session's tools in `format`.
pub async fn tool_names(toold: &Toold, session: &str, format: &str) -> Vec<String> {
    let reply = toold
        .get(&format!("/v1/sessions/{session}/tools?format={format}"))
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{format}: {}", reply.body);
    reply.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| {
            let name = match format {
                "openai_chat" => &tool["function"]["name"],
                _ => &tool["name"],
            };
            name.as_str()
                .unwrap_or_else(|| panic!("{format}: a tool without a name: {tool}"))
                .to_owned()
        })
        .collect()
}

/// The session's audit rows.
pub async fn audit_rows(toold: &Toold, session: &str) -> Vec<Value> {
    crate::mcp::audit_rows(toold, session).await
}

/// Writes `content` to `name` in the session's workspace; its absolute path.
pub async fn workspace_file(toold: &Toold, session: &str, name: &str, content: &str) -> String {
    let path = toold.workspace(session).await.join(name);
    std::fs::write(&path, content).unwrap();
    path.display().to_string()
}
