//! The cost of principals and roles (issue 21, `TOOLD_BENCH_ONLY=roles`): the single-call p50
//! of `read_file` (the load bench's request) on a daemon without tokens, as the load bench
//! runs it, beside a daemon with `[[auth.tokens]]`, called by an admin and by an agent on its
//! own session, in alternating rounds over one client. The agent's call pays everything roles
//! add: the bearer token's digest and lookup, and the ownership check of the session at the
//! gate. An observer may not run a batch, so its check is not on this path. Budget: the
//! agent's p50 at most 5% above the tokenless daemon's.
//!
//! `TOOLD_BENCH_QUICK=1` runs a few calls only (to check the bench works, not to measure).

use std::time::Duration;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{
    ROUND, ROUNDS, WARM_UP, batch, create_session_as, fixture_dir, percentiles, projects_in, us,
};

const ROLES_BUDGET: f64 = 1.05;
const ADMIN_TOKEN: &str = "bench-admin-token";
const AGENT_TOKEN: &str = "bench-agent-token";

/// A connection with its single-call request, sent with `token` when there is one.
struct Caller {
    connection: Connection,
    request: PreparedRequest,
}

impl Caller {
    async fn open(daemon: &Daemon, dir: &std::path::Path, token: Option<&str>) -> Caller {
        let projects = projects_in(dir);
        let session = create_session_as(daemon.address, &projects, token).await;
        let body = serde_json::to_vec(&batch(1)).expect("a batch");
        Caller {
            connection: Connection::open(daemon.address).await.expect("connects"),
            request: PreparedRequest::with_bearer(
                "POST",
                daemon.address,
                &format!("/v1/sessions/{session}/batches"),
                token,
                &body,
            ),
        }
    }

    async fn time(&mut self, calls: usize) -> Vec<Duration> {
        super::time_requests(&mut self.connection, &self.request, calls).await
    }
}

/// Prints the tokenless daemon against the admin's and the agent's calls.
pub async fn measure() {
    let quick = std::env::var("TOOLD_BENCH_QUICK").is_ok();
    let (warm_up, rounds, round) = if quick {
        (10, 2, 10)
    } else {
        (WARM_UP, ROUNDS, ROUND)
    };
    let open_dir = fixture_dir();
    let open_daemon = Daemon::start(open_dir.path()).await;
    let guarded_dir = fixture_dir();
    let config = guarded_dir.path().join("toold.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth.tokens]]\nname = \"ops\"\ntoken = \"{ADMIN_TOKEN}\"\nrole = \"admin\"\n\n\
             [[auth.tokens]]\nname = \"alice\"\ntoken = \"{AGENT_TOKEN}\"\nrole = \"agent\"\n"
        ),
    )
    .expect("settings file");
    let config = config.to_str().expect("a UTF-8 path");
    let guarded = Daemon::start_with(guarded_dir.path(), &["--config", config]).await;
    let mut callers = [
        Caller::open(&open_daemon, open_dir.path(), None).await,
        Caller::open(&guarded, guarded_dir.path(), Some(ADMIN_TOKEN)).await,
        Caller::open(&guarded, guarded_dir.path(), Some(AGENT_TOKEN)).await,
    ];
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for caller in &mut callers {
        caller.time(warm_up).await;
    }
    for _ in 0..rounds {
        for (caller, taken) in callers.iter_mut().zip(&mut samples) {
            taken.extend(caller.time(round).await);
        }
    }
    let [open, admin, agent] = samples.map(|mut taken| {
        let count = taken.len();
        let (p50, p99) = percentiles(&mut taken);
        (p50, p99, count)
    });
    for (label, (p50, p99, count)) in [
        ("no tokens:          ", open),
        ("admin token:        ", admin),
        ("agent token:        ", agent),
    ] {
        println!(
            "roles {label}read_file p50 {:.1} µs, p99 {:.1} µs ({count} calls)",
            us(p50),
            us(p99)
        );
    }
    let ratio = agent.0.as_secs_f64() / open.0.as_secs_f64();
    println!(
        "roles agent / none p50: {ratio:.3}×  (admin / none {:.3}×; budget ≤ {ROLES_BUDGET}×: {})",
        admin.0.as_secs_f64() / open.0.as_secs_f64(),
        super::verdict(ratio <= ROLES_BUDGET)
    );
    open_daemon.terminate();
    guarded.terminate();
}
