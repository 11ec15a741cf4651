//! Calls that take time: server-everything's `trigger-long-running-operation` sends
//! `notifications/progress` at each step, which arrive as `tool:progress` events of the call;
//! with `tool_timeout_ms` shorter than the operation the call ends as a `timeout` naming the
//! server, long before the operation would have, and the server still answers the next call.

use std::time::{Duration, Instant};

use serde_json::json;

use super::observed::events_through_batches;
use super::{call, eager, ok_output, servers, session, start};

const LONG: &str = "mcp__every__trigger-long-running-operation";

#[tokio::test]
async fn the_server_s_progress_arrives_as_tool_progress_events() {
    let Some(servers) = servers("bridged progress notifications") else {
        return;
    };
    let toold = start("", &[eager(servers.everything("every"))]);
    let id = session(&toold, &["every"]).await;
    let result = call(&toold, &id, LONG, json!({"duration": 1, "steps": 4})).await;
    assert!(ok_output(&result).contains("Steps: 4"), "{result}");
    let frames = events_through_batches(&toold, &id, 1).await;
    let progress: Vec<(f64, f64)> = frames
        .iter()
        .filter(|frame| frame.event == "tool:progress")
        .map(|frame| {
            assert_eq!(frame.data["tool"], LONG, "{:?}", frame.data);
            assert_eq!(frame.data["call_id"], "c1", "{:?}", frame.data);
            let data = &frame.data["data"];
            (
                data["progress"]
                    .as_f64()
                    .unwrap_or_else(|| panic!("{data}")),
                data["total"].as_f64().unwrap_or_else(|| panic!("{data}")),
            )
        })
        .collect();
    assert_eq!(
        progress,
        [(1.0, 4.0), (2.0, 4.0), (3.0, 4.0), (4.0, 4.0)],
        "{frames:?}"
    );
}

#[tokio::test]
async fn a_call_past_tool_timeout_ms_times_out_naming_the_server() {
    let Some(servers) = servers("a bridged call timing out") else {
        return;
    };
    let toold = start(
        "",
        &[eager(servers.everything("every")).set("tool_timeout_ms", 500)],
    );
    let id = session(&toold, &["every"]).await;
    let started = Instant::now();
    let result = call(&toold, &id, LONG, json!({"duration": 20, "steps": 20})).await;
    let took = started.elapsed();
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["error_kind"], "timeout", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("every"),
        "the timeout names the server: {result}"
    );
    assert!(
        took < Duration::from_secs(10),
        "the call ended at its timeout, not the operation's end: {took:?}"
    );
    let next = call(
        &toold,
        &id,
        "mcp__every__echo",
        json!({"message": "still here"}),
    )
    .await;
    assert_eq!(ok_output(&next), "Echo: still here");
}
