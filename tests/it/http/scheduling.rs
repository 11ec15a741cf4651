//! Scheduling judged from the persisted events (replayed over SSE), and a several-MB offloaded
//! output read back through the `read_result` tool, byte-identical with `/v1/results` and with
//! the command's own output.

use std::collections::HashMap;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::Toold;
use crate::support::deadline::{OutputWithin, STEP};

/// `(tool:pre ts, tool:post ts)` of each call of the session, from a replay of its events.
/// Timestamps are RFC 3339 with milliseconds in UTC, so they order as strings.
async fn call_intervals(toold: &Toold, session: &str) -> HashMap<String, (String, String)> {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    let mut intervals: HashMap<String, (String, String)> = HashMap::new();
    while let Some(frame) = events.next().await {
        let call = frame.data["call_id"]
            .as_str()
            .unwrap_or_default()
            .to_owned();
        let ts = frame.data["ts"].as_str().unwrap().to_owned();
        match frame.event.as_str() {
            "tool:pre" => intervals.entry(call).or_default().0 = ts,
            "tool:post" => intervals.entry(call).or_default().1 = ts,
            "batch:end" => break,
            _ => {}
        }
    }
    intervals
}

#[tokio::test]
async fn parallel_reads_overlap_and_the_write_overlaps_nothing() {
    let toold = Toold::start();
    let id = toold.session().await;
    let dir = toold.workspace(&id).await;
    // Read-only bash calls are concurrency-safe (a new file needs no earlier read to write); the sleep makes each one last long enough
    // for the group's overlap to show in millisecond timestamps.
    let read = |call: &str| json!({"id": call, "name": "bash", "input": {"command": "sleep 0.2; cat new.txt 2>/dev/null || echo missing"}});
    let body = json!({"calls": [
        read("r1"), read("r2"), read("r3"),
        {"id": "w", "name": "write_file", "input": {"file_path": dir.join("new.txt"), "content": "written\n"}},
        read("r4"), read("r5"),
    ]});
    let reply = toold
        .post(&format!("/v1/sessions/{id}/batches"), &body)
        .await;
    assert_eq!(reply.status, StatusCode::OK);
    let outputs: Vec<&str> = reply.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["output"].as_str().unwrap())
        .collect();
    assert!(
        outputs[0].contains("missing") && outputs[4].contains("written"),
        "{outputs:?}"
    );

    let intervals = call_intervals(&toold, &id).await;
    let of = |call: &str| intervals[call].clone();
    for group in [&["r1", "r2", "r3"][..], &["r4", "r5"][..]] {
        let latest_start = group.iter().map(|c| of(c).0).max().unwrap();
        let earliest_end = group.iter().map(|c| of(c).1).min().unwrap();
        assert!(
            latest_start < earliest_end,
            "{group:?} ran one after another: {intervals:?}"
        );
    }
    let (write_start, write_end) = of("w");
    for read in ["r1", "r2", "r3"] {
        assert!(
            of(read).1 <= write_start,
            "{read} overlaps the write: {intervals:?}"
        );
    }
    for read in ["r4", "r5"] {
        assert!(
            write_end <= of(read).0,
            "{read} overlaps the write: {intervals:?}"
        );
    }
}

/// The page's content from a `read_result` output: `[id: characters A..B of N]\n` + content
/// + `\n[…]`.
fn read_result_content(output: &str) -> &str {
    let (header, rest) = output.split_once('\n').unwrap();
    let range = header.split("characters ").nth(1).unwrap();
    let (start, end) = range.split_once(" of").unwrap().0.split_once("..").unwrap();
    let shown: usize = end.parse::<usize>().unwrap() - start.parse::<usize>().unwrap();
    // The output is ASCII, so characters are bytes.
    &rest[..shown]
}

#[tokio::test]
async fn a_several_mb_output_reads_back_identically_through_read_result_and_results() {
    let toold = Toold::start();
    let id = toold.session().await;
    let command = "seq 1 600000";
    let reply = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &json!({"calls": [{"id": "big", "name": "bash", "input": {"command": command}}]}),
        )
        .await;
    let offloaded = &reply.body["results"][0]["offloaded"];
    let result_id = offloaded["result_id"]
        .as_str()
        .expect("offloaded")
        .to_owned();
    let total = offloaded["total_chars"].as_u64().unwrap() as usize;
    let own_output = std::process::Command::new("sh")
        .args(["-c", command])
        .output_within(STEP, "sh")
        .unwrap()
        .stdout;
    assert_eq!(total, own_output.len());
    assert!(total > 4_000_000, "{total}");

    // Through the tool, 30 000 characters a call, in one batch of parallel reads.
    let page = 30_000;
    let calls: Vec<Value> = (0..total.div_ceil(page))
        .map(|i| {
            json!({"id": format!("p{i}"), "name": "read_result",
            "input": {"result_id": result_id, "offset": i * page, "limit": page}})
        })
        .collect();
    let pages = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &json!({"calls": calls}),
        )
        .await;
    assert_eq!(pages.status, StatusCode::OK);
    let mut through_tool = String::with_capacity(total);
    for result in pages.body["results"].as_array().unwrap() {
        assert_eq!(result["is_error"], false, "{}", result["output"]);
        through_tool.push_str(read_result_content(result["output"].as_str().unwrap()));
    }

    // Through the HTTP endpoint, a million characters a page.
    let mut through_http = String::with_capacity(total);
    while through_http.len() < total {
        let page = toold
            .get(&format!(
                "/v1/results/{result_id}?offset={}&limit=1000000",
                through_http.len()
            ))
            .await;
        through_http.push_str(page.body["content"].as_str().unwrap());
    }
    assert!(
        through_tool.as_bytes() == own_output.as_slice(),
        "read_result differs"
    );
    assert!(
        through_http.as_bytes() == own_output.as_slice(),
        "/v1/results differs"
    );
}
