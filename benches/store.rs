//! Audit rows per second through `SqliteStore`'s group commit: N concurrent writers, each
//! awaiting `AuditSink::record` (so each row is durable before its writer goes on) in a loop,
//! against a fresh WAL database in a temporary directory.
//!
//! Prints, per writer count, the rows/s of each run and the median, plus the latency of one
//! `record` (p50/p99). A plain harness (not criterion) because the figure is a throughput of
//! many concurrent tasks, not the time of one call.
//!
//! `cargo bench --bench store` (add `-- quick` for a short run).

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use toold::dispatch::{AuditRecord, AuditSink};
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel};
use toold::store::SqliteStore;

/// A row like the ones a `read_file` call leaves.
fn record(writer: usize, n: usize) -> AuditRecord {
    AuditRecord {
        session_id: "0190f5c4-7a1e-7c8e-b6a2-3d4e5f6a7b8c".to_owned(),
        batch_id: format!("batch-{writer}-{}", n / 100),
        call_id: format!("toolu_{writer:04}_{n:08}"),
        index: n % 100,
        requested_name: "read_file".to_owned(),
        tool: Some("read_file".to_owned()),
        input: json!({"path": format!("src/module_{}.rs", n % 50), "limit": 200}),
        decision: Some(PermissionDecision::Allow {
            decided_by: DecidedBy::Mode {
                mode: PermissionLevel::WorkspaceWrite,
            },
        }),
        is_error: false,
        error_kind: None,
        output_chars: 4096,
        offloaded: None,
        started_at: SystemTime::now(),
        duration_ms: 0.21,
        cancelled_by: None,
        trace_id: None,
        principal: None,
        isolation: None,
    }
}

/// One run: `writers` tasks record `rows_each` rows each. Returns rows/s and latencies.
async fn run(writers: usize, rows_each: usize) -> (f64, Vec<Duration>) {
    let dir = tempfile::tempdir().expect("temp dir");
    let path = dir.path().join("bench.db");
    let store = Arc::new(
        SqliteStore::open(path.to_str().expect("UTF-8 temp path"), "bench")
            .await
            .expect("open store"),
    );
    // Warm up: connections, prepared statements, the first pages of the file.
    for n in 0..200 {
        store.record(record(9999, n)).await.expect("record");
    }
    let started = Instant::now();
    let tasks: Vec<_> = (0..writers)
        .map(|writer| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut latencies = Vec::with_capacity(rows_each);
                for n in 0..rows_each {
                    let row = record(writer, n);
                    let one = Instant::now();
                    store.record(row).await.expect("record");
                    latencies.push(one.elapsed());
                }
                latencies
            })
        })
        .collect();
    let mut latencies = Vec::with_capacity(writers * rows_each);
    for task in tasks {
        latencies.extend(task.await.expect("writer task"));
    }
    let elapsed = started.elapsed();
    (
        (writers * rows_each) as f64 / elapsed.as_secs_f64(),
        latencies,
    )
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p) as usize]
}

fn main() {
    let quick = std::env::args().any(|arg| arg == "quick");
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("tokio runtime");
    let total_rows = if quick { 20_000 } else { 200_000 };
    let repeats = if quick { 1 } else { 3 };
    println!("store/audit_group_commit (SQLite, WAL, synchronous=NORMAL, temp file)");
    for writers in [1, 4, 16, 64] {
        let rows_each = total_rows / writers / if writers == 1 { 4 } else { 1 };
        let mut rates = Vec::new();
        let mut all_latencies = Vec::new();
        for _ in 0..repeats {
            let (rate, latencies) = runtime.block_on(run(writers, rows_each));
            rates.push(rate);
            all_latencies.extend(latencies);
        }
        all_latencies.sort_unstable();
        let shown: Vec<String> = rates.iter().map(|r| format!("{r:.0}")).collect();
        rates.sort_by(f64::total_cmp);
        println!(
            "  {writers:>2} writers × {rows_each} rows: rows/s per run [{}], median {:.0}; \
             record latency p50 {:?} p99 {:?}",
            shown.join(", "),
            rates[rates.len() / 2],
            percentile(&all_latencies, 0.50),
            percentile(&all_latencies, 0.99),
        );
    }
}
