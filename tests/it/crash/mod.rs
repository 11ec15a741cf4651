//! The crash loop (issue 21): twenty times, the real daemon starts over the same data
//! directory (and, in the Postgres run, the same schema; the shells' sandbox bubblewrap and
//! Landlock in turn), four clients send it batches of
//! writes and long shell calls (`traffic`), and it is killed with `kill -9` at a random
//! moment. After each kill no process of its shells may be left (found in `/proc` by the
//! marker every shell's command line carries); after each restart every result a client
//! received has its audit row, every session a client created is still there (an open one
//! runs batches again, which the next round's traffic shows), and every keyed batch cut off
//! gets a final answer when retried with its key, its record no longer `running`.
//!
//! The moments are drawn from a seeded generator; the seed is printed, and
//! `TOOLD_TEST_CRASH_SEED` repeats a run.

mod traffic;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use crate::http::harness::Toold;
use crate::support::postgres::{TestSchema, postgres_url};
use traffic::{Client, Ledger, Rng, SessionState};

const ROUNDS: usize = 20;
const CLIENTS: usize = 4;

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_twenty_times_under_load_loses_nothing_answered_on_sqlite() {
    crash_loop(&[]).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn kill_9_twenty_times_under_load_loses_nothing_answered_on_postgres() {
    let Some(server) = postgres_url("crash loop on Postgres") else {
        return;
    };
    let schema = TestSchema::create(&server).await;
    crash_loop(&["--database-url", &schema.url()]).await;
}

async fn crash_loop(flags: &[&str]) {
    let seed = std::env::var("TOOLD_TEST_CRASH_SEED")
        .ok()
        .and_then(|seed| seed.parse().ok())
        .unwrap_or_else(|| uuid::Uuid::now_v7().as_u64_pair().1);
    eprintln!("crash loop seed {seed} (TOOLD_TEST_CRASH_SEED={seed} repeats it)");
    let mut rng = Rng::new(seed);
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let marker = format!("toold-crash-{}", uuid::Uuid::now_v7().simple());
    let ledger = Arc::new(Mutex::new(Ledger::default()));
    let mut clients: Vec<Client> = (0..CLIENTS)
        .map(|number| Client {
            number,
            marker: marker.clone(),
            ledger: ledger.clone(),
            session: None,
            rng: Rng::new(rng.next()),
            batches: 0,
        })
        .collect();
    let mut shells_seen = 0;
    for round in 0..ROUNDS {
        let mut toold = start(&dir, flags, round);
        check_after_restart(&toold, &ledger, round).await;
        let base = toold.base.clone();
        let running: Vec<_> = clients
            .drain(..)
            .map(|mut client| {
                let base = base.clone();
                tokio::spawn(async move {
                    client.run(&base).await;
                    client
                })
            })
            .collect();
        tokio::time::sleep(Duration::from_millis(200 + rng.below(1500))).await;
        // What the check after the kill looks for must be there before it.
        shells_seen += marked_processes(&marker).len();
        toold.kill();
        for client in running {
            let client = tokio::time::timeout(Duration::from_secs(60), client)
                .await
                .expect("a client notices the daemon died")
                .unwrap_or_else(|panic| panic!("round {round} (seed {seed}): {panic}"));
            clients.push(client);
        }
        no_shell_outlives_the_daemon(&marker, round).await;
    }
    let toold = start(&dir, flags, ROUNDS);
    check_after_restart(&toold, &ledger, ROUNDS).await;
    let ledger = ledger.lock().unwrap();
    eprintln!(
        "crash loop: {} results received in {} sessions, {} keyed batches cut off and retried \
         ({} of their calls had no audit row until the retry), {shells_seen} marked processes \
         killed with their daemons",
        ledger.received.len(),
        ledger.sessions.len(),
        ledger.retried,
        ledger.unrecorded
    );
    assert!(
        shells_seen > 0,
        "the shells' processes are found by their marker"
    );
}

/// The daemon over `dir`, its shells sandboxed by bubblewrap in even rounds and by Landlock
/// in odd ones (processes escape each differently).
fn start(dir: &Arc<tempfile::TempDir>, flags: &[&str], round: usize) -> Toold {
    let mode = if round.is_multiple_of(2) {
        "bwrap"
    } else {
        "landlock"
    };
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, format!("[sandbox]\nmode = \"{mode}\"\n")).unwrap();
    let mut flags = flags.to_vec();
    flags.extend(["--config", config.to_str().unwrap()]);
    Toold::start_with(dir.clone(), &flags)
}

async fn check_after_restart(toold: &Toold, ledger: &Mutex<Ledger>, round: usize) {
    let (sessions, received, unanswered) = {
        let mut ledger = ledger.lock().unwrap();
        let unanswered = std::mem::take(&mut ledger.unanswered);
        (ledger.sessions.clone(), ledger.received.clone(), unanswered)
    };
    every_received_result_has_its_row(toold, &received, round).await;
    no_session_is_lost(toold, &sessions, round).await;
    for batch in unanswered {
        let path = format!("/v1/sessions/{}/batches", batch.session);
        // A streamed batch named itself before it was cut off: before any retry it is
        // settled from its rows, or reported cut off, never `running`.
        if let Some(batch_id) = &batch.batch_id {
            let record = toold.get(&format!("{path}/{batch_id}")).await;
            assert_eq!(record.status, StatusCode::OK, "{}", record.body);
            assert_ne!(
                record.body["status"], "running",
                "round {round}: {}",
                record.body
            );
        }
        let retry = toold.post(&path, &batch.body).await;
        assert_eq!(
            retry.status,
            StatusCode::OK,
            "round {round}: the retry of keyed batch {} cut off: {}",
            batch.body,
            retry.body
        );
        let batch_id = retry.body["batch_id"].as_str().unwrap();
        if let Some(known) = &batch.batch_id {
            assert_eq!(batch_id, known, "the retry answers for the batch cut off");
        }
        let record = toold.get(&format!("{path}/{batch_id}")).await;
        assert_eq!(record.body["status"], "completed", "{}", record.body);
        let mut ledger = ledger.lock().unwrap();
        ledger.retried += 1;
        for result in retry.body["results"].as_array().unwrap() {
            let output = result["output"].as_str().unwrap_or_default();
            if output.contains("outcome was recorded") {
                ledger.unrecorded += 1;
            }
            ledger.received.push(traffic::Received {
                session: batch.session.clone(),
                batch_id: batch_id.to_owned(),
                call_id: result["id"].as_str().unwrap().to_owned(),
            });
        }
    }
}

async fn every_received_result_has_its_row(
    toold: &Toold,
    received: &[traffic::Received],
    round: usize,
) {
    let mut batches: Vec<(&str, &str)> = received
        .iter()
        .map(|r| (r.session.as_str(), r.batch_id.as_str()))
        .collect();
    batches.sort_unstable();
    batches.dedup();
    for (session, batch_id) in batches {
        let rows = toold
            .get(&format!("/v1/calls?session={session}&batch_id={batch_id}"))
            .await;
        assert_eq!(rows.status, StatusCode::OK, "{}", rows.body);
        let audited: Vec<&str> = rows.body["calls"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(|row| row["call_id"].as_str())
            .collect();
        for result in received
            .iter()
            .filter(|r| r.session == session && r.batch_id == batch_id)
        {
            assert!(
                audited.contains(&result.call_id.as_str()),
                "round {round}: call {} of batch {batch_id} was answered but has no audit row \
                 (rows: {audited:?})",
                result.call_id
            );
        }
    }
}

/// An open session is live again; a closed one (which `GET /v1/sessions/{id}` no longer
/// shows, by design) keeps its audit log; one whose close was cut off is either.
async fn no_session_is_lost(toold: &Toold, sessions: &[(String, SessionState)], round: usize) {
    let listed = toold.get("/v1/sessions").await;
    let live: Vec<&str> = listed.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    for (id, state) in sessions {
        let is_live = live.contains(&id.as_str());
        let info = toold.get(&format!("/v1/sessions/{id}")).await;
        let log = toold.get(&format!("/v1/calls?session={id}")).await;
        let lost = format!(
            "round {round}: session {id} ({state:?}): {} {}",
            info.body, log.body
        );
        assert_eq!(log.status, StatusCode::OK, "{lost}");
        let open = info.status == StatusCode::OK && info.body["closed"] == Value::Bool(false);
        match state {
            SessionState::Open => assert!(open && is_live, "{lost}"),
            SessionState::Closed => assert!(!open && !is_live, "{lost}"),
            SessionState::Closing => assert_eq!(open, is_live, "{lost}"),
        }
    }
}

/// Processes whose command line carries `marker`: the loop's shells and their children.
fn marked_processes(marker: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(marker).then_some((pid, line))
        })
        .collect()
}

async fn no_shell_outlives_the_daemon(marker: &str, round: usize) {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(10);
    loop {
        let left = marked_processes(marker);
        if left.is_empty() {
            return;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "round {round}: shells of the killed daemon are still running: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
