//! Three real daemons on one Postgres schema behind a real load balancer (Debian's `haproxy`,
//! round-robin, started here with a configuration of the test's own), spoken to only through
//! the balancer: sessions, 200 batches (plain, streamed over SSE, keyed), an approval, an
//! interrupt and an MCP session without one error; then the daemon running a busy session is
//! killed mid-batch, and the client's retry with the same idempotency key (and an event stream
//! resumed with `Last-Event-ID`) completes on the adopter, every returned result with its
//! audit row, and the session goes on. Outside CI without haproxy (or Postgres) it skips with
//! a note; in CI a missing one fails (`.ci/run` installs haproxy).

use std::process::{Child, Command, Stdio};
use std::sync::Arc;
use std::time::{Duration, Instant};

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::forwarding::with_secret;
use super::{daemon_with, echo_batch};
use crate::http::harness::{Frame, Reply, Toold};
use crate::mcp::McpClient;
use crate::support::postgres::{TestSchema, postgres_url};

/// How long anything here may take before the test fails (a guard, not a measurement).
const GUARD: Duration = Duration::from_secs(90);

/// haproxy in the foreground (`-db`), killed when dropped.
struct Haproxy {
    child: Child,
    base: String,
    _dir: tempfile::TempDir,
}

impl Drop for Haproxy {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// The haproxy binary, or `None` (skip) outside CI when it is not installed.
fn haproxy_binary() -> Option<&'static str> {
    let found = Command::new("haproxy")
        .arg("-v")
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|status| status.success());
    match found {
        true => Some("haproxy"),
        false => {
            crate::support::skip_unless_ci("haproxy is not installed (the load-balancer test)");
            None
        }
    }
}

fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// Round-robin over `daemons`, retrying a failed connection on another server, with the
/// long timeouts SSE needs (a stream is quiet between keep-alives).
fn haproxy_config(port: u16, daemons: &[&Toold]) -> String {
    let servers: String = daemons
        .iter()
        .enumerate()
        .map(|(n, daemon)| {
            let address = daemon.base.trim_start_matches("http://");
            format!("  server d{n} {address} check inter 300ms fall 2 rise 2\n")
        })
        .collect();
    format!(
        "global\n  maxconn 1024\n\
         defaults\n  mode http\n  timeout connect 2s\n  timeout client 300s\n\
         \x20 timeout server 300s\n  timeout http-keep-alive 10s\n  retries 3\n\
         \x20 option redispatch\n  retry-on conn-failure\n\
         frontend fleet\n  bind 127.0.0.1:{port}\n  default_backend toold\n\
         backend toold\n  balance roundrobin\n  option httpchk GET /healthz\n{servers}"
    )
}

async fn start_haproxy(binary: &str, daemons: &[&Toold]) -> Haproxy {
    let dir = tempfile::tempdir().unwrap();
    let port = free_port();
    let config = dir.path().join("haproxy.cfg");
    std::fs::write(&config, haproxy_config(port, daemons)).unwrap();
    let child = Command::new(binary)
        .arg("-f")
        .arg(&config)
        .arg("-db")
        .stdout(Stdio::null())
        .spawn()
        .expect("haproxy starts");
    let proxy = Haproxy {
        child,
        base: format!("http://127.0.0.1:{port}"),
        _dir: dir,
    };
    let started = Instant::now();
    loop {
        let ready = reqwest::get(format!("{}/healthz", proxy.base)).await;
        if ready.is_ok_and(|reply| reply.status().is_success()) {
            return proxy;
        }
        assert!(
            started.elapsed() < GUARD,
            "haproxy answers within the guard"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

struct Fleet {
    daemons: Vec<Toold>,
    lb: Toold,
    _haproxy: Haproxy,
    _schema: TestSchema,
}

async fn fleet_behind_haproxy() -> Option<Fleet> {
    let binary = haproxy_binary()?;
    let schema = TestSchema::create(&postgres_url("load-balancer test")?).await;
    let url = schema.url();
    let daemons: Vec<Toold> = (0..3)
        .map(|_| daemon_with(&url, &with_secret("")))
        .collect();
    let haproxy = start_haproxy(binary, &daemons.iter().collect::<Vec<_>>()).await;
    let lb = Toold::at(&haproxy.base, Arc::new(tempfile::tempdir().unwrap()));
    Some(Fleet {
        daemons,
        lb,
        _haproxy: haproxy,
        _schema: schema,
    })
}

async fn create(lb: &Toold, body: Value) -> String {
    let reply = lb.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// Batch `n` of session `session`: plain, streamed or keyed by `n % 3`; its one output.
async fn run_batch(lb: &Toold, session: &str, n: usize) -> String {
    let path = format!("/v1/sessions/{session}/batches");
    let call =
        json!({"id": format!("c{n}"), "name": "bash", "input": {"command": format!("echo {n}")}});
    match n % 3 {
        0 => {
            let reply = lb.post(&path, &json!({"calls": [call]})).await;
            assert_eq!(reply.status, StatusCode::OK, "batch {n}: {}", reply.body);
            reply.body["results"][0]["output"]
                .as_str()
                .unwrap()
                .to_owned()
        }
        1 => {
            let mut stream = lb.sse(&path, Some(&json!({"calls": [call]})), None).await;
            let mut frames = Vec::new();
            while let Some(frame) = stream.next().await {
                if frame.event != "tool:progress" {
                    frames.push(frame);
                }
            }
            let kinds: Vec<&str> = frames.iter().map(|f| f.event.as_str()).collect();
            assert_eq!(
                kinds,
                ["result", "done"],
                "batch {n}: the stream ends after done"
            );
            let result = &frames[0];
            result.data["output"].as_str().unwrap().to_owned()
        }
        _ => {
            let body = json!({"calls": [call], "idempotency_key": format!("key-{n}")});
            let reply = lb.post(&path, &body).await;
            assert_eq!(reply.status, StatusCode::OK, "batch {n}: {}", reply.body);
            reply.body["results"][0]["output"]
                .as_str()
                .unwrap()
                .to_owned()
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn three_daemons_behind_haproxy_answer_everything_and_survive_the_owner_of_a_busy_session_dying()
 {
    let Some(fleet) = fleet_behind_haproxy().await else {
        return;
    };
    let lb = &fleet.lb;
    // Round-robin spreads the creates: each daemon runs one session.
    let mut sessions = Vec::new();
    for _ in 0..3 {
        sessions.push(create(lb, json!({})).await);
    }
    let mut owners: Vec<String> = Vec::new();
    for session in &sessions {
        let described = lb.get(&format!("/v1/sessions/{session}")).await;
        owners.push(described.body["owner"].as_str().unwrap().to_owned());
    }
    owners.sort();
    owners.dedup();
    assert_eq!(owners.len(), 3, "each daemon created one session");
    // Three batches in a row (which reach the three daemons in turn) for one session, then the
    // next: two of every three are forwarded, whatever the balancer's starting point.
    for n in 0..200 {
        let output = run_batch(lb, &sessions[(n / 3) % 3], n).await;
        assert_eq!(output, format!("{n}\n"), "batch {n}");
    }
    let forwarded = forwarded_batches(&fleet.daemons).await;
    assert!(
        forwarded >= 100,
        "{forwarded} of 200 batches were forwarded"
    );
    approval_through(lb).await;
    interrupt_through(lb).await;
    mcp_through(lb, &sessions[0]).await;
    owner_killed_mid_batch(fleet).await;
}

/// Batch requests the daemons counted beyond the 200 sent: each forwarded one is counted by
/// the daemon it reached and by the owner.
async fn forwarded_batches(daemons: &[Toold]) -> u64 {
    let mut counted = 0;
    for daemon in daemons {
        let (_, metrics) = daemon.get_text("/metrics").await;
        counted += metrics
            .lines()
            .filter(|line| {
                line.starts_with("toold_http_requests_total")
                    && line.contains("/v1/sessions/{id}/batches\"")
                    && line.contains("method=\"POST\"")
            })
            .filter_map(|line| line.rsplit(' ').next()?.parse::<f64>().ok())
            .sum::<f64>() as u64;
    }
    counted.saturating_sub(200)
}

async fn approval_through(lb: &Toold) {
    let session = create(
        lb,
        json!({"interactive": true, "rules": {"ask": ["bash(touch:*)"]}}),
    )
    .await;
    let path = format!("/v1/sessions/{session}/batches");
    let body =
        json!({"calls": [{"id": "ask", "name": "bash", "input": {"command": "touch asked"}}]});
    let waiting = post_in_background(lb, &path, &body);
    let pending = crate::http::approvals::pending(lb, &session).await;
    let approval = pending["id"].as_str().unwrap();
    let resolved =
        crate::http::approvals::resolve(lb, &session, approval, json!({"decision": "allow"})).await;
    assert_eq!(resolved.status, StatusCode::OK, "{}", resolved.body);
    let (status, answer) = waiting.await.unwrap().expect("the batch answers");
    assert_eq!(status, StatusCode::OK, "{answer}");
    assert_eq!(answer["results"][0]["is_error"], false, "{answer}");
}

async fn interrupt_through(lb: &Toold) {
    let session = create(lb, json!({"permission_mode": "danger_full_access"})).await;
    let mut events = lb
        .sse(&format!("/v1/sessions/{session}/events"), None, None)
        .await;
    let body = json!({"calls": [{"id": "long", "name": "bash", "input": {"command": "sleep 60"}}]});
    let running = post_in_background(lb, &format!("/v1/sessions/{session}/batches"), &body);
    wait_for(&mut events, "tool:pre", "long").await;
    let interrupted = lb
        .post(&format!("/v1/sessions/{session}/interrupt"), &json!({}))
        .await;
    assert_eq!(interrupted.status, StatusCode::OK, "{}", interrupted.body);
    let (_, answer) = running.await.unwrap().expect("the batch answers");
    assert_eq!(answer["results"][0]["error_kind"], "cancelled", "{answer}");
}

async fn mcp_through(lb: &Toold, session: &str) {
    let path = format!("/v1/sessions/{session}/mcp");
    // 2026-07-28, stateless: every request stands alone.
    let mut stateless = McpClient::new(lb, &path);
    let called = stateless
        .call_tool("bash", json!({"command": "echo stateless"}))
        .await;
    assert_eq!(called.text_content(), "stateless\n");
    // 2025-11-25: the MCP session lives on the owner, and every request reaches it.
    let mut legacy = McpClient::new(lb, &path);
    legacy.initialize().await;
    for n in 0..3 {
        let called = legacy
            .call_tool("bash", json!({"command": format!("echo legacy {n}")}))
            .await;
        assert_eq!(called.text_content(), format!("legacy {n}\n"));
    }
}

/// POSTs `body` to `path` through `lb` in a task of its own: the answer's status and JSON body
/// (`Null` when it is not JSON), or the error of a request cut off.
fn post_in_background(
    lb: &Toold,
    path: &str,
    body: &Value,
) -> tokio::task::JoinHandle<reqwest::Result<(StatusCode, Value)>> {
    let request = lb
        .client
        .post(format!("{}{path}", lb.base))
        .header("content-type", "application/json")
        .body(serde_json::to_vec(body).unwrap());
    tokio::spawn(async move {
        let response = request.send().await?;
        let status = response.status();
        let bytes = response.bytes().await?;
        Ok((
            status,
            serde_json::from_slice(&bytes).unwrap_or(Value::Null),
        ))
    })
}

/// The next frame of `stream` of type `event` for call `call`.
async fn wait_for(stream: &mut crate::http::harness::SseReader, event: &str, call: &str) -> Frame {
    loop {
        let frame = stream.next().await.expect("events go on");
        if frame.event == event && frame.data["call_id"] == call {
            return frame;
        }
    }
}

async fn owner_killed_mid_batch(mut fleet: Fleet) {
    let lb = &fleet.lb;
    let session = create(lb, json!({"permission_mode": "danger_full_access"})).await;
    let described = lb.get(&format!("/v1/sessions/{session}")).await;
    let owner_address = described.body["owner_address"].as_str().unwrap().to_owned();
    let owner = fleet
        .daemons
        .iter()
        .position(|daemon| daemon.base == owner_address)
        .expect("the owner is one of the three");
    // A client following the session's events through the balancer, as a dashboard would.
    let events = format!("/v1/sessions/{session}/events");
    let mut watching = lb.sse(&events, None, None).await;
    let path = format!("/v1/sessions/{session}/batches");
    let body = json!({"idempotency_key": "busy-1", "calls": [
        {"id": "long", "name": "bash", "input": {"command": "sleep 60 && touch done"}},
        {"id": "next", "name": "bash", "input": {"command": "echo never"}},
    ]});
    let running = post_in_background(lb, &path, &body);
    let started = wait_for(&mut watching, "tool:pre", "long").await;
    let last_seen: u64 = started.id.as_deref().unwrap().parse().unwrap();
    fleet.daemons[owner].kill();
    let cut = running.await.unwrap();
    assert!(
        !cut.as_ref()
            .is_ok_and(|(status, _)| *status == StatusCode::OK),
        "the batch did not complete on a daemon killed mid-batch"
    );
    // The retry with the same key, through the balancer, until the adopter answers: meanwhile
    // only 503 with Retry-After (nobody runs the session yet).
    let lb = &fleet.lb;
    let deadline = Instant::now() + GUARD;
    let answer: Reply = loop {
        let reply = lb.post(&path, &body).await;
        if reply.status == StatusCode::OK {
            break reply;
        }
        assert_eq!(
            reply.status,
            StatusCode::SERVICE_UNAVAILABLE,
            "{}",
            reply.body
        );
        let wait: u64 = reply.headers["retry-after"]
            .to_str()
            .unwrap()
            .parse()
            .unwrap();
        assert!(Instant::now() < deadline, "adopted within the guard");
        tokio::time::sleep(Duration::from_secs(wait).min(Duration::from_millis(500))).await;
    };
    let results = answer.body["results"].as_array().unwrap().clone();
    assert_eq!(results.len(), 2, "{}", answer.body);
    let batch_id = answer.body["batch_id"].as_str().unwrap();
    let rows = lb.get(&format!("/v1/sessions/{session}/calls")).await.body["calls"]
        .as_array()
        .cloned()
        .unwrap();
    for result in &results {
        assert!(
            rows.iter()
                .any(|row| row["call_id"] == result["id"] && row["batch_id"] == batch_id),
            "{result} has its audit row in {rows:?}"
        );
        assert_eq!(result["error_kind"], "cancelled", "{result}");
    }
    let again = lb.post(&path, &body).await;
    assert_eq!(
        again.body, answer.body,
        "later retries replay the same answer"
    );
    // The session goes on, on the adopter.
    let described = lb.get(&format!("/v1/sessions/{session}")).await;
    assert_ne!(described.body["owner_address"], owner_address.as_str());
    let reply = lb.post(&path, &echo_batch(1)).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["results"][0]["output"], "0\n");
    // An event stream resumed through the balancer after the last event it saw (whichever
    // daemon served it before) goes on in order up to that batch's end.
    let mut resumed = lb.sse(&events, None, Some(last_seen)).await;
    let mut seen = vec![last_seen];
    loop {
        let frame = resumed
            .next()
            .await
            .expect("the events after the last seen");
        seen.push(frame.id.as_deref().unwrap().parse().unwrap());
        if frame.event == "batch:end" && frame.data["batch_id"] == reply.body["batch_id"] {
            break;
        }
    }
    assert!(seen.windows(2).all(|w| w[0] < w[1]), "in order: {seen:?}");
}
