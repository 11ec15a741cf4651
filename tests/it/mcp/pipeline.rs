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
use crate::http::harness::Toold;

/// `echo` asks, `rm` is denied, and a hook blocks any `write_file` whose input says "secret".
fn start() -> (Toold, tempfile::TempDir) {
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
    (Toold::start_with(dir, &["--config", &file]), scripts)
}

async fn session(toold: &Toold, body: Value) -> String {
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// A failed call's toold error kind, from the result's `_meta`.
fn error_kind(reply: &McpReply) -> &str {
    assert_eq!(reply.result()["isError"], true, "{}", reply.text);
    reply.result()["_meta"]["dev.toold/errorKind"]
        .as_str()
        .unwrap_or_else(|| panic!("no error kind: {}", reply.text))
}

/// The audit row of the call with this id and input.
fn row<'r>(rows: &'r [Value], call: &str, input: &Value) -> &'r Value {
    rows.iter()
        .find(|row| row["call_id"] == call && &row["input"] == input)
        .unwrap_or_else(|| panic!("no audit row for {call} {input}: {rows:?}"))
}

/// The first pending approval of the session, once there is one (30 s guard).
async fn pending(toold: &Toold, session: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = toold
            .get(&format!("/v1/sessions/{session}/approvals"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        if let Some(first) = reply.body["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
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
    let denied_row = row(&rows, "mcp-2", &rm);
    assert_eq!(denied_row["decision"]["decision"], "deny", "{denied_row}");
    assert_eq!(denied_row["decision"]["decided_by"]["by"], "rule");
    assert_eq!(denied_row["decision"]["decided_by"]["rule"], "bash(rm:*)");
    let blocked_row = row(&rows, "mcp-1", &secret);
    assert_eq!(blocked_row["error_kind"], "hook_blocked", "{blocked_row}");
    let asked_row = row(&rows, "mcp-2", &echo);
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
        decided >= 2
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
    // The hook-blocked call has no `permission:decision` event (the mode allowed it, then the
    // hook refused it): it is queued, pre, then `tool:error`.
    for (audited, decision) in [(denied_row, true), (blocked_row, false), (asked_row, true)] {
        let events = &batches[audited["batch_id"].as_str().unwrap()];
        assert!(events.iter().any(|e| e == "tool:queued"), "{events:?}");
        assert!(events.iter().any(|e| e == "tool:pre"), "{events:?}");
        let decided = events.iter().any(|e| e == "permission:decision");
        assert_eq!(decided, decision, "{events:?}");
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
