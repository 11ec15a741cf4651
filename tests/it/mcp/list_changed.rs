//! `notifications/tools/list_changed` when a session's pool changes: the MCP door mounted
//! in-process over a service whose registry has a deferred tool (the daemon's built-ins have
//! none), which `tool_search` loads. A legacy client hears it on its GET stream, a stateless
//! one on its `subscriptions/listen` stream; either then lists the loaded tool.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};
use toold::api::mcp::{McpDoorSettings, routes};

use super::{LEGACY, STATELESS, tool_names};
use crate::service::harness::Daemon;
use crate::support::DeferredEcho;

/// The door over `daemon`'s service on a loopback port; its base URL.
async fn serve_door(daemon: &Daemon) -> String {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let mut settings = McpDoorSettings {
        body_limit_bytes: 1 << 20,
        ..McpDoorSettings::default()
    };
    settings.admit_listener(address);
    let router = routes(daemon.service.clone(), &settings);
    tokio::spawn(async move { axum::serve(listener, router).await });
    format!("http://{address}/mcp")
}

/// A JSON-RPC POST; the answer's messages (one JSON body, or each SSE event).
async fn post(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    body: Value,
) -> (StatusCode, reqwest::header::HeaderMap, Vec<Value>) {
    let mut request = client
        .post(url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .body(body.to_string());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let response = request.send().await.unwrap();
    let status = response.status();
    let headers = response.headers().clone();
    let text = response.text().await.unwrap();
    let messages = match serde_json::from_str::<Value>(&text) {
        Ok(value) => vec![value],
        Err(_) => sse_messages(&text),
    };
    (status, headers, messages)
}

fn sse_messages(text: &str) -> Vec<Value> {
    text.lines()
        .filter_map(|line| line.strip_prefix("data:"))
        .filter_map(|data| serde_json::from_str::<Value>(data.trim()).ok())
        .collect()
}

/// Reads an open SSE answer until a message with `method` arrives (or 10 s pass).
async fn wait_for(response: &mut reqwest::Response, method: &str) -> Value {
    let mut text = String::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        if let Some(found) = sse_messages(&text)
            .into_iter()
            .find(|message| message["method"] == method)
        {
            return found;
        }
        let chunk = tokio::time::timeout_at(deadline, response.chunk())
            .await
            .unwrap_or_else(|_| panic!("no {method} within 10 s; the stream held: {text}"))
            .unwrap()
            .unwrap_or_else(|| panic!("the stream ended without {method}: {text}"));
        text.push_str(&String::from_utf8_lossy(&chunk));
    }
}

/// The tool names a `tools/list` request answers with.
async fn listed(
    client: &reqwest::Client,
    url: &str,
    headers: &[(&str, &str)],
    list: Value,
) -> Vec<String> {
    let (_, _, messages) = post(client, url, headers, list).await;
    tool_names(result(&messages))
}

fn request(id: u64, method: &str, params: Value) -> Value {
    json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params})
}

fn result(messages: &[Value]) -> &Value {
    let answer = messages
        .iter()
        .find(|message| message.get("id").is_some())
        .unwrap_or_else(|| panic!("no response among {messages:?}"));
    assert!(answer.get("result").is_some(), "{answer}");
    &answer["result"]
}

#[tokio::test]
async fn a_legacy_client_hears_on_its_get_stream_that_a_loaded_tool_joined_the_list() {
    let daemon =
        Daemon::start_with_tools(vec![DeferredEcho::tool("echo_later", "Echoes, later.")]).await;
    let url = serve_door(&daemon).await;
    let client = reqwest::Client::new();

    let (status, headers, messages) = post(
        &client,
        &url,
        &[],
        request(
            1,
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "toold-tests", "version": "1"}}),
        ),
    )
    .await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(
        result(&messages)["capabilities"]["tools"]["listChanged"],
        true
    );
    let session = headers["mcp-session-id"].to_str().unwrap().to_owned();
    let in_session = [
        ("mcp-session-id", session.as_str()),
        ("mcp-protocol-version", LEGACY),
    ];
    let (status, _, _) = post(
        &client,
        &url,
        &in_session,
        json!({"jsonrpc": "2.0", "method": "notifications/initialized"}),
    )
    .await;
    assert_eq!(status, StatusCode::ACCEPTED);
    let mut stream = client
        .get(&url)
        .header("accept", "text/event-stream")
        .header("mcp-session-id", &session)
        .header("mcp-protocol-version", LEGACY)
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);

    let names = listed(
        &client,
        &url,
        &in_session,
        request(2, "tools/list", json!({})),
    )
    .await;
    assert!(!names.contains(&"echo_later".to_owned()), "{names:?}");
    let (_, _, loaded) = post(
        &client,
        &url,
        &in_session,
        request(
            3,
            "tools/call",
            json!({"name": "tool_search", "arguments": {"query": "select:echo_later"}}),
        ),
    )
    .await;
    assert_eq!(result(&loaded)["isError"], false, "{loaded:?}");

    wait_for(&mut stream, "notifications/tools/list_changed").await;
    let names = listed(
        &client,
        &url,
        &in_session,
        request(4, "tools/list", json!({})),
    )
    .await;
    assert!(names.contains(&"echo_later".to_owned()), "{names:?}");
}

#[tokio::test]
async fn a_stateless_client_hears_it_on_its_subscriptions_listen_stream() {
    let daemon = Daemon::start_with_tools(vec![
        DeferredEcho::tool("echo_later", "Echoes, later."),
        DeferredEcho::tool("echo_much_later", "Echoes, much later."),
    ])
    .await;
    let url = serve_door(&daemon).await;
    let client = reqwest::Client::new();
    let meta = json!({
        "io.modelcontextprotocol/protocolVersion": STATELESS,
        "io.modelcontextprotocol/clientCapabilities": {},
        "io.modelcontextprotocol/clientInfo": {"name": "toold-tests", "version": "1"},
    });
    let headers = |method: &'static str, name: Option<&'static str>| {
        let mut headers = vec![("mcp-protocol-version", STATELESS), ("mcp-method", method)];
        if let Some(name) = name {
            headers.push(("mcp-name", name));
        }
        headers
    };

    let listen = request(
        1,
        "subscriptions/listen",
        json!({"_meta": meta, "notifications": {"toolsListChanged": true, "promptsListChanged": true}}),
    );
    let mut stream = client
        .post(&url)
        .header("content-type", "application/json")
        .header("accept", "application/json, text/event-stream")
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", "subscriptions/listen")
        .body(listen.to_string())
        .send()
        .await
        .unwrap();
    assert_eq!(stream.status(), StatusCode::OK);
    let acknowledged = wait_for(&mut stream, "notifications/subscriptions/acknowledged").await;
    // Only what the door can announce is accepted.
    assert_eq!(
        acknowledged["params"]["notifications"],
        json!({"toolsListChanged": true}),
        "{acknowledged}"
    );

    let (_, _, loaded) = post(
        &client,
        &url,
        &headers("tools/call", Some("tool_search")),
        request(
            2,
            "tools/call",
            json!({"_meta": meta, "name": "tool_search",
                   "arguments": {"query": "select:echo_much_later"}}),
        ),
    )
    .await;
    assert_eq!(result(&loaded)["isError"], false, "{loaded:?}");
    wait_for(&mut stream, "notifications/tools/list_changed").await;

    let names = listed(
        &client,
        &url,
        &headers("tools/list", None),
        request(3, "tools/list", json!({"_meta": meta})),
    )
    .await;
    assert!(names.contains(&"echo_much_later".to_owned()), "{names:?}");
    assert!(!names.contains(&"echo_later".to_owned()), "{names:?}");
}
