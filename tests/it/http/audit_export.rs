//! `GET /v1/calls/export` and `[server] audit_retention_days` against the real daemon.
//!
//! Rows are planted through the store's own writer (`toold::store::open` on the daemon's
//! database while no daemon runs) rather than run through HTTP, to have 200,000 of them in
//! seconds, and to have rows started days ago for retention: the store keeps whatever
//! `started_at` it is given, and nothing else ages a row honestly.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::http::audit::listed;
use crate::http::harness::Toold;
use crate::support::deadline::within;
use toold::dispatch::AuditRecord;
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel};

const ADMIN: &str = "export-admin";

fn row(i: usize, started_at: SystemTime) -> AuditRecord {
    AuditRecord {
        session_id: format!("sess_{}", i % 3),
        batch_id: format!("batch_{}", i / 100),
        call_id: format!("call_{i}"),
        index: i % 100,
        requested_name: "bash".to_owned(),
        tool: Some("bash".to_owned()),
        // ~300 bytes of input, so that an export held whole would weigh ~100 MB.
        input: json!({"command": format!("echo {i} {}", "x".repeat(250)), "timeout": 1000}),
        decision: Some(if i.is_multiple_of(7) {
            PermissionDecision::Deny {
                decided_by: DecidedBy::Rule {
                    rule: "bash(rm:*)".to_owned(),
                    source: toold::permission::RuleSource::Server,
                },
                reason: "a \"quoted\", reason".to_owned(),
            }
        } else {
            PermissionDecision::Allow {
                decided_by: DecidedBy::Mode {
                    mode: PermissionLevel::WorkspaceWrite,
                },
            }
        }),
        is_error: i.is_multiple_of(7),
        error_kind: i
            .is_multiple_of(7)
            .then_some(toold::tool::ErrorKind::PermissionDenied),
        output_chars: 12,
        offloaded: None,
        started_at,
        duration_ms: 1.5,
        cancelled_by: None,
        trace_id: None,
        principal: Some(
            if i.is_multiple_of(2) {
                "ci-agent"
            } else {
                "dev"
            }
            .to_owned(),
        ),
        isolation: None,
    }
}

/// Plants rows in the database of a daemon that will run over `dir` (none runs now).
async fn plant(dir: &std::path::Path, rows: Vec<AuditRecord>) -> Vec<String> {
    let _ = std::fs::create_dir_all(dir.join("data"));
    let path = dir.join("data").join("toold.db");
    let store = toold::store::open(path.to_str().unwrap(), "planting-node")
        .await
        .unwrap();
    let mut offloaded = Vec::new();
    let mut rows = rows;
    for record in rows.iter_mut().filter(|r| r.output_chars == 999) {
        let result = store
            .offload(&record.session_id, &record.call_id, "an offloaded output")
            .await
            .unwrap();
        offloaded.push(result.result_id.clone());
        record.offloaded = Some(result);
    }
    for chunk in rows.chunks(5_000) {
        store.record_many(chunk.to_vec()).await.unwrap();
    }
    store.close().await;
    offloaded
}

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    status
        .lines()
        .find_map(|line| line.strip_prefix("VmRSS:"))
        .and_then(|rest| rest.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap()
}

fn start(dir: Arc<tempfile::TempDir>, settings: &str) -> Toold {
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, settings).unwrap();
    let file = file.to_str().unwrap().to_owned();
    Toold::start_with(dir, &["--config", &file, "--auth-token", ADMIN])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_export_of_200000_rows_streams_in_little_memory_and_equals_the_paged_listing() {
    const ROWS: usize = 200_000;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let now = SystemTime::now();
    let rows: Vec<AuditRecord> = (0..ROWS)
        .map(|i| row(i, now - Duration::from_millis((ROWS - i) as u64)))
        .collect();
    plant(dir.path(), rows).await;
    let toold = start(dir, "");
    let pid = toold.pid();
    // Warm: the first page and the listing's allocations are not the export's.
    let _ = listed(&toold, ADMIN, "principal=dev", 1000).await;
    let before = rss_kib(pid);
    let response = within(
        Duration::from_secs(60),
        "the export's head",
        toold
            .request_as(
                Some(ADMIN),
                reqwest::Method::GET,
                "/v1/calls/export?format=ndjson&include=input",
            )
            .send(),
    )
    .await
    .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    assert_eq!(response.headers()["content-type"], "application/x-ndjson");
    let mut body = response.bytes_stream();
    let mut pending = Vec::new();
    let mut exported: Vec<Value> = Vec::with_capacity(ROWS);
    let mut peak = before;
    let deadline = tokio::time::Instant::now() + Duration::from_secs(600);
    while let Some(chunk) = within(
        Duration::from_secs(60),
        "the export's next chunk",
        body.next(),
    )
    .await
    {
        assert!(
            tokio::time::Instant::now() < deadline,
            "the export takes too long"
        );
        pending.extend_from_slice(&chunk.unwrap());
        while let Some(end) = pending.iter().position(|b| *b == b'\n') {
            let line: Vec<u8> = pending.drain(..=end).collect();
            exported.push(serde_json::from_slice(&line).unwrap());
            if exported.len().is_multiple_of(5_000) {
                peak = peak.max(rss_kib(pid));
            }
        }
    }
    assert!(pending.is_empty());
    peak = peak.max(rss_kib(pid));
    let growth_mib = (peak.saturating_sub(before)) as f64 / 1024.0;
    println!(
        "export of {ROWS} rows: RSS {before} KiB before, peak {peak} KiB (+{growth_mib:.1} MiB)"
    );
    assert!(growth_mib < 64.0, "the daemon grew {growth_mib:.1} MiB");
    assert_eq!(exported.len(), ROWS);

    // Exactly the paged listing, row for row.
    let paged = listed(&toold, ADMIN, "", 1000).await;
    assert_eq!(paged.len(), ROWS);
    for (listed_row, exported_row) in paged.iter().zip(&exported) {
        assert_eq!(listed_row, exported_row);
    }
    // Filters apply to the export as to the listing; without include= there is no input.
    let (status, text) = text_of(&toold, "/v1/calls/export?principal=dev&decision=deny").await;
    assert_eq!(status, StatusCode::OK);
    let filtered: Vec<Value> = text
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let expected: Vec<&Value> = paged
        .iter()
        .filter(|r| r["principal"] == "dev" && r["decision"]["decision"] == "deny")
        .collect();
    assert_eq!(filtered.len(), expected.len());
    assert!(
        filtered.iter().all(|r| r.get("input").is_none()),
        "{}",
        filtered[0]
    );
    assert_eq!(filtered[0]["call_id"], expected[0]["call_id"]);
}

async fn text_of(toold: &Toold, path: &str) -> (StatusCode, String) {
    let response = within(
        Duration::from_secs(120),
        "an export's head",
        toold
            .request_as(Some(ADMIN), reqwest::Method::GET, path)
            .send(),
    )
    .await
    .unwrap();
    let status = response.status();
    (status, response.text().await.unwrap())
}

#[tokio::test]
async fn a_csv_export_has_the_documented_columns_quoted_and_bad_parameters_are_a_400() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let now = SystemTime::now();
    plant(dir.path(), (0..15).map(|i| row(i, now)).collect()).await;
    let toold = start(dir, "");
    let (status, text) = text_of(
        &toold,
        "/v1/calls/export?format=csv&decision=deny&include=input,output",
    )
    .await;
    assert_eq!(status, StatusCode::OK, "{text}");
    let mut reader = csv::Reader::from_reader(text.as_bytes());
    let header: Vec<String> = reader
        .headers()
        .unwrap()
        .iter()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        header,
        [
            "cursor",
            "started_at",
            "session_id",
            "batch_id",
            "call_id",
            "index",
            "principal",
            "requested_name",
            "tool",
            "decision",
            "decided_by",
            "is_error",
            "error_kind",
            "output_chars",
            "result_id",
            "duration_ms",
            "trace_id",
            "node",
            "interrupted",
            "cancelled_by",
            "isolation",
            "input",
            "output",
        ]
    );
    let records: Vec<csv::StringRecord> = reader.records().map(Result::unwrap).collect();
    // Rows 0, 7 and 14 are denials; newest first.
    let calls: Vec<&str> = records.iter().map(|r| &r[4]).collect();
    assert_eq!(calls, ["call_14", "call_7", "call_0"]);
    assert_eq!(&records[0][9], "deny");
    assert_eq!(&records[0][10], "rule");
    assert_eq!(&records[0][12], "permission_denied");
    assert_eq!(
        &records[0][20], "",
        "no isolation on a row that ran nowhere"
    );
    let input: Value = serde_json::from_str(&records[0][21]).unwrap();
    assert!(input["command"].as_str().unwrap().starts_with("echo 14 "));

    for (query, named) in [
        ("format=xml", "xml"),
        ("include=secrets", "secrets"),
        ("since=soon", "since"),
        ("colour=red", "colour"),
    ] {
        let (status, text) = text_of(&toold, &format!("/v1/calls/export?{query}")).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{query}: {text}");
        assert!(text.contains(named), "{query}: {text}");
    }
    // Counted in /metrics.
    let (_, metrics) = text_of(&toold, "/metrics").await;
    assert!(
        metrics.contains("toold_audit_exports_total{format=\"csv\"} 1"),
        "{metrics}"
    );
}

#[tokio::test]
async fn retention_removes_only_rows_older_than_the_window_with_their_offloaded_results() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let day = Duration::from_secs(86_400);
    let now = SystemTime::now();
    // 30 rows three days old and 5 from now; every third has an offloaded result.
    let rows: Vec<AuditRecord> = (0..35)
        .map(|i| {
            let at = if i < 30 {
                now - 3 * day
            } else {
                now - Duration::from_secs(60)
            };
            AuditRecord {
                output_chars: if i % 3 == 0 { 999 } else { 12 },
                ..row(i, at)
            }
        })
        .collect();
    let offloaded = plant(dir.path(), rows).await;
    // Kept forever by default: nothing goes.
    let toold = start(dir.clone(), "");
    assert_eq!(listed(&toold, ADMIN, "", 100).await.len(), 35);
    toold.terminate();
    let toold = start(dir, "[server]\naudit_retention_days = 1\n");
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let left = loop {
        let left = listed(&toold, ADMIN, "", 100).await;
        if left.len() == 5 || tokio::time::Instant::now() > deadline {
            break left;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let calls: Vec<&str> = left
        .iter()
        .map(|r| r["call_id"].as_str().unwrap())
        .collect();
    assert_eq!(
        calls,
        ["call_34", "call_33", "call_32", "call_31", "call_30"]
    );
    // The old rows' results went with them; the new ones' stay.
    for (i, result_id) in (0..35).filter(|i| i % 3 == 0).zip(&offloaded) {
        let reply = toold
            .send(toold.request_as(
                Some(ADMIN),
                reqwest::Method::GET,
                &format!("/v1/results/{result_id}"),
            ))
            .await;
        let expected = if i < 30 {
            StatusCode::NOT_FOUND
        } else {
            StatusCode::OK
        };
        assert_eq!(reply.status, expected, "result of call_{i}: {}", reply.body);
    }
}
