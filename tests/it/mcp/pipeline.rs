//! An MCP `tools/call` goes through the same pipeline as a batch over HTTP: on
//! `/v1/sessions/{id}/mcp`, in both eras, a rule denies it, a pre-tool-use command hook blocks
//! it, and an `ask` rule holds it until a person allows it over HTTP (`GET …/approvals`,
//! `POST …/approvals/{approval_id}`). Each call is then in `GET /v1/sessions/{id}/calls` with
//! who decided, and on the session's event stream (`Last-Event-ID: 0`).

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{McpClient, McpReply, audit_rows};
use crate::http::approvals::pending;
use crate::http::harness::Toold;

/// `echo` asks, `rm` is denied, and a hook blocks any `write_file` whose input says "secret".
pub(super) fn start() -> (Toold, tempfile::TempDir) {
    start_with(&[])
}

/// [`start`] with `extra` flags.
pub(super) fn start_with(extra: &[&str]) -> (Toold, tempfile::TempDir) {
    let scripts = tempfile::tempdir().unwrap();
    let hook = scripts.path().join("no-secrets.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$(cat)\" in *secret*) echo 'secrets stay out' >&2; exit 2;; esac\n",
    )
    .unwrap();
    let toml = format!(
        "[permissions]\nask = [\"bash(echo:*)\"]\ndeny = [\"bash(rm:*)\"]\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"write_file\"\ncommand = \"sh {}\"\n",
        hook.display()
    );
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, toml).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let mut flags = vec!["--config", &file];
    flags.extend_from_slice(extra);
    (Toold::start_with(dir, &flags), scripts)
}

pub(super) async fn session(toold: &Toold, body: Value) -> String {
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// A failed call's toold error kind, from the result's `_meta`.
pub(super) fn error_kind(reply: &McpReply) -> &str {
    assert_eq!(reply.result()["isError"], true, "{}", reply.text);
    reply.result()["_meta"]["dev.toold/errorKind"]
        .as_str()
        .unwrap_or_else(|| panic!("no error kind: {}", reply.text))
}

/// Whether `call_id` is an MCP call id for JSON-RPC id `id`: `mcp-{12 hex digits}-{id}`.
fn is_mcp_call_id(call_id: &str, id: u64) -> bool {
    let Some(rest) = call_id.strip_prefix("mcp-") else {
        return false;
    };
    let Some((prefix, json_rpc_id)) = rest.split_once('-') else {
        return false;
    };
    prefix.len() == 12
        && prefix.chars().all(|c| c.is_ascii_hexdigit())
        && json_rpc_id == id.to_string()
}

/// The audit row of the call with this JSON-RPC id and input.
pub(super) fn row<'r>(rows: &'r [Value], id: u64, input: &Value) -> &'r Value {
    rows.iter()
        .find(|row| is_mcp_call_id(row["call_id"].as_str().unwrap(), id) && &row["input"] == input)
        .unwrap_or_else(|| panic!("no audit row for {id} {input}: {rows:?}"))
}

/// Every audit row's call id differs, though JSON-RPC ids repeat across MCP clients.
pub(super) fn assert_unique_call_ids(rows: &[Value]) {
    let ids: std::collections::HashSet<&str> = rows
        .iter()
        .map(|row| row["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(ids.len(), rows.len(), "{rows:?}");
}

#[tokio::test]
async fn rules_hooks_and_approvals_decide_mcp_calls_and_the_audit_says_who() {
    let (toold, _scripts) = start();
    let id = session(&toold, json!({"interactive": true})).await;
    let path = format!("/v1/sessions/{id}/mcp");

    // The legacy era: a rule denies.
    let mut legacy = McpClient::new(&toold, &path);
    legacy.initialize().await;
    let rm = json!({"command": "rm -f x"});
    let denied = legacy.call_tool("bash", rm.clone()).await;
    assert_eq!(error_kind(&denied), "permission_denied");
    assert!(
        denied.text_content().contains("bash(rm:*)"),
        "{}",
        denied.text
    );

    // The 2026 era: a hook blocks, its reason in the content.
    let mut stateless = McpClient::new(&toold, &path);
    let secret = json!({"file_path": "a.txt", "content": "my secret"});
    let blocked = stateless.call_tool("write_file", secret.clone()).await;
    assert_eq!(error_kind(&blocked), "hook_blocked");
    assert!(
        blocked.text_content().contains("secrets stay out"),
        "{}",
        blocked.text
    );
    assert!(!toold.workspace(&id).await.join("a.txt").exists());

    // An ask rule holds the call until a person allows it over HTTP.
    let echo = json!({"command": "echo approved"});
    let call = stateless.call_tool("bash", echo.clone());
    let approve = async {
        let approval = pending(&toold, &id).await;
        assert_eq!(approval["tool"], "bash", "{approval}");
        assert_eq!(approval["input"], echo);
        let approval_id = approval["id"].as_str().unwrap().to_owned();
        let reply = toold
            .post(
                &format!("/v1/sessions/{id}/approvals/{approval_id}"),
                &json!({"decision": "allow"}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        approval_id
    };
    let (asked, approval_id) = tokio::join!(call, approve);
    assert_eq!(asked.result()["isError"], false, "{}", asked.text);
    assert!(asked.text_content().contains("approved"), "{}", asked.text);

    let rows = audit_rows(&toold, &id).await;
    assert_unique_call_ids(&rows);
    let denied_row = row(&rows, 2, &rm);
    assert_eq!(denied_row["decision"]["decision"], "deny", "{denied_row}");
    assert_eq!(denied_row["decision"]["decided_by"]["by"], "rule");
    assert_eq!(denied_row["decision"]["decided_by"]["rule"], "bash(rm:*)");
    let blocked_row = row(&rows, 1, &secret);
    assert_eq!(blocked_row["error_kind"], "hook_blocked", "{blocked_row}");
    // Decided by the hook (named by its command), not allowed by the mode it passed first.
    assert_eq!(blocked_row["decision"]["decision"], "deny", "{blocked_row}");
    assert_eq!(blocked_row["decision"]["decided_by"]["by"], "hook");
    let hook_name = blocked_row["decision"]["decided_by"]["hook"]
        .as_str()
        .unwrap();
    assert!(hook_name.contains("no-secrets.sh"), "{blocked_row}");
    let asked_row = row(&rows, 2, &echo);
    let decided_by = &asked_row["decision"]["decided_by"];
    assert_eq!(asked_row["decision"]["decision"], "allow", "{asked_row}");
    assert_eq!(decided_by["by"], "approver");
    assert_eq!(decided_by["approver"], "http");
    assert_eq!(decided_by["approval_id"], approval_id.as_str());
    assert_eq!(decided_by["asked_by"]["rule"], "bash(echo:*)");

    // The event stream replays each call's batch: queued, its decision, and the ask.
    let mut stream = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, Some(0))
        .await;
    let mut batches: std::collections::BTreeMap<String, Vec<String>> = Default::default();
    let enough = |batches: &std::collections::BTreeMap<String, Vec<String>>| {
        let decided = batches
            .values()
            .filter(|events| events.iter().any(|e| e == "permission:decision"))
            .count();
        decided >= 3
            && batches.len() >= 3
            && batches.values().flatten().any(|e| e == "permission:ask")
            && batches.values().flatten().any(|e| e == "tool:post")
    };
    while !enough(&batches) {
        let frame = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap_or_else(|_| panic!("events so far: {batches:?}"))
            .expect("the event stream stays open");
        if let Some(batch) = frame.data["batch_id"].as_str() {
            batches
                .entry(batch.to_owned())
                .or_default()
                .push(frame.event);
        }
    }
    // Each call's batch has its decision: the rule's deny, the hook's block, the approver's
    // allow (the mode's allow before the hook is not an event).
    for audited in [denied_row, blocked_row, asked_row] {
        let events = &batches[audited["batch_id"].as_str().unwrap()];
        assert!(events.iter().any(|e| e == "tool:queued"), "{events:?}");
        assert!(events.iter().any(|e| e == "tool:pre"), "{events:?}");
        assert!(
            events.iter().any(|e| e == "permission:decision"),
            "{events:?}"
        );
    }
    let blocked_events = &batches[blocked_row["batch_id"].as_str().unwrap()];
    assert!(
        blocked_events.iter().any(|e| e == "tool:error"),
        "{blocked_events:?}"
    );
    let asked_events = &batches[asked_row["batch_id"].as_str().unwrap()];
    assert!(
        asked_events.iter().any(|e| e == "permission:ask"),
        "{asked_events:?}"
    );
    assert!(
        asked_events.iter().any(|e| e == "tool:pre"),
        "{asked_events:?}"
    );
    assert!(
        asked_events.iter().any(|e| e == "tool:post"),
        "{asked_events:?}"
    );
}

/// Reads a request's SSE answer message by message, as a client does while it is open.
struct Messages {
    body: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<Vec<u8>>> + Send>>,
    buffer: String,
}

impl Messages {
    fn new(response: reqwest::Response) -> Messages {
        use futures::StreamExt;
        Messages {
            body: Box::pin(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map(|b| b.to_vec())),
            ),
            buffer: String::new(),
        }
    }

    /// The next JSON-RPC message (30 s guard); `None` once the stream ended.
    async fn next(&mut self) -> Option<Value> {
        use futures::StreamExt;
        // Over the whole wait: frames without a message (pings, comments) do not extend it.
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let event: String = self.buffer.drain(..end + 2).collect();
                let data = event
                    .lines()
                    .filter_map(|line| line.strip_prefix("data:"))
                    .map(str::trim)
                    .collect::<String>();
                if let Ok(message) = serde_json::from_str::<Value>(&data) {
                    return Some(message);
                }
                continue;
            }
            let chunk = tokio::time::timeout_at(deadline, self.body.next())
                .await
                .expect("the answer goes on")?
                .expect("the answer's body reads");
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test]
async fn an_approval_is_answered_by_the_legacy_clients_elicitation() {
    let (toold, _scripts) = start();
    let id = session(&toold, json!({"interactive": true})).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut client = McpClient::new(&toold, &path);
    client
        .initialize_with(json!({"elicitation": {"form": {}}}))
        .await;

    let echo = json!({"command": "echo elicited"});
    let call = client.request("tools/call", json!({"name": "bash", "arguments": echo}));
    let response = client
        .send_raw(
            &[("mcp-protocol-version", super::LEGACY)],
            call.to_string().into_bytes(),
        )
        .await;
    assert_eq!(response.status(), StatusCode::OK);
    let mut answer = Messages::new(response);

    // The call's own stream carries the question before the result.
    let question = answer.next().await.expect("an elicitation/create");
    assert_eq!(question["method"], "elicitation/create", "{question}");
    let params = &question["params"];
    assert_eq!(params["mode"], "form", "{question}");
    let message = params["message"].as_str().unwrap();
    assert!(message.contains("\"bash\""), "{message}");
    assert!(message.contains("echo elicited"), "{message}");
    assert_eq!(
        params["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["allow", "deny"])
    );
    // Meanwhile the approval is pending over HTTP too.
    let approval = pending(&toold, &id).await;
    assert!(
        message.contains(approval["id"].as_str().unwrap()),
        "{message}"
    );

    let reply = json!({"jsonrpc": "2.0", "id": question["id"],
                       "result": {"action": "accept", "content": {"decision": "allow"}}});
    let ack = client
        .post_raw(
            &[("mcp-protocol-version", super::LEGACY)],
            reply.to_string().into_bytes(),
        )
        .await;
    assert_eq!(ack.status, StatusCode::ACCEPTED, "{}", ack.text);
    let result = loop {
        let message = answer.next().await.expect("the call's result");
        if message["id"] == call["id"] {
            break message;
        }
    };
    assert_eq!(result["result"]["isError"], false, "{result}");
    let text = result["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("elicited"), "{result}");

    let rows = audit_rows(&toold, &id).await;
    assert_unique_call_ids(&rows);
    let asked = row(&rows, 2, &echo);
    let decided_by = &asked["decision"]["decided_by"];
    assert_eq!(asked["decision"]["decision"], "allow", "{asked}");
    assert_eq!(decided_by["by"], "approver", "{asked}");
    assert_eq!(decided_by["approver"], "mcp", "{asked}");
    assert_eq!(decided_by["approval_id"], approval["id"], "{asked}");
    assert_eq!(decided_by["asked_by"]["rule"], "bash(echo:*)", "{asked}");
    assert!(
        toold
            .get(&format!("/v1/sessions/{id}/approvals"))
            .await
            .body["approvals"]
            .as_array()
            .unwrap()
            .is_empty()
    );

    // On the event stream: the ask, the approver's decision, the call's end.
    let batch = asked["batch_id"].as_str().unwrap();
    let mut stream = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, Some(0))
        .await;
    let mut events = Vec::new();
    while !events.iter().any(|e| e == "tool:post") {
        let frame = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap_or_else(|_| panic!("events so far: {events:?}"))
            .expect("the event stream stays open");
        if frame.data["batch_id"] == batch {
            if frame.event == "permission:decision" {
                assert_eq!(
                    frame.data["data"]["decided_by"]["approver"], "mcp",
                    "{:?}",
                    frame.data
                );
            }
            events.push(frame.event);
        }
    }
    for expected in [
        "tool:queued",
        "permission:ask",
        "permission:decision",
        "tool:pre",
    ] {
        assert!(
            events.iter().any(|e| e == expected),
            "{expected}: {events:?}"
        );
    }
}
