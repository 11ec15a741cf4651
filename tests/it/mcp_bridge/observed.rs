//! Bridged calls are audited and published like any tool's: a row per call in
//! `GET /v1/sessions/{id}/calls` under the bridged name, and `tool:pre` / `tool:post` (or
//! `tool:error`) events of that call on the session's event stream.

use serde_json::{Value, json};

use super::{audit_rows, call, eager, ok_output, servers, session, start};
use crate::http::harness::{Frame, Toold};

/// The session's events from the start up to the `batch:end` of its `batches`-th batch.
pub async fn events_through_batches(toold: &Toold, session: &str, batches: usize) -> Vec<Frame> {
    let mut stream = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    let mut frames = Vec::new();
    let mut ended = 0;
    while ended < batches {
        let frame = stream.next().await.expect("the event stream stays open");
        ended += usize::from(frame.event == "batch:end");
        frames.push(frame);
    }
    frames
}

/// The types of the events of `tool`, in order.
pub fn types_of<'f>(frames: &'f [Frame], tool: &str) -> Vec<&'f str> {
    frames
        .iter()
        .filter(|frame| frame.data["tool"] == tool)
        .map(|frame| frame.event.as_str())
        .collect()
}

#[tokio::test]
async fn bridged_calls_are_audited_and_published() {
    let Some(servers) = servers("audit rows and events of bridged calls") else {
        return;
    };
    let toold = start("", &[eager(servers.everything("every"))]);
    let id = session(&toold, &["every"]).await;
    let echoed = call(
        &toold,
        &id,
        "mcp__every__echo",
        json!({"message": "audited"}),
    )
    .await;
    assert_eq!(ok_output(&echoed), "Echo: audited");
    let summed = call(&toold, &id, "mcp__every__get-sum", json!({"a": 2, "b": 3})).await;
    assert!(ok_output(&summed).contains('5'), "{summed}");
    // A schema violation is caught by toold before the server sees it.
    let invalid = call(&toold, &id, "mcp__every__echo", json!({"message": 7})).await;
    assert_eq!(invalid["error_kind"], "input_validation", "{invalid}");

    let rows = audit_rows(&toold, &id).await;
    let described: Vec<(Value, Value, Value)> = rows
        .iter()
        .map(|row| {
            (
                row["tool"].clone(),
                row["is_error"].clone(),
                row["input"].clone(),
            )
        })
        .collect();
    assert_eq!(
        described,
        vec![
            (
                json!("mcp__every__echo"),
                json!(false),
                json!({"message": "audited"})
            ),
            (
                json!("mcp__every__get-sum"),
                json!(false),
                json!({"a": 2, "b": 3})
            ),
            (
                json!("mcp__every__echo"),
                json!(true),
                json!({"message": 7})
            ),
        ],
        "{rows:?}"
    );
    assert_eq!(rows[0]["output_chars"], "Echo: audited".len());

    let frames = events_through_batches(&toold, &id, 3).await;
    let sum = types_of(&frames, "mcp__every__get-sum");
    assert_eq!(
        in_order(&sum, &["tool:queued", "tool:pre", "tool:post"]),
        Some(()),
        "{frames:?}"
    );
    assert!(!sum.contains(&"tool:error"), "{sum:?}");
    let echo = types_of(&frames, "mcp__every__echo");
    assert_eq!(
        in_order(&echo, &["tool:pre", "tool:post", "tool:error"]),
        Some(()),
        "{echo:?}"
    );
    for frame in frames
        .iter()
        .filter(|f| f.data["tool"] == "mcp__every__echo")
    {
        assert_eq!(frame.data["session_id"], id.as_str(), "{:?}", frame.data);
        assert_eq!(frame.data["call_id"], "c1", "{:?}", frame.data);
    }
}

/// `Some` when `expected` occurs in `seen` in that order (other types between them allowed).
fn in_order(seen: &[&str], expected: &[&str]) -> Option<()> {
    let mut rest = seen.iter();
    for wanted in expected {
        rest.find(|seen| *seen == wanted)?;
    }
    Some(())
}
