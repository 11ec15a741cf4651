//! Cancelling an MCP request interrupts that call only: a slow `bash` cancelled by the
//! client (`notifications/cancelled` in the 2025 era, the request's connection closed in
//! 2026-07-28) ends promptly, its audit row is `cancelled` by `mcp_client`, and the next call
//! in the same session runs.

use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{LEGACY, McpClient, audit_rows};
use crate::http::harness::Toold;

const SLOW: &str = "sleep 30";

async fn session(toold: &Toold) -> String {
    let reply = toold.post("/v1/sessions", &json!({})).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// Returns once the session's events show the slow `bash` call started (`tool:pre`).
async fn started(toold: &Toold, session: &str) {
    started_command(toold, session, SLOW).await;
}

/// The audit row of the slow call, once there is one (15 s guard).
async fn slow_row(toold: &Toold, session: &str) -> Value {
    row_of(toold, session, SLOW).await
}

/// The audit row of the `bash` call of `command`, once there is one (15 s guard).
async fn row_of(toold: &Toold, session: &str, command: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(15);
    loop {
        let rows = audit_rows(toold, session).await;
        if let Some(row) = rows.iter().find(|row| row["input"]["command"] == command) {
            return row.clone();
        }
        assert!(Instant::now() < deadline, "no audit row: {rows:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// A legacy client's `notifications/cancelled` for its request `request_id`, accepted.
async fn send_cancelled(client: &McpClient<'_>, request_id: u64) {
    let cancelled = json!({"jsonrpc": "2.0", "method": "notifications/cancelled",
                           "params": {"requestId": request_id, "reason": "the user gave up"}});
    let ack = client
        .post_raw(
            &[("mcp-protocol-version", LEGACY)],
            cancelled.to_string().into_bytes(),
        )
        .await;
    assert_eq!(ack.status, StatusCode::ACCEPTED, "{}", ack.text);
}

fn assert_cancelled_by_the_client(row: &Value) {
    assert_eq!(row["error_kind"], "cancelled", "{row}");
    assert_eq!(row["cancelled_by"], "mcp_client", "{row}");
    assert!(row["duration_ms"].as_f64().unwrap() < 15_000.0, "{row}");
}

#[tokio::test]
async fn a_legacy_client_cancels_its_slow_call_and_the_session_runs_on() {
    let toold = Toold::start();
    let id = session(&toold).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut client = McpClient::new(&toold, &path);
    client.initialize().await;
    // The same MCP session, for the notification sent while the call's request is open.
    let notifier = client.on_path(&path);

    // `initialize` was request 1: the call is request 2.
    let call = client.call_tool("bash", json!({"command": SLOW}));
    let cancel = async {
        started(&toold, &id).await;
        send_cancelled(&notifier, 2).await;
        Instant::now()
    };
    let (reply, cancelled_at) = tokio::time::timeout(Duration::from_secs(20), async {
        tokio::join!(call, cancel)
    })
    .await
    .expect("the cancelled call ends long before its sleep would");
    assert!(cancelled_at.elapsed() < Duration::from_secs(10));
    // The request's stream ends without a response, as the revision asks of a cancelled
    // request (rmcp drops the handler's late answer).
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert!(
        reply.messages.iter().all(|m| m["id"] != 2),
        "{}",
        reply.text
    );

    assert_cancelled_by_the_client(&slow_row(&toold, &id).await);
    let next = client
        .call_tool("bash", json!({"command": "echo still here"}))
        .await;
    assert_eq!(next.result()["isError"], false, "{}", next.text);
    assert!(next.text_content().contains("still here"), "{}", next.text);
}

#[tokio::test]
async fn a_2026_client_closing_its_request_cancels_the_call_and_the_session_runs_on() {
    let toold = Toold::start();
    let id = session(&toold).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut client = McpClient::new(&toold, &path);

    let call = client.call_tool("bash", json!({"command": SLOW}));
    // Dropping the request's future closes its connection.
    tokio::select! {
        reply = call => panic!("the slow call answered: {}", reply.text),
        () = started(&toold, &id) => {}
    }
    let closed_at = Instant::now();
    let row = slow_row(&toold, &id).await;
    assert!(closed_at.elapsed() < Duration::from_secs(10));
    assert_cancelled_by_the_client(&row);

    let next = client
        .call_tool("bash", json!({"command": "echo still here"}))
        .await;
    assert_eq!(next.result()["isError"], false, "{}", next.text);
    assert!(next.text_content().contains("still here"), "{}", next.text);
}

/// Returns once the session's events show a `bash` call of `command` started.
async fn started_command(toold: &Toold, session: &str, command: &str) {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(30), events.next())
            .await
            .expect("the call starts")
            .expect("the event stream stays open");
        if frame.event == "tool:pre" && frame.data["data"]["input"]["command"] == command {
            return;
        }
    }
}

#[tokio::test]
async fn a_call_cancelled_while_it_waits_for_its_turn_never_runs() {
    const FIRST: &str = "sleep 5";
    const QUEUED: &str = "echo ran anyway > queued.txt";
    let toold = Toold::start();
    let id = session(&toold).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut client = McpClient::new(&toold, &path);
    client.initialize().await;
    let other = client.on_path(&path);
    let notifier = client.on_path(&path);

    // `initialize` was request 1, the first call is 2; the queued one is sent as 3.
    let first = client.call_tool("bash", json!({"command": FIRST}));
    let queued = async {
        started_command(&toold, &id, FIRST).await;
        let body = json!({"jsonrpc": "2.0", "id": 3, "method": "tools/call",
                          "params": {"name": "bash", "arguments": {"command": QUEUED}}});
        other
            .post_raw(
                &[("mcp-protocol-version", LEGACY)],
                body.to_string().into_bytes(),
            )
            .await
    };
    let cancel = async {
        started_command(&toold, &id, FIRST).await;
        // The queued request goes out as the first call starts; the session publishes nothing
        // for a batch until its turn comes, so it is given time to reach the daemon (the
        // first call runs on for seconds after).
        tokio::time::sleep(Duration::from_millis(1500)).await;
        send_cancelled(&notifier, 3).await;
    };
    let (first, queued, ()) = tokio::time::timeout(Duration::from_secs(30), async {
        tokio::join!(first, queued, cancel)
    })
    .await
    .expect("both calls end");
    assert_eq!(first.result()["isError"], false, "{}", first.text);
    assert!(
        queued.messages.iter().all(|m| m["id"] != 3),
        "{}",
        queued.text
    );

    let row = row_of(&toold, &id, QUEUED).await;
    assert_eq!(row["error_kind"], "cancelled", "{row}");
    assert_eq!(row["cancelled_by"], "mcp_client", "{row}");
    let workspace = toold.workspace(&id).await;
    assert!(
        !workspace.join("queued.txt").exists(),
        "the cancelled call ran"
    );
}
