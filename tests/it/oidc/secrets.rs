//! A caller's access token is never passed on and never recorded (DESIGN §13; the MCP spec
//! forbids token passthrough): a command hook and an HTTP hook see the call but not the
//! token (neither on stdin, in the environment, nor in a header); and after calls over HTTP
//! and MCP, nothing the daemon wrote (its log at `debug`, every file of its data directory:
//! the store's sessions, events, audit rows, results) holds the token or its signature. The
//! principal is recorded.

use std::path::Path;
use std::sync::{Arc, Mutex};

use reqwest::StatusCode;
use serde_json::json;

use super::{principal_of, setup};
use crate::auth::{bash, post, session_of};
use crate::mcp::McpClient;

/// Every file under `dir`, read whole (binary too).
fn every_file(dir: &Path, out: &mut Vec<(String, Vec<u8>)>) {
    let Ok(entries) = std::fs::read_dir(dir) else {
        return;
    };
    for entry in entries.flatten() {
        let path = entry.path();
        if path.is_dir() {
            every_file(&path, out);
        } else if let Ok(bytes) = std::fs::read(&path) {
            out.push((path.display().to_string(), bytes));
        }
    }
}

fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|window| window == needle.as_bytes())
}

/// A loopback HTTP hook recording every request's headers and body; answers "allow".
async fn recording_hook() -> (String, Arc<Mutex<Vec<String>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let kept = seen.clone();
    let app = axum::Router::new().route(
        "/hook",
        axum::routing::post(move |headers: axum::http::HeaderMap, body: String| {
            let kept = kept.clone();
            async move {
                kept.lock().unwrap().push(format!("{headers:?}\n{body}"));
                axum::Json(json!({}))
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    (url, seen)
}

#[tokio::test]
async fn the_token_reaches_no_hook_and_is_recorded_nowhere() {
    let (hook_url, http_seen) = recording_hook().await;
    let dump = tempfile::tempdir().unwrap();
    let dump_file = dump.path().join("hook.txt");
    let settings = format!(
        "[server]\nlog = \"debug\"\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"bash\"\ncommand = \"(env; cat) >> {}\"\n\n\
         [[hooks.post_tool_use]]\nmatcher = \"bash\"\nurl = \"{hook_url}\"\n",
        dump_file.display()
    );
    let Some(setup) = setup(&settings) else {
        return;
    };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let token = provider.token("agent-a", "toold.execute").await;
    let signature = token.rsplit('.').next().unwrap().to_owned();

    let session = session_of(toold, &token, json!({})).await;
    let reply = post(
        toold,
        &token,
        &format!("/v1/sessions/{session}/batches"),
        bash("echo over-http"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let mut mcp = McpClient::new(toold, "/mcp").token(&token);
    mcp.initialize().await;
    let called = mcp
        .call_tool("bash", json!({"command": "echo over-mcp"}))
        .await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    // A refused presentation is not logged either.
    let refused = post(toold, &format!("{token}x"), "/v1/sessions", json!({})).await;
    assert_eq!(refused.status, StatusCode::UNAUTHORIZED);

    // The hooks ran (so they had their chance to see it) and saw no token.
    let dumped = std::fs::read_to_string(&dump_file).expect("the command hook ran");
    assert!(
        dumped.contains("over-http") && dumped.contains("over-mcp"),
        "{dumped}"
    );
    let http_seen = http_seen.lock().unwrap().join("\n");
    assert!(
        http_seen.contains("over-http"),
        "the HTTP hook ran: {http_seen}"
    );
    for (what, text) in [("the command hook", &dumped), ("the HTTP hook", &http_seen)] {
        assert!(!text.contains(&signature), "{what} saw the token");
        assert!(
            !text.to_lowercase().contains("bearer"),
            "{what} saw an authorization"
        );
    }

    // Nothing the daemon wrote holds it; the principal is what was recorded.
    let log = std::fs::read(&setup.log).unwrap();
    assert!(!contains(&log, &signature), "the log holds the token");
    let mut files = Vec::new();
    every_file(&toold.dir.path().join("data"), &mut files);
    assert!(!files.is_empty());
    let principal = principal_of(provider, "agent-a");
    let mut principal_recorded = false;
    for (path, bytes) in &files {
        assert!(!contains(bytes, &signature), "{path} holds the token");
        principal_recorded |= contains(bytes, &principal);
    }
    assert!(
        principal_recorded,
        "no file of the data directory names {principal}"
    );
}
