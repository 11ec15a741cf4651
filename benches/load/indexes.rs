//! What the audit queries' indexes cost a single call (issue 41, `TOOLD_BENCH_ONLY=indexes`):
//! the load bench's `read_file` single call on a daemon whose database has every index of
//! the migrations, beside one from which the audit-query indexes
//! (`migrations/sqlite/0010_audit_queries.sql`, `0011_audit_decision_tool.sql`) were dropped
//! after it migrated, and beside a second daemon with the indexes as an A/A floor (what two
//! identical daemons differ by here). Alternating rounds over one client, the callers' order
//! rotated every round, so that neither daemon always runs first.
//!
//! A call waits on its audit row's journal append, not on the table insert behind it, so the
//! expectation is no difference beyond the A/A floor's.
//!
//! Re-check: `TOOLD_BENCH_ONLY=indexes cargo bench --bench load`; `TOOLD_BENCH_QUICK=1` runs
//! a few calls only (to check the bench works, not to measure).

use std::time::Duration;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{
    ROUND, ROUNDS, WARM_UP, batch, create_session, fixture_dir, percentiles, projects_in, us,
};

/// The indexes the audit queries added.
const AUDIT_INDEXES: [&str; 10] = [
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

struct Caller {
    daemon: Daemon,
    connection: Connection,
    request: PreparedRequest,
    _dir: tempfile::TempDir,
}

impl Caller {
    async fn start(with_indexes: bool) -> Caller {
        let dir = fixture_dir();
        let mut daemon = Daemon::start(dir.path()).await;
        if !with_indexes {
            // Migrated by the first start; the indexes dropped while no daemon runs.
            daemon.terminate();
            let database = dir.path().join("data").join("toold.db");
            let connection = rusqlite::Connection::open(&database).expect("the database opens");
            for index in AUDIT_INDEXES {
                connection
                    .execute_batch(&format!("DROP INDEX {index}"))
                    .expect("the index exists");
            }
            drop(connection);
            daemon = Daemon::start(dir.path()).await;
        }
        let session = create_session(daemon.address, &projects_in(dir.path())).await;
        let body = serde_json::to_vec(&batch(1)).expect("a batch");
        Caller {
            connection: Connection::open(daemon.address).await.expect("connects"),
            request: PreparedRequest::with_bearer(
                "POST",
                daemon.address,
                &format!("/v1/sessions/{session}/batches"),
                None,
                &body,
            ),
            daemon,
            _dir: dir,
        }
    }

    async fn time(&mut self, calls: usize) -> Vec<Duration> {
        super::time_requests(&mut self.connection, &self.request, calls).await
    }
}

/// Prints the three daemons' p50/p99 and the ratios.
pub async fn measure() {
    let quick = std::env::var("TOOLD_BENCH_QUICK").is_ok();
    let (warm_up, rounds, round) = if quick {
        (10, 2, 10)
    } else {
        (WARM_UP, ROUNDS, ROUND)
    };
    let mut callers = [
        Caller::start(true).await,
        Caller::start(true).await,
        Caller::start(false).await,
    ];
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for caller in &mut callers {
        caller.time(warm_up).await;
    }
    for r in 0..rounds {
        for k in 0..callers.len() {
            let i = (r + k) % callers.len();
            samples[i].extend(callers[i].time(round).await);
        }
    }
    let [with, again, without] = samples.map(|mut taken| {
        let count = taken.len();
        let (p50, p99) = percentiles(&mut taken);
        (p50, p99, count)
    });
    for (label, (p50, p99, count)) in [
        ("with the indexes:      ", with),
        ("with them (A/A floor): ", again),
        ("without them:          ", without),
    ] {
        println!(
            "audit indexes {label}read_file p50 {:.1} µs, p99 {:.1} µs ({count} calls)",
            us(p50),
            us(p99)
        );
    }
    println!(
        "audit indexes with / without p50: {:.3}×  (A/A floor: {:.3}×)",
        with.0.as_secs_f64() / without.0.as_secs_f64(),
        with.0.as_secs_f64() / again.0.as_secs_f64(),
    );
    for caller in callers {
        caller.daemon.terminate();
    }
}
