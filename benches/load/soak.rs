//! The soak (issue 21, `TOOLD_BENCH_ONLY=soak`): a daemon of its own (SQLite, a body limit
//! of 256 KiB so an oversized body is cheap to send) first gets a short ramp of closed-loop
//! clients (1, 2, 4, 8, each for [`RAMP_STEP`]) to find its maximum batch throughput; then
//! `TOOLD_SOAK_SECS` (default 600) of paced traffic at 80% of that rate, one request in ten
//! malformed, in turn: bad JSON, an unknown session, an oversized body, invalid tool input.
//! Reported: failures on the good traffic (anything but a 200 whose results are all
//! successes; a connection lost counts too), how the malformed requests were answered, the
//! daemon's RSS every 10 s (the curve), its open descriptors (`/proc/PID/fd`) before and
//! after, and the audit rows of the good traffic checked at the end.
//!
//! Good batches are [`CALLS`] `read_file` calls of the 4 KiB fixture on kept-alive
//! connections; a malformed request goes on a connection of its own (the daemon may close
//! the one an oversized body came on), which also churns connections, as hostile clients do.
//! The pace is open-loop per worker (request k at start + k × period), catching up without
//! sleeping when behind, so a slow answer does not lower the offered rate.

use std::net::SocketAddr;
use std::time::{Duration, Instant};

use serde_json::json;

use super::client::{Connection, PreparedRequest};
use super::daemon::{Daemon, rss_kib};
use super::{batch, create_session, fixture_dir, mb, projects_in, send_until, verify_audit};

/// Calls per good batch.
const CALLS: usize = 4;
const RAMP_STEP: Duration = Duration::from_secs(3);
const RAMP_CLIENTS: [usize; 4] = [1, 2, 4, 8];
const SAMPLE_EVERY: Duration = Duration::from_secs(10);
const BODY_LIMIT: usize = 256 * 1024;
/// One request in this many is malformed.
const MALFORMED_EVERY: u64 = 10;

/// What one worker's requests came to.
#[derive(Default)]
struct Tally {
    good: u64,
    good_failed: u64,
    /// The first few good-traffic failures, to print.
    failures: Vec<String>,
    /// Per malformed kind: answered as documented, answered otherwise, connection lost.
    malformed: [[u64; 3]; 4],
}

const KINDS: [&str; 4] = [
    "bad JSON (400)",
    "unknown session (404)",
    "oversized body (413)",
    "invalid tool input (200, error result)",
];

pub async fn report() {
    let seconds: u64 = std::env::var("TOOLD_SOAK_SECS")
        .ok()
        .and_then(|s| s.parse().ok())
        .unwrap_or(600);
    let dir = fixture_dir();
    let config = dir.path().join("toold.toml");
    std::fs::write(
        &config,
        format!("[server]\nbody_limit_bytes = {BODY_LIMIT}\n"),
    )
    .expect("settings file");
    let config = config.to_str().expect("a UTF-8 path");
    let daemon = Daemon::start_with(dir.path(), &["--config", config]).await;
    let projects = projects_in(dir.path());
    let mut sessions = Vec::new();
    for _ in 0..RAMP_CLIENTS[3] {
        sessions.push(create_session(daemon.address, &projects).await);
    }
    // Malformed batches that reach a session go to one of their own, so the good sessions'
    // audit logs hold exactly the good calls.
    let target = create_session(daemon.address, &projects).await;
    let (best_clients, best_rate, ramped) = ramp(daemon.address, &sessions).await;
    let rate = best_rate * 0.8;
    let pid = daemon.pid();
    let fds_before = open_descriptors(pid);
    println!(
        "soak:                {seconds} s at {rate:.0} requests/s (80% of {best_rate:.0} batches/s \
         of {CALLS} read_file calls, best with {best_clients} clients; sent by at least 4), \
         1 in {MALFORMED_EVERY} malformed; {fds_before} open descriptors"
    );
    let deadline = Instant::now() + Duration::from_secs(seconds);
    // At least four workers, so one slow answer does not hold up the whole offered rate.
    let count = best_clients.max(4);
    let workers = sessions[..count].iter().enumerate().map(|(n, session)| {
        let period = Duration::from_secs_f64(count as f64 / rate);
        worker(
            daemon.address,
            (session, &target),
            n as u64,
            period,
            deadline,
        )
    });
    let (tallies, curve) =
        tokio::join!(futures::future::join_all(workers), rss_curve(pid, deadline));
    let fds_after = open_descriptors(pid);
    print_outcome(&tallies, &curve, fds_before, fds_after);
    // The ramp's and the soak's good batches, all audited.
    for (session, calls) in audited_calls(&sessions, &ramped, &tallies) {
        verify_audit(daemon.address, session, calls).await;
    }
    println!("soak audit:          every good call has its audit row");
    daemon.terminate();
}

fn good_request(address: SocketAddr, session: &str) -> PreparedRequest {
    PreparedRequest::post_json(
        address,
        &format!("/v1/sessions/{session}/batches"),
        &batch(CALLS),
    )
}

/// Closed-loop clients, more each step; the best step's client count and batches/s, and the
/// batches each session got (for the audit check).
async fn ramp(address: SocketAddr, sessions: &[String]) -> (usize, f64, Vec<u64>) {
    let mut best = (1, 0.0);
    let mut counted = vec![0u64; sessions.len()];
    for clients in RAMP_CLIENTS {
        let deadline = Instant::now() + RAMP_STEP;
        let started = Instant::now();
        let loops = sessions[..clients]
            .iter()
            .map(|session| closed_loop(address, session, deadline));
        let answered = futures::future::join_all(loops).await;
        for (n, batches) in answered.iter().enumerate() {
            counted[n] += batches;
        }
        let rate = answered.iter().sum::<u64>() as f64 / started.elapsed().as_secs_f64();
        println!("soak ramp:           {clients} clients: {rate:.0} batches/s");
        if rate > best.1 {
            best = (clients, rate);
        }
    }
    (best.0, best.1, counted)
}

async fn closed_loop(address: SocketAddr, session: &str, deadline: Instant) -> u64 {
    let request = good_request(address, session);
    let mut connection = Connection::open(address).await.expect("connects");
    send_until(&mut connection, &request, deadline).await as u64
}

/// One paced worker on `session` (malformed batches to `target`): request `k` is due at
/// start + k × `period`; every [`MALFORMED_EVERY`]th is malformed, the kinds in turn.
async fn worker(
    address: SocketAddr,
    (session, target): (&str, &str),
    number: u64,
    period: Duration,
    deadline: Instant,
) -> Tally {
    let good = good_request(address, session);
    let malformed = malformed_requests(address, target);
    let mut tally = Tally::default();
    let mut connection = Connection::open(address).await.ok();
    let started = Instant::now();
    // Workers start their malformed turns at different points.
    let mut k: u64 = number;
    loop {
        let due = started + period.mul_f64((k - number) as f64);
        if due >= deadline {
            return tally;
        }
        tokio::time::sleep_until(due.into()).await;
        k += 1;
        if k.is_multiple_of(MALFORMED_EVERY) {
            let kind = ((k / MALFORMED_EVERY) % 4) as usize;
            let outcome = send_malformed(address, kind, &malformed[kind]).await;
            tally.malformed[kind][outcome] += 1;
            continue;
        }
        let answer = match connection.as_mut() {
            Some(open) => open.send(&good).await,
            None => Err(std::io::Error::other("not connected")),
        };
        tally.good += 1;
        let failure = match answer {
            Ok(response) if response.status == 200 && !has_error_result(&response.body) => None,
            Ok(response) => Some(format!(
                "{}: {}",
                response.status,
                String::from_utf8_lossy(&response.body[..response.body.len().min(300)])
            )),
            Err(err) => {
                connection = Connection::open(address).await.ok();
                Some(format!("connection: {err}"))
            }
        };
        if let Some(failure) = failure {
            tally.good_failed += 1;
            if tally.failures.len() < 5 {
                tally.failures.push(failure);
            }
        }
    }
}

fn has_error_result(body: &[u8]) -> bool {
    body.windows(15).any(|w| w == b"\"is_error\":true")
}

fn malformed_requests(address: SocketAddr, session: &str) -> [PreparedRequest; 4] {
    let path = format!("/v1/sessions/{session}/batches");
    let filler = "x".repeat(BODY_LIMIT + 64 * 1024);
    [
        PreparedRequest::new("POST", address, &path, br#"{"calls": [{"id": "a", "#),
        PreparedRequest::post_json(
            address,
            "/v1/sessions/sess_00000000000000000000000000000000/batches",
            &json!({"calls": [{"id": "a", "name": "read_file", "input": {"file_path": "x"}}]}),
        ),
        PreparedRequest::post_json(
            address,
            &path,
            &json!({"calls": [{"id": "a", "name": "read_file", "input": {"file_path": filler}}]}),
        ),
        PreparedRequest::post_json(
            address,
            &path,
            &json!({"calls": [{"id": "a", "name": "read_file", "input": {"file_path": 42}}]}),
        ),
    ]
}

/// 0: answered as documented, 1: answered otherwise, 2: no answer (connection lost).
async fn send_malformed(address: SocketAddr, kind: usize, request: &PreparedRequest) -> usize {
    let Ok(mut connection) = Connection::open(address).await else {
        return 2;
    };
    match connection.send(request).await {
        Ok(response) => {
            let expected = match kind {
                0 => response.status == 400,
                1 => response.status == 404,
                2 => response.status == 413,
                _ => response.status == 200 && has_error_result(&response.body),
            };
            usize::from(!expected)
        }
        Err(_) => 2,
    }
}

/// RSS every [`SAMPLE_EVERY`] until `deadline`, the first sample at the start.
async fn rss_curve(pid: u32, deadline: Instant) -> Vec<(u64, u64)> {
    let started = Instant::now();
    let mut curve = Vec::new();
    loop {
        let at = started.elapsed().as_secs();
        let rss = rss_kib(pid);
        println!("soak rss:            {at:>4} s  {:.1} MB", mb(rss));
        curve.push((at, rss));
        let next = Instant::now() + SAMPLE_EVERY;
        if next >= deadline {
            tokio::time::sleep_until(deadline.into()).await;
            curve.push((started.elapsed().as_secs(), rss_kib(pid)));
            return curve;
        }
        tokio::time::sleep_until(next.into()).await;
    }
}

fn open_descriptors(pid: u32) -> usize {
    std::fs::read_dir(format!("/proc/{pid}/fd")).map_or(0, Iterator::count)
}

fn print_outcome(tallies: &[Tally], curve: &[(u64, u64)], fds_before: usize, fds_after: usize) {
    let good: u64 = tallies.iter().map(|t| t.good).sum();
    let failed: u64 = tallies.iter().map(|t| t.good_failed).sum();
    println!("soak good traffic:   {good} batches, {failed} failed");
    for failure in tallies.iter().flat_map(|t| &t.failures).take(5) {
        println!("soak failure:        {failure}");
    }
    for (kind, name) in KINDS.iter().enumerate() {
        let [expected, otherwise, lost] = tallies.iter().fold([0; 3], |sum, t| {
            let m = t.malformed[kind];
            [sum[0] + m[0], sum[1] + m[1], sum[2] + m[2]]
        });
        println!(
            "soak malformed:      {name}: {expected} as documented, {otherwise} otherwise, \
             {lost} without an answer"
        );
    }
    let shown: Vec<String> = curve
        .iter()
        .map(|(at, rss)| format!("{at}s {:.1}", mb(*rss)))
        .collect();
    println!("soak rss curve (MB): {}", shown.join(", "));
    // "Flat after the first minute": the growth from the sample at 60 s (or the first, in a
    // shorter run) to the last.
    let base = curve
        .iter()
        .find(|(at, _)| *at >= 60)
        .or(curve.first())
        .map_or(0, |(_, rss)| *rss);
    let last = curve.last().map_or(0, |(_, rss)| *rss);
    println!(
        "soak rss growth:     {:+.1} MB from {} to the end; descriptors {fds_before} → {fds_after}",
        mb(last) - mb(base),
        if curve.iter().any(|(at, _)| *at >= 60) {
            "60 s"
        } else {
            "the start"
        },
    );
}

/// Good batches per session (the ramp's and the soak's) × [`CALLS`].
fn audited_calls<'a>(
    sessions: &'a [String],
    ramp: &[u64],
    tallies: &[Tally],
) -> Vec<(&'a str, usize)> {
    sessions
        .iter()
        .enumerate()
        .map(|(n, session)| {
            let soaked = tallies.get(n).map_or(0, |t| t.good - t.good_failed);
            let batches = ramp.get(n).copied().unwrap_or(0) + soaked;
            (session.as_str(), batches as usize * CALLS)
        })
        .collect()
}
