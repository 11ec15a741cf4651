//! HTTP hooks against a server on 127.0.0.1 that the test serves.

use std::sync::{Arc, Mutex};

use serde_json::{Value, json};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use toold::hooks::{HookConfig, OnFailure};
use toold::tool::ErrorKind;

use crate::hooks::harness::{Hooked, pre};

/// Serves one canned HTTP answer to every request on 127.0.0.1, recording request bodies.
async fn serve(status: u16, body: Value) -> (String, Arc<Mutex<Vec<Value>>>) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let record = seen.clone();
    tokio::spawn(async move {
        loop {
            let Ok((mut socket, _)) = listener.accept().await else {
                return;
            };
            let mut request = Vec::new();
            let mut chunk = [0_u8; 4096];
            // Read the head, then the body by Content-Length.
            let (head_end, length) = loop {
                let read = socket.read(&mut chunk).await.unwrap();
                assert!(read > 0, "the request ended early");
                request.extend_from_slice(&chunk[..read]);
                if let Some(end) = request.windows(4).position(|w| w == b"\r\n\r\n") {
                    let head = String::from_utf8_lossy(&request[..end]).to_lowercase();
                    let length = head
                        .lines()
                        .find_map(|l| l.strip_prefix("content-length:"))
                        .map_or(0, |v| v.trim().parse::<usize>().unwrap());
                    break (end + 4, length);
                }
            };
            while request.len() < head_end + length {
                let read = socket.read(&mut chunk).await.unwrap();
                request.extend_from_slice(&chunk[..read]);
            }
            record
                .lock()
                .unwrap()
                .push(serde_json::from_slice(&request[head_end..]).unwrap());
            let text = body.to_string();
            let answer = format!(
                "HTTP/1.1 {status} X\r\ncontent-type: application/json\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{text}",
                text.len()
            );
            socket.write_all(answer.as_bytes()).await.unwrap();
        }
    });
    (url, seen)
}

fn http_hook(url: &str) -> HookConfig {
    HookConfig {
        matcher: "*".into(),
        command: None,
        url: Some(url.to_owned()),
        timeout_ms: 20_000,
        on_failure: OnFailure::Allow,
    }
}

#[tokio::test]
async fn an_http_hook_on_loopback_gets_the_event_and_its_deny_blocks() {
    let (url, seen) = serve(
        200,
        json!({"hookSpecificOutput": {"permissionDecision": "deny", "permissionDecisionReason": "the server said no"}}),
    )
    .await;
    let hooked = Hooked::new(pre(vec![http_hook(&url)]));
    let result = hooked.bash("touch ran").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(
        result.output.contains("the server said no"),
        "{}",
        result.output
    );
    assert!(!hooked.path("ran").exists());
    let events = seen.lock().unwrap().clone();
    assert_eq!(events.len(), 1);
    assert_eq!(events[0]["hook_event_name"], "PreToolUse");
    assert_eq!(events[0]["tool_name"], "bash");
    assert_eq!(events[0]["tool_input"], json!({"command": "touch ran"}));
    assert_eq!(events[0]["session_id"], "sess_hooks");
    assert_eq!(events[0]["permission_mode"], "danger_full_access");
}

#[tokio::test]
async fn an_http_hook_can_update_the_input_and_an_error_status_is_a_failure() {
    let (url, _) = serve(
        200,
        json!({"hookSpecificOutput": {"updatedInput": {"command": "echo from-http"}}}),
    )
    .await;
    let hooked = Hooked::new(pre(vec![http_hook(&url)]));
    let result = hooked.bash("echo original").await;
    assert_eq!(result.output, "from-http\n");

    let (url, _) = serve(500, json!({})).await;
    let mut failing = http_hook(&url);
    failing.on_failure = OnFailure::Block;
    let hooked = Hooked::new(pre(vec![failing]));
    let result = hooked.bash("true").await;
    assert_eq!(result.error_kind, Some(ErrorKind::HookBlocked));
    assert!(result.output.contains("HTTP 500"), "{}", result.output);
}
