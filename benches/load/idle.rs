//! What idling costs the next call on this machine (issues 18 and 23): the single `read_file`
//! call of the latency bench, sent after the client has waited a gap each time (0, 0.3, 1 and
//! 3 ms), with the call's p50 and the daemon's CPU time per call (the sum of its threads'
//! `schedstat` run time, its Tokio workers' share apart) beside each gap, and the floor's p50
//! after the same gaps (a bare axum handler, `floor.rs`: the least work the exchange can be).
//! The gap is slept (the client's CPU idles too) and then spun (the client's CPU stays busy).
//! Selected alone with `TOOLD_BENCH_ONLY=idle`.
//!
//! Why it exists: the bridge's and the hop's budgets each compare a path that waits mid-call
//! (for an MCP child, for the owner's Postgres commit) with one that does not. Where the same
//! work costs the daemon more after a gap than back to back, part of each difference is that
//! dearer work after the wait, not the bridge's or the hop's own; this prints how much dearer.

use std::time::{Duration, Instant};

use serde_json::json;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{
    FILE_NAME, batch, create_session, fixture_dir, floor, percentiles, projects_in, us,
    verify_audit,
};

/// The client's wait before each call.
const GAPS: [Duration; 4] = [
    Duration::ZERO,
    Duration::from_micros(300),
    Duration::from_millis(1),
    Duration::from_millis(3),
];
const CALLS: usize = 2_000;
const WARM_UP: usize = 500;

pub async fn report() {
    let dir = fixture_dir();
    let daemon = Daemon::start_with(dir.path(), &[]).await;
    let projects = projects_in(dir.path());
    let session = create_session(daemon.address, &projects).await;
    let request = PreparedRequest::post_json(
        daemon.address,
        &format!("/v1/sessions/{session}/batches"),
        &batch(1),
    );
    let mut connection = Connection::open(daemon.address)
        .await
        .expect("connects to toold");
    let floor = floor::start(projects.clone());
    let floor_request =
        PreparedRequest::post_json(floor, "/read", &json!({"file_path": FILE_NAME}));
    let mut bare = Connection::open(floor)
        .await
        .expect("connects to the floor");
    for _ in 0..WARM_UP {
        connection.send(&request).await.expect("a response");
        bare.send(&floor_request).await.expect("a response");
    }
    let mut made = WARM_UP;
    println!(
        "idle gaps: one read_file call after the client waited a gap, {CALLS} calls a gap: \
         toold's p50 and its CPU time a call, the floor's p50"
    );
    for spin in [false, true] {
        println!("  the gap {}:", if spin { "spun" } else { "slept" });
        for gap in GAPS {
            let (p50, [cpu, workers]) =
                after_gaps(&mut connection, &request, gap, spin, Some(daemon.pid())).await;
            let (floor_p50, _) = after_gaps(&mut bare, &floor_request, gap, spin, None).await;
            made += CALLS;
            println!(
                "    {:>3.1} ms: toold p50 {:>6.1} µs, CPU {:>6.1} µs a call ({:>6.1} in its \
                 Tokio workers); floor p50 {:>6.1} µs",
                gap.as_secs_f64() * 1e3,
                us(p50),
                us(cpu),
                us(workers),
                us(floor_p50)
            );
        }
    }
    verify_audit(daemon.address, &session, made).await;
    println!("audit (idle gaps):   {made} rows = every call made");
    daemon.terminate();
}

/// [`CALLS`] calls, each after `gap` (slept or spun); their p50 and the CPU time per call of
/// process `pid`, all its threads and its Tokio workers (zero without one).
async fn after_gaps(
    connection: &mut Connection,
    request: &PreparedRequest,
    gap: Duration,
    spin: bool,
    pid: Option<u32>,
) -> (Duration, [Duration; 2]) {
    let mut samples = Vec::with_capacity(CALLS);
    let cpu_before = pid.map(cpu_time).unwrap_or_default();
    for _ in 0..CALLS {
        if spin {
            let until = Instant::now() + gap;
            while Instant::now() < until {
                std::hint::spin_loop();
            }
        } else if !gap.is_zero() {
            // The client's runtime has nothing else to do; a thread sleep is finer than
            // Tokio's millisecond timer.
            std::thread::sleep(gap);
        }
        let started = Instant::now();
        let response = connection.send(request).await.expect("a response");
        samples.push(started.elapsed());
        assert_eq!(response.status, 200);
    }
    let cpu_after = pid.map(cpu_time).unwrap_or_default();
    let per_call = |i: usize| cpu_after[i].saturating_sub(cpu_before[i]) / CALLS as u32;
    (percentiles(&mut samples).0, [per_call(0), per_call(1)])
}

/// The time the threads of process `pid` have run, all of them and its Tokio workers (the
/// first field of each thread's `/proc/{pid}/task/{tid}/schedstat`, in nanoseconds; threads
/// that ended are not counted).
fn cpu_time(pid: u32) -> [Duration; 2] {
    let (mut total, mut workers) = (0u64, 0u64);
    let tasks = std::fs::read_dir(format!("/proc/{pid}/task")).expect("the daemon's threads");
    for task in tasks.flatten() {
        let stat = std::fs::read_to_string(task.path().join("schedstat")).unwrap_or_default();
        let ran = stat
            .split_whitespace()
            .next()
            .and_then(|ns| ns.parse::<u64>().ok())
            .unwrap_or(0);
        total += ran;
        let name = std::fs::read_to_string(task.path().join("comm")).unwrap_or_default();
        if name.starts_with("tokio-rt-worker") {
            workers += ran;
        }
    }
    [Duration::from_nanos(total), Duration::from_nanos(workers)]
}
