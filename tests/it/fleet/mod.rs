//! Two real daemons on one Postgres schema (`TOOLD_TEST_POSTGRES_URL`): events of a batch run
//! on A reach a subscriber on B in order, across a reconnect; a result offloaded on A reads in
//! full from B; a batch for A's session sent to B is refused naming A; killing A mid-batch
//! leaves its calls marked interrupted, seen from B, which adopts the session. Outside CI
//! without the variable each test skips with a note; in CI a missing server fails.
//!
//! A module of the one test binary, not a process of its own: the daemons are child processes
//! on ports and directories of their own, and the schema is the test's own, so nothing here
//! is shared with the tests running beside it. Forwarding within a fleet that has a secret:
//! `forwarding` (daemon to daemon, HTTP and gRPC, the hop's secret, placement), `balancer`
//! (three daemons behind haproxy) and `hop_connections` (the hop's pooled connections against
//! a scripted owner, no Postgres).

mod balancer;
mod forwarding;
mod hop_connections;

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::http::harness::{Frame, SseReader, Toold};
use crate::support::postgres::{TestSchema, postgres_url};

/// Heartbeats every 200 ms; silent for 2 s means stopped (the kill test waits for that).
const FLEET_CONFIG: &str = "[server]\nheartbeat_interval_ms = 200\nnode_timeout_ms = 2000\n";

/// Two daemons and their schema, dropped in that order (the schema after both are killed).
struct Fleet {
    a: Toold,
    b: Toold,
    _schema: TestSchema,
}

/// A daemon over a directory of its own (its own node id) on the database `url`.
fn daemon(url: &str) -> Toold {
    daemon_with(url, FLEET_CONFIG)
}

/// A daemon as [`daemon`] with the settings file `config`.
fn daemon_with(url: &str, config: &str) -> Toold {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, config).unwrap();
    let config = file;
    Toold::start_with(
        dir.clone(),
        &["--database-url", url, "--config", config.to_str().unwrap()],
    )
}

async fn fleet() -> Option<Fleet> {
    let schema = TestSchema::create(&postgres_url("fleet tests")?).await;
    let url = schema.url();
    Some(Fleet {
        a: daemon(&url),
        b: daemon(&url),
        _schema: schema,
    })
}

pub(crate) fn echo_batch(n: usize) -> Value {
    json!({"calls": (0..n)
        .map(|i| json!({"id": format!("c{i}"), "name": "bash", "input": {"command": format!("echo {i}")}}))
        .collect::<Vec<_>>()})
}

/// Frames until (and with) the `batch:end` of a batch.
async fn until_batch_end(stream: &mut SseReader) -> Vec<Frame> {
    let mut frames = Vec::new();
    loop {
        let frame = stream.next().await.expect("the stream goes on");
        let end = frame.event == "batch:end";
        frames.push(frame);
        if end {
            return frames;
        }
    }
}

fn ids(frames: &[Frame]) -> Vec<u64> {
    frames
        .iter()
        .map(|f| f.id.as_deref().expect("an id").parse().unwrap())
        .collect()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_subscriber_on_b_receives_the_events_of_a_batch_on_a_in_order_across_a_reconnect() {
    let Some(mut fleet) = fleet().await else {
        return;
    };
    let Fleet { a, b, .. } = &mut fleet;
    let session = a.session().await;
    let events = format!("/v1/sessions/{session}/events");
    let mut on_b = b.sse(&events, None, None).await;
    let batches = format!("/v1/sessions/{session}/batches");
    assert_eq!(
        a.post(&batches, &echo_batch(3)).await.status,
        StatusCode::OK
    );
    // B's subscription starts at what B had relayed, so it may begin with session:start.
    let first = until_batch_end(&mut on_b).await;
    let count = |frames: &[Frame], event: &str| frames.iter().filter(|f| f.event == event).count();
    assert_eq!(count(&first, "batch:start"), 1, "{first:?}");
    for event in ["tool:queued", "tool:pre", "tool:post"] {
        assert_eq!(count(&first, event), 3, "{event} in {first:?}");
    }
    // A second batch: B's subscriber reads two events, goes away, and resumes after them.
    assert_eq!(
        a.post(&batches, &echo_batch(2)).await.status,
        StatusCode::OK
    );
    let mut second = vec![on_b.next().await.unwrap(), on_b.next().await.unwrap()];
    drop(on_b);
    let resume_after = *ids(&second).last().unwrap();
    let mut resumed = b.sse(&events, None, Some(resume_after)).await;
    second.extend(until_batch_end(&mut resumed).await);
    assert_eq!(second[0].event, "batch:start", "{second:?}");
    assert_eq!(count(&second, "tool:post"), 2, "{second:?}");
    // What B delivered is exactly what the store holds, replayed from A, in seq order.
    let seen: Vec<u64> = ids(&first).into_iter().chain(ids(&second)).collect();
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
    let mut from_a = a.sse(&events, None, Some(0)).await;
    let mut stored = until_batch_end(&mut from_a).await;
    stored.extend(until_batch_end(&mut from_a).await);
    let stored = ids(&stored);
    let from = stored
        .iter()
        .position(|seq| *seq == seen[0])
        .expect("B's first event is stored");
    assert_eq!(stored[from..], seen[..], "no loss, no duplicate");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_offloaded_on_a_reads_in_full_from_b_and_so_do_audit_rows() {
    let Some(mut fleet) = fleet().await else {
        return;
    };
    let Fleet { a, b, .. } = &mut fleet;
    let session = a.session().await;
    let reply = a
        .post(
            &format!("/v1/sessions/{session}/batches"),
            &json!({"calls": [{"id": "big", "name": "bash", "input": {"command": "seq 1 300000"}}]}),
        )
        .await;
    let offloaded = &reply.body["results"][0]["offloaded"];
    let result_id = offloaded["result_id"].as_str().expect("offloaded");
    let total = offloaded["total_chars"].as_u64().unwrap();
    let mut content = String::new();
    while (content.len() as u64) < total {
        let page = b
            .get(&format!(
                "/v1/results/{result_id}?offset={}&limit=1000000",
                content.len()
            ))
            .await;
        assert_eq!(page.status, StatusCode::OK, "{}", page.body);
        content.push_str(page.body["content"].as_str().unwrap());
    }
    let expected: String = (1..=300_000).map(|n| format!("{n}\n")).collect();
    assert!(content == expected, "the whole output, read from B");
    let calls = b.get(&format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(calls.body["calls"][0]["call_id"], "big", "{}", calls.body);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_batch_for_as_session_sent_to_b_is_refused_naming_a() {
    let Some(mut fleet) = fleet().await else {
        return;
    };
    let Fleet { a, b, .. } = &mut fleet;
    let session = a.session().await;
    let on_a = a.get(&format!("/v1/sessions/{session}")).await;
    let owner = on_a.body["owner"].as_str().unwrap().to_owned();
    assert_eq!(on_a.body["owner_address"], a.base.as_str());
    // B describes the session with the same owner.
    let on_b = b.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(on_b.status, StatusCode::OK, "{}", on_b.body);
    assert_eq!(
        (&on_b.body["owner"], &on_b.body["owner_address"]),
        (&on_a.body["owner"], &on_a.body["owner_address"])
    );
    let refused = b
        .post(&format!("/v1/sessions/{session}/batches"), &echo_batch(1))
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    let message = refused.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&owner) && message.contains(&a.base),
        "{message}"
    );
    // Nothing ran on B.
    let calls = a.get(&format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(calls.body["calls"], json!([]));
    // An unknown session is still unknown.
    let unknown = b
        .post("/v1/sessions/sess_nope/batches", &echo_batch(1))
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn killing_a_mid_batch_leaves_its_calls_interrupted_seen_from_b_which_adopts_the_session() {
    let Some(mut fleet) = fleet().await else {
        return;
    };
    let Fleet { a, b, .. } = &mut fleet;
    let created = a
        .post(
            "/v1/sessions",
            &json!({"permission_mode": "danger_full_access"}),
        )
        .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let events = format!("/v1/sessions/{session}/events");
    let mut on_b = b.sse(&events, None, None).await;
    // A long call that writes (so it runs alone), then one queued behind it.
    let body = json!({"calls": [
        {"id": "long", "name": "bash", "input": {"command": "sleep 60 && touch done"}},
        {"id": "next", "name": "bash", "input": {"command": "echo never"}},
    ]});
    let batches = format!("/v1/sessions/{session}/batches");
    let request = a
        .client
        .post(format!("{}{batches}", a.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(&body).unwrap())
        .send();
    let running = tokio::spawn(request);
    // Once B has seen the long call start, its events are in the store: kill A.
    loop {
        let frame = on_b.next().await.expect("events from A");
        if frame.event == "tool:pre" && frame.data["call_id"] == "long" {
            break;
        }
    }
    a.kill();
    assert!(running.await.unwrap().is_err(), "A died mid-batch");
    // B notices A's silence, marks its calls interrupted and adopts the session.
    let calls = format!("/v1/sessions/{session}/calls");
    let rows = tokio::time::timeout(Duration::from_secs(60), async {
        loop {
            let reply = b.get(&calls).await;
            let rows = reply.body["calls"].as_array().cloned().unwrap_or_default();
            if rows.len() == 2 {
                return rows;
            }
            tokio::time::sleep(Duration::from_millis(100)).await;
        }
    })
    .await
    .expect("B marks A's calls within the guard");
    for (row, id) in rows.iter().zip(["long", "next"]) {
        assert_eq!(row["call_id"], id);
        assert_eq!(row["interrupted"], true, "{row}");
        assert_eq!(row["error_kind"], "cancelled");
        assert_ne!(row["node"], Value::Null);
    }
    assert_eq!(
        rows[0]["input"],
        json!({"command": "sleep 60 && touch done"})
    );
    assert_eq!(rows[1]["input"], Value::Null, "never started");
    let described = b.get(&format!("/v1/sessions/{session}")).await;
    assert_eq!(
        described.body["owner_address"],
        b.base.as_str(),
        "{}",
        described.body
    );
    let reply = b.post(&batches, &echo_batch(1)).await;
    assert_eq!(
        reply.status,
        StatusCode::OK,
        "B runs the adopted session: {}",
        reply.body
    );
    assert_eq!(reply.body["results"][0]["output"], "0\n");
}
