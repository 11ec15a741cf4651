//! A model turn's parallel calls, sent the way MCP clients send them (one `tools/call` request
//! each, at once, on one session), follow the seeds' rule across requests (the session's call
//! gate, `session::gate`): concurrency-safe calls run together up to the cap (20 read-only
//! `bash sleep 1` in about two waves of `max_concurrency` 10, not twenty seconds), a read
//! sent while a read-only `bash` runs answers at once, one sent while a writing `bash` runs
//! waits for it and sees what it wrote, a background `bash` starts beside a running one, and
//! a call waiting for a person's approval holds nobody's reads back.
//!
//! The timing bounds are the (36 item 4), kept generous against the sleeps.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use futures::future::join_all;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::pipeline::{self, session};
use super::{LEGACY, McpClient, McpReply};
use crate::http::approvals::pending;
use crate::http::harness::Toold;

/// Every wait in these tests ends by then.
const GUARD: Duration = Duration::from_secs(30);

/// Returns once the session's events show a `bash` call of `command` started (`tool:pre`).
async fn started(toold: &Toold, session: &str, command: &str) {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    loop {
        let frame = tokio::time::timeout(GUARD, events.next())
            .await
            .expect("the call starts")
            .expect("the event stream stays open");
        if frame.event == "tool:pre" && frame.data["data"]["input"]["command"] == command {
            return;
        }
    }
}

fn assert_succeeded(reply: &McpReply) {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.result()["isError"], false, "{}", reply.text);
}

/// Runs `calls` (each a client's one `tools/call`) at once; their replies and how long the
/// slowest took.
async fn all_at_once(
    calls: Vec<impl std::future::Future<Output = McpReply>>,
) -> (Vec<McpReply>, Duration) {
    let began = Instant::now();
    let replies = tokio::time::timeout(GUARD, join_all(calls))
        .await
        .expect("every call answers");
    (replies, began.elapsed())
}

const SLEEP_1: &str = "sleep 1";

#[tokio::test]
async fn twenty_parallel_read_only_bash_calls_on_one_session_run_together_in_both_eras() {
    let toold = Toold::start();
    let id = session(&toold, json!({})).await;
    let path = format!("/v1/sessions/{id}/mcp");

    // The 2026 era: twenty self-contained requests.
    let mut clients: Vec<McpClient> = (0..20).map(|_| McpClient::new(&toold, &path)).collect();
    let calls = clients
        .iter_mut()
        .map(|client| client.call_tool("bash", json!({"command": SLEEP_1})))
        .collect();
    let (replies, took) = all_at_once(calls).await;
    replies.iter().for_each(assert_succeeded);
    println!("20 × `sleep 1`, 2026 era: {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");

    // The 2025 era: twenty requests in one MCP session, each with its own JSON-RPC id.
    let mut legacy = McpClient::new(&toold, &path);
    legacy.initialize().await;
    let calls = (0..20u64).map(|n| {
        let body = json!({"jsonrpc": "2.0", "id": 100 + n, "method": "tools/call",
                          "params": {"name": "bash", "arguments": {"command": SLEEP_1}}});
        let client = legacy.on_path(&path);
        async move {
            client
                .post_raw(
                    &[("mcp-protocol-version", LEGACY)],
                    body.to_string().into_bytes(),
                )
                .await
        }
    });
    let (replies, took) = all_at_once(calls.collect()).await;
    replies.iter().for_each(assert_succeeded);
    println!("20 × `sleep 1`, 2025 era: {took:?}");
    assert!(took < Duration::from_secs(3), "took {took:?}");
}

/// What [`read_during`] saw.
struct ReadDuring {
    bash: McpReply,
    read: McpReply,
    /// From sending the read to its answer.
    took: Duration,
    /// The bash had not answered when the read was sent.
    sent_while_running: bool,
    /// The read answered before the bash did.
    read_first: bool,
}

/// A `bash` of `command` and, sent 0.5 s after it started, `read_file` of `file`.
async fn read_during(toold: &Toold, id: &str, command: &str, file: &str) -> ReadDuring {
    let path = format!("/v1/sessions/{id}/mcp");
    let mut long = McpClient::new(toold, &path);
    let mut reader = McpClient::new(toold, &path);
    let bash_answered = AtomicBool::new(false);
    let bash = async {
        let reply = long.call_tool("bash", json!({"command": command})).await;
        bash_answered.store(true, Ordering::SeqCst);
        (reply, Instant::now())
    };
    let read = async {
        started(toold, id, command).await;
        tokio::time::sleep(Duration::from_millis(500)).await;
        let sent_while_running = !bash_answered.load(Ordering::SeqCst);
        let sent = Instant::now();
        let reply = reader
            .call_tool("read_file", json!({"file_path": file}))
            .await;
        (reply, sent, Instant::now(), sent_while_running)
    };
    let ((bash, bash_done), (read, sent, read_done, sent_while_running)) =
        tokio::time::timeout(GUARD, async { tokio::join!(bash, read) })
            .await
            .expect("both calls answer");
    ReadDuring {
        bash,
        read,
        took: read_done - sent,
        sent_while_running,
        read_first: read_done < bash_done,
    }
}

#[tokio::test]
async fn a_read_sent_during_a_read_only_bash_answers_at_once() {
    let toold = Toold::start();
    let id = session(&toold, json!({})).await;
    std::fs::write(toold.workspace(&id).await.join("notes.txt"), "kept\n").unwrap();

    let seen = read_during(&toold, &id, "sleep 3", "notes.txt").await;
    assert_succeeded(&seen.bash);
    assert_succeeded(&seen.read);
    assert!(
        seen.read.text_content().contains("kept"),
        "{}",
        seen.read.text
    );
    assert!(
        seen.sent_while_running,
        "the bash ended before the read was sent"
    );
    println!("read_file during `sleep 3`: {:?}", seen.took);
    assert!(
        seen.took < Duration::from_millis(500),
        "the read took {:?}",
        seen.took
    );
    assert!(seen.read_first, "the read answered only after the bash");
}

#[tokio::test]
async fn a_read_sent_during_a_writing_bash_waits_for_it_and_sees_its_write() {
    let toold = Toold::start();
    let id = session(&toold, json!({"permission_mode": "danger_full_access"})).await;

    let command = "sleep 3; touch x";
    let seen = read_during(&toold, &id, command, "x").await;
    assert_succeeded(&seen.bash);
    assert!(
        seen.sent_while_running,
        "the bash ended before the read was sent"
    );
    // `x` does not exist until the bash's last step: a read that ran beside the bash would
    // fail, so this one ran after it.
    assert_succeeded(&seen.read);
    println!("read_file during `{command}`: {:?}", seen.took);
}

#[tokio::test]
async fn a_background_bash_starts_beside_a_running_one() {
    let toold = Toold::start();
    let id = session(&toold, json!({"permission_mode": "danger_full_access"})).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut long = McpClient::new(&toold, &path);
    let mut background = McpClient::new(&toold, &path);

    let bash = async {
        let reply = long.call_tool("bash", json!({"command": "sleep 3"})).await;
        (reply, Instant::now())
    };
    // Not read-only, so it would wait for the running `sleep 3` if it took the gate alone.
    let start = async {
        started(&toold, &id, "sleep 3").await;
        let input = json!({"command": "sleep 1; touch y", "run_in_background": true});
        let reply = background.call_tool("bash", input).await;
        (reply, Instant::now())
    };
    let ((bash, bash_done), (started_reply, started_at)) =
        tokio::time::timeout(GUARD, async { tokio::join!(bash, start) })
            .await
            .expect("both calls answer");
    assert_succeeded(&bash);
    assert_succeeded(&started_reply);
    assert!(
        started_at < bash_done,
        "the background bash waited for the running one"
    );
}

#[tokio::test]
async fn a_call_waiting_for_approval_holds_no_read_back() {
    let (toold, _scripts) = pipeline::start();
    let id = session(&toold, json!({"interactive": true})).await;
    std::fs::write(toold.workspace(&id).await.join("notes.txt"), "kept\n").unwrap();
    let path = format!("/v1/sessions/{id}/mcp");
    let mut asker = McpClient::new(&toold, &path);
    let mut reader = McpClient::new(&toold, &path);

    // `echo` asks (the test config's rule): the call waits for a person.
    let echo = json!({"command": "echo approved"});
    let asked = asker.call_tool("bash", echo);
    let read_then_approve = async {
        let approval = pending(&toold, &id).await;
        let read = reader
            .call_tool("read_file", json!({"file_path": "notes.txt"}))
            .await;
        // The approval is still pending: the read did not wait for it.
        let still: Value = toold
            .get(&format!("/v1/sessions/{id}/approvals"))
            .await
            .body;
        let approval_id = approval["id"].as_str().unwrap().to_owned();
        assert!(
            still["approvals"]
                .as_array()
                .unwrap()
                .iter()
                .any(|a| a["id"] == approval_id),
            "{still}"
        );
        let decided = toold
            .post(
                &format!("/v1/sessions/{id}/approvals/{approval_id}"),
                &json!({"decision": "allow"}),
            )
            .await;
        assert_eq!(decided.status, StatusCode::OK, "{}", decided.body);
        read
    };
    let (asked, read) =
        tokio::time::timeout(GUARD, async { tokio::join!(asked, read_then_approve) })
            .await
            .expect("both calls answer");
    assert_succeeded(&read);
    assert!(read.text_content().contains("kept"), "{}", read.text);
    assert_succeeded(&asked);
    assert!(asked.text_content().contains("approved"), "{}", asked.text);
}
