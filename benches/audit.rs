//! The audit log as a security team reads it (issue 41), on SQLite: N audit rows written
//! through the store's own writer (`AuditSink::record_many`, the journal and the writer
//! thread; not HTTP), then
//!
//! - the write time and rows/s;
//! - the database's bytes per call (the file after a checkpoint, divided by N);
//! - the p50/p95 of a newest-first page of 100 for `tool` + `decision` + a 24 h window, for
//!   `principal` alone, and for `decided_by=hook` (targets: ≤ 50 ms);
//! - export throughput: the rows/s of `GET /v1/calls/export` from the real release daemon
//!   over the same database (read to the end by a loopback client): one principal's rows
//!   (N/20), every row as NDJSON and as CSV (target: ≥ 100,000 rows/s);
//! - the cost of the new indexes on writes: one `record` awaited at a time (a single call's
//!   audit write: p50/p99) and batched rows/s, on a fresh database with the indexes of
//!   `migrations/sqlite/0010_audit_queries.sql` and `0011_audit_decision_tool.sql` beside one
//!   with them dropped, alternating.
//!
//! `cargo bench --bench audit` (N = 1,000,000); `TOOLD_BENCH_AUDIT_ROWS=10000000` for ten
//! million (long on a small machine: the write time of the default run says how long);
//! `TOOLD_BENCH_AUDIT_KEEP=DIR` keeps the database for the next run with it, which then
//! measures the reads only.

use std::sync::Arc;
use std::time::{Duration, Instant, SystemTime};

use serde_json::json;
use toold::dispatch::{AuditRecord, AuditSink};
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel, RuleSource};
use toold::store::{AuditStore, CallDecision, CallFilter, CallQuery, SqliteStore, StoreLifecycle};
use toold::tool::ErrorKind;

const TOOLS: [&str; 8] = [
    "bash",
    "bash",
    "read_file",
    "read_file",
    "grep_search",
    "write_file",
    "edit_file",
    "glob_search",
];
const PRINCIPALS: usize = 20;
const SESSIONS: usize = 2_000;
/// The rows span 30 days, the newest now.
const SPAN: Duration = Duration::from_secs(30 * 86_400);

/// Row `n` of `total`: a mix of tools, principals, decisions and errors like a busy fleet's.
fn record(n: usize, total: usize, now: SystemTime) -> AuditRecord {
    let tool = TOOLS[n % TOOLS.len()];
    let mode = DecidedBy::Mode {
        mode: PermissionLevel::WorkspaceWrite,
    };
    let (decision, error_kind) = match n % 41 {
        0 => (
            Some(PermissionDecision::Deny {
                decided_by: DecidedBy::Rule {
                    rule: "bash(rm:*)".to_owned(),
                    source: RuleSource::Server,
                },
                reason: "denied by rule".to_owned(),
            }),
            Some(ErrorKind::PermissionDenied),
        ),
        1 => (
            Some(PermissionDecision::Deny {
                decided_by: DecidedBy::Hook {
                    hook: "no-secrets".to_owned(),
                },
                reason: "blocked".to_owned(),
            }),
            Some(ErrorKind::HookBlocked),
        ),
        2..=4 => (
            Some(PermissionDecision::Allow {
                decided_by: mode.clone(),
            }),
            Some(ErrorKind::Execution),
        ),
        _ => (
            Some(PermissionDecision::Allow {
                decided_by: mode.clone(),
            }),
            None,
        ),
    };
    let age = SPAN.mul_f64(1.0 - n as f64 / total as f64);
    AuditRecord {
        session_id: format!("sess_{:032x}", (n / 50) % SESSIONS),
        batch_id: format!("batch_{:032x}", n / 10),
        call_id: format!("toolu_{n:012}"),
        index: n % 10,
        requested_name: tool.to_owned(),
        tool: Some(tool.to_owned()),
        input: json!({"command": format!("cargo test --package p{}", n % 97), "path": format!("src/m{}.rs", n % 50)}),
        is_error: error_kind.is_some(),
        error_kind,
        decision,
        output_chars: 2048,
        offloaded: None,
        started_at: now - age,
        duration_ms: 3.25,
        cancelled_by: None,
        trace_id: Some(format!("{:032x}", n / 10)),
        principal: Some(format!("principal-{}", (n / 7) % PRINCIPALS)),
        isolation: None,
    }
}

async fn open(path: &std::path::Path) -> SqliteStore {
    SqliteStore::open(path.to_str().unwrap(), "bench-node")
        .await
        .unwrap()
}

/// Writes `total` rows through the store's writer, 16 writers of 500-row batches at once.
async fn fill(store: &Arc<SqliteStore>, total: usize, now: SystemTime) -> Duration {
    let started = Instant::now();
    let chunk = 500;
    let mut next = 0;
    let mut tick = Instant::now();
    while next < total {
        let mut writes = Vec::new();
        for _ in 0..16 {
            if next >= total {
                break;
            }
            let end = (next + chunk).min(total);
            let rows: Vec<AuditRecord> = (next..end).map(|n| record(n, total, now)).collect();
            let store = Arc::clone(store);
            writes.push(tokio::spawn(async move { store.record_many(rows).await }));
            next = end;
        }
        for write in writes {
            write.await.unwrap().unwrap();
        }
        if tick.elapsed() > Duration::from_secs(30) {
            println!("  … {next} rows in {:.0?}", started.elapsed());
            tick = Instant::now();
        }
    }
    started.elapsed()
}

fn percentile(sorted: &[Duration], p: f64) -> Duration {
    sorted[((sorted.len() - 1) as f64 * p).round() as usize]
}

async fn time_query(store: &SqliteStore, name: &str, filter: CallFilter) {
    let query = CallQuery {
        filter,
        limit: 100,
        ..CallQuery::default()
    };
    let mut times = Vec::new();
    let mut rows = 0;
    for _ in 0..30 {
        let started = Instant::now();
        rows = store.query_calls(&query).await.unwrap().rows.len();
        times.push(started.elapsed());
    }
    times.sort();
    println!(
        "  {name:<40} p50 {:>8.2?}  p95 {:>8.2?}  ({rows} rows)",
        percentile(&times, 0.5),
        percentile(&times, 0.95)
    );
}

/// The real release daemon over the bench's database, for its export.
struct Daemon {
    child: std::process::Child,
    address: String,
}

const ADMIN_TOKEN: &str = "audit-bench-admin";

impl Daemon {
    async fn start(database: &std::path::Path, dir: &std::path::Path) -> Daemon {
        use std::io::BufRead;
        let mut child = std::process::Command::new(env!("CARGO_BIN_EXE_toold"))
            .args(["serve", "--listen", "127.0.0.1:0", "--data-dir"])
            .arg(dir.join("data"))
            .arg("--allowed-root")
            .arg(dir)
            .arg("--database-url")
            .arg(database)
            .args(["--auth-token", ADMIN_TOKEN])
            .env_remove("TOOLD_CONFIG")
            .env_remove("TOOLD_AUTH_TOKENS")
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .expect("toold starts");
        let mut lines = std::io::BufReader::new(child.stdout.take().unwrap()).lines();
        let address = loop {
            let line = lines.next().expect("toold prints its address").unwrap();
            if let Some(address) = line.strip_prefix("toold listening on ") {
                break address.to_owned();
            }
        };
        // Keep draining stdout so that the daemon never blocks on a full pipe.
        std::thread::spawn(move || lines.for_each(drop));
        let client = reqwest::Client::new();
        let deadline = Instant::now() + Duration::from_secs(120);
        while !client
            .get(format!("{address}/readyz"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success())
        {
            assert!(Instant::now() < deadline, "toold never became ready");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        Daemon { child, address }
    }
}

impl Drop for Daemon {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `GET /v1/calls/export?{query}` read to the end: (rows, bytes, time).
async fn export_rate(daemon: &Daemon, query: &str) -> (usize, usize, Duration) {
    use futures::StreamExt;
    let started = Instant::now();
    let response = reqwest::Client::new()
        .get(format!("{}/v1/calls/export?{query}", daemon.address))
        .bearer_auth(ADMIN_TOKEN)
        .send()
        .await
        .unwrap();
    assert!(response.status().is_success(), "{}", response.status());
    let mut body = response.bytes_stream();
    let (mut rows, mut bytes) = (0, 0);
    while let Some(chunk) = body.next().await {
        let chunk = chunk.unwrap();
        bytes += chunk.len();
        rows += chunk.iter().filter(|b| **b == b'\n').count();
    }
    (rows, bytes, started.elapsed())
}

/// The indexes of `0010_audit_queries.sql` and `0011_audit_decision_tool.sql`.
const NEW_INDEXES: [&str; 10] = [
    "calls_by_principal",
    "calls_by_tool",
    "calls_by_requested_name",
    "calls_by_decided_by",
    "calls_by_error_kind",
    "calls_by_batch",
    "calls_by_trace",
    "calls_by_started_at",
    "calls_by_decision_tool",
    "calls_by_decision_requested_name",
];

/// One round of the write cost: (single-record latencies, batched rows/s).
async fn write_round(with_indexes: bool, now: SystemTime) -> (Vec<Duration>, f64) {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("toold.db");
    if !with_indexes {
        let migrated = open(&path).await;
        migrated.close().await;
        drop(migrated);
        let connection = rusqlite::Connection::open(&path).unwrap();
        for index in NEW_INDEXES {
            connection
                .execute_batch(&format!("DROP INDEX {index}"))
                .unwrap();
        }
    }
    let store = Arc::new(open(&path).await);
    // A table that is not empty: 100,000 rows first.
    fill(&store, 100_000, now).await;
    let mut single = Vec::new();
    for n in 0..2_000 {
        let row = record(200_000 + n, 300_000, now);
        let started = Instant::now();
        store.record(row).await.unwrap();
        single.push(started.elapsed());
    }
    let batched = 100_000;
    let started = Instant::now();
    let mut filled = 0;
    while filled < batched {
        let rows: Vec<AuditRecord> = (filled..filled + 1000)
            .map(|n| record(400_000 + n, 600_000, now))
            .collect();
        store.record_many(rows).await.unwrap();
        filled += 1000;
    }
    let rate = batched as f64 / started.elapsed().as_secs_f64();
    store.close().await;
    (single, rate)
}

async fn index_cost(now: SystemTime) {
    println!("\nthe new indexes' cost on writes (fresh databases of 100,000 rows, alternating):");
    let mut results = [(Vec::new(), Vec::new()), (Vec::new(), Vec::new())];
    for _round in 0..3 {
        for (slot, with) in [(0, false), (1, true)] {
            let (single, rate) = write_round(with, now).await;
            results[slot].0.extend(single);
            results[slot].1.push(rate);
        }
    }
    for (slot, name) in [(0, "without the new indexes"), (1, "with the new indexes")] {
        let (single, rates) = &mut results[slot];
        single.sort();
        rates.sort_by(f64::total_cmp);
        println!(
            "  {name:<26} one record awaited: p50 {:>8.2?} p99 {:>8.2?}; batched rows/s median {:>9.0} (runs {:?})",
            percentile(single, 0.5),
            percentile(single, 0.99),
            rates[rates.len() / 2],
            rates.iter().map(|r| r.round() as u64).collect::<Vec<_>>()
        );
    }
}

#[tokio::main(flavor = "multi_thread", worker_threads = 2)]
async fn main() {
    let total: usize = std::env::var("TOOLD_BENCH_AUDIT_ROWS")
        .ok()
        .and_then(|n| n.parse().ok())
        .unwrap_or(1_000_000);
    let only_indexes = std::env::var("TOOLD_BENCH_ONLY").is_ok_and(|only| only == "indexes");
    let mut now = SystemTime::now();
    if !only_indexes {
        // `TOOLD_BENCH_AUDIT_KEEP=DIR` keeps the database (and the time its rows were written
        // against) in DIR, and a later run with it reads that database instead of writing one.
        let kept = std::env::var_os("TOOLD_BENCH_AUDIT_KEEP").map(std::path::PathBuf::from);
        let dir = match &kept {
            Some(kept) => {
                std::fs::create_dir_all(kept).unwrap();
                tempfile::Builder::new().tempdir_in(kept).unwrap()
            }
            None => tempfile::tempdir().unwrap(),
        };
        let base = kept.clone().unwrap_or_else(|| dir.path().to_path_buf());
        let path = base.join("toold.db");
        let written_at = base.join("written-at-ms");
        match std::fs::read_to_string(&written_at) {
            Ok(ms) if kept.is_some() => {
                now = SystemTime::UNIX_EPOCH + Duration::from_millis(ms.trim().parse().unwrap());
                println!("reading the kept database {}", path.display());
            }
            _ => {
                let store = Arc::new(open(&path).await);
                println!("writing {total} audit rows through the store's writer …");
                let took = fill(&store, total, now).await;
                println!(
                    "  {total} rows in {took:.1?}: {:.0} rows/s",
                    total as f64 / took.as_secs_f64()
                );
                store.close().await;
                drop(store);
                let ms = now
                    .duration_since(SystemTime::UNIX_EPOCH)
                    .unwrap()
                    .as_millis();
                std::fs::write(&written_at, ms.to_string()).unwrap();
            }
        }
        let bytes = std::fs::metadata(&path).unwrap().len();
        println!(
            "  database {:.1} MiB: {:.0} bytes per call",
            bytes as f64 / 1048576.0,
            bytes as f64 / total as f64
        );
        let store = open(&path).await;
        println!("a newest-first page of 100:");
        let day = Duration::from_secs(86_400);
        time_query(
            &store,
            "tool=bash + decision=deny + last 24 h",
            CallFilter {
                tool: Some("bash".into()),
                decision: Some(CallDecision::Deny),
                since: Some(now - day),
                ..CallFilter::default()
            },
        )
        .await;
        time_query(
            &store,
            "principal alone",
            CallFilter {
                principal: Some("principal-7".into()),
                ..CallFilter::default()
            },
        )
        .await;
        time_query(
            &store,
            "decided_by=hook",
            CallFilter {
                decided_by: Some("hook".into()),
                ..CallFilter::default()
            },
        )
        .await;
        time_query(
            &store,
            "tool=bash + decision=deny, 10 to 11 days ago",
            CallFilter {
                tool: Some("bash".into()),
                decision: Some(CallDecision::Deny),
                since: Some(now - 11 * day),
                until: Some(now - 10 * day),
                ..CallFilter::default()
            },
        )
        .await;
        store.close().await;
        drop(store);
        let daemon = Daemon::start(&path, dir.path()).await;
        for (name, query) in [
            ("one principal's rows", "principal=principal-3"),
            ("every row", ""),
            ("every row as CSV", "format=csv"),
        ] {
            let (rows, bytes, took) = export_rate(&daemon, query).await;
            println!(
                "export of {name} (GET /v1/calls/export?{query}): {rows} lines, {:.1} MiB in {took:.2?}: {:.0} rows/s",
                bytes as f64 / 1048576.0,
                rows as f64 / took.as_secs_f64()
            );
        }
        drop(daemon);
    }
    index_cost(now).await;
}
