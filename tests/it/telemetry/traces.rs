//! The real daemon exporting to a real OTLP receiver, over gRPC and over HTTP/protobuf: a
//! batch sent with a `traceparent` becomes one tree under it (request → batch →
//! `execute_tool {tool}` → hook, approval wait, process), with the GenAI attributes, an
//! error span's `error.type`, and the trace id in the audit rows and the calls' events. The
//! daemon is stopped gracefully before the spans are read: with the SDK's 5 s export delay,
//! they arrive only because shutdown flushes them.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::receiver::{ExportedSpan, Protocol, Receiver, attribute, children, find};
use crate::http::approvals::{pending, resolve};
use crate::http::harness::Toold;
use crate::support::deadline::{OutputWithin, STEP};

pub const TRACE: &str = "4bf92f3577b34da6a3ce929d0e0e4736";
pub const PARENT: &str = "00f067aa0ba902b7";

pub fn traceparent(trace: &str, parent: &str) -> String {
    format!("00-{trace}-{parent}-01")
}

/// `printf` asks a person; a pre hook on bash appends the `TRACEPARENT` it sees to `seen`.
/// (The shell prints its context with `env`: a command expanding a variable would need more
/// than the session's mode.)
fn config(hook: &std::path::Path) -> String {
    format!(
        "[permissions]\nask = [\"bash(printf:*)\"]\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"bash\"\ncommand = \"sh {}\"\n",
        hook.display()
    )
}

/// A daemon exporting to `receiver`, with the hook writing to the returned file.
pub fn start(receiver: &Receiver) -> (Toold, std::path::PathBuf) {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let (hook, seen) = super::recording_hook(dir.path(), "%s\\n", "\"$TRACEPARENT\"");
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, config(&hook)).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    (Toold::start_with_env(dir, &["--config", &file], &env), seen)
}

/// Runs the batch (its approval allowed on the way) with the caller's `traceparent`.
async fn run_batch(toold: &Toold, session: &str) -> Value {
    let batch = json!({"calls": [
        {"id": "c1", "name": "bash", "input": {"command": "env"}},
        {"id": "c2", "name": "bash", "input": {"command": "printf approved"}},
        {"id": "c3", "name": "read_file", "input": {"file_path": "missing.txt"}},
    ]});
    let post = toold
        .client
        .post(format!("{}/v1/sessions/{session}/batches", toold.base))
        .header("traceparent", traceparent(TRACE, PARENT))
        .header("tracestate", "vendor=kept")
        .header("content-type", "application/json")
        .body(batch.to_string());
    let answered = toold.send(post);
    let approve = async {
        let approval = pending(toold, session).await;
        let id = approval["id"].as_str().unwrap();
        let reply = resolve(toold, session, id, json!({"decision": "allow"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    };
    let (reply, ()) = tokio::join!(answered, approve);
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

/// The `tool:post`/`tool:error` events of the session, replayed from the store.
async fn call_events(toold: &Toold, session: &str) -> Vec<Value> {
    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    let mut found = Vec::new();
    while found.len() < 3 {
        let frame = events.next().await.expect("the session's events");
        if frame.event == "tool:post" || frame.event == "tool:error" {
            found.push(frame.data);
        }
    }
    found
}

async fn a_batch_is_one_tree_under_the_callers_traceparent(protocol: Protocol) {
    let receiver = Receiver::start(protocol).await;
    let (toold, seen) = start(&receiver);
    let session = toold
        .session_with(&json!({"interactive": true, "permission_mode": "workspace_write"}))
        .await;
    let answer = run_batch(&toold, &session).await;
    let results = answer["results"].as_array().unwrap();
    assert_eq!(results[0]["is_error"], false, "{answer}");
    assert_eq!(results[1]["is_error"], false, "{answer}");
    assert_eq!(results[2]["is_error"], true, "{answer}");
    let error_kind = results[2]["error_kind"].as_str().unwrap().to_owned();
    let batch_id = answer["batch_id"].as_str().unwrap().to_owned();

    // The audit rows and the calls' events keep the caller's trace.
    let rows = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    let rows = rows.body["calls"].as_array().unwrap().clone();
    assert_eq!(rows.len(), 3);
    assert!(rows.iter().all(|row| row["trace_id"] == TRACE), "{rows:?}");
    let events = call_events(&toold, &session).await;
    assert!(
        events
            .iter()
            .all(|event| event["data"]["trace_id"] == TRACE),
        "{events:?}"
    );

    let seen = std::fs::read_to_string(seen).unwrap();
    // Off the test's runtime thread: the receiver runs on it while the daemon flushes.
    let stopped = tokio::task::spawn_blocking(move || toold.terminate())
        .await
        .unwrap();
    assert!(stopped.success(), "a graceful stop exits 0");
    let spans = receiver
        .spans_until(|spans| spans.iter().any(|s| s.name == "batch"))
        .await;
    let tree: Vec<ExportedSpan> = spans.into_iter().filter(|s| s.trace_id == TRACE).collect();

    let route = "POST /v1/sessions/{id}/batches";
    let request = find(&tree, route, None);
    assert_eq!(request.parent_span_id, PARENT);
    assert_eq!(request.kind, "SPAN_KIND_SERVER");
    assert_eq!(request.trace_state, "vendor=kept");
    assert_eq!(
        attribute(request, "http.response.status_code").as_deref(),
        Some("200")
    );
    let batch = find(&tree, "batch", None);
    assert_eq!(batch.parent_span_id, request.span_id);
    assert_eq!(attribute(batch, "toold.batch.id"), Some(batch_id.clone()));
    assert_eq!(attribute(batch, "toold.session.id"), Some(session.clone()));

    let call = |id: &str, tool: &str| -> ExportedSpan {
        let span = find(
            &tree,
            &format!("execute_tool {tool}"),
            Some(("gen_ai.tool.call.id", id)),
        );
        assert_eq!(span.parent_span_id, batch.span_id, "{id}");
        for (key, value) in [
            ("gen_ai.operation.name", "execute_tool"),
            ("gen_ai.tool.name", tool),
            ("gen_ai.tool.type", "function"),
            ("toold.session.id", session.as_str()),
            ("toold.batch.id", batch_id.as_str()),
        ] {
            assert_eq!(attribute(span, key).as_deref(), Some(value), "{id} {key}");
        }
        // Content stays out of spans unless `capture_content`.
        assert_eq!(attribute(span, "gen_ai.tool.call.arguments"), None);
        span.clone()
    };
    let echo = call("c1", "bash");
    let approved = call("c2", "bash");
    let failed = call("c3", "read_file");

    assert_eq!(
        attribute(&echo, "toold.decided_by").as_deref(),
        Some("mode")
    );
    assert_eq!(attribute(&echo, "error.type"), None);
    let hook = find(&children(&tree, &echo), "hook PreToolUse", None).clone();
    let process = children(&tree, &echo)
        .into_iter()
        .find(|span| span.name.starts_with("process spawn"))
        .expect("the shell's process span");
    // The hook and the shell were handed their own spans as parent.
    let expected = traceparent(TRACE, &hook.span_id);
    assert!(
        seen.lines().any(|line| line == expected),
        "{seen} {expected}"
    );
    let output = results[0]["output"].as_str().unwrap();
    let expected = format!("TRACEPARENT={}", traceparent(TRACE, &process.span_id));
    assert!(output.lines().any(|line| line == expected), "{output}");
    assert!(
        output.lines().any(|line| line == "TRACESTATE=vendor=kept"),
        "{output}"
    );

    assert_eq!(
        attribute(&approved, "toold.decided_by").as_deref(),
        Some("approver")
    );
    let waits = children(&tree, &approved);
    let wait = find(&waits, "approval wait", None);
    assert_eq!(
        attribute(wait, "toold.approval.outcome").as_deref(),
        Some("resolved")
    );

    assert_eq!(attribute(&failed, "error.type"), Some(error_kind));
    let status = failed.status.as_ref().expect("an error span has a status");
    assert_eq!(status.code, "STATUS_CODE_ERROR");

    if protocol == Protocol::HttpProtobuf {
        let services = receiver.services.lock().unwrap().clone();
        assert!(
            services.iter().all(|s| s == "toold-under-test"),
            "{services:?}"
        );
        let keys = receiver.api_keys.lock().unwrap().clone();
        assert!(
            !keys.is_empty() && keys.iter().all(|k| k == "the key"),
            "{keys:?}"
        );
    }
}

/// Exporter settings that cannot work stop the start, naming the variable or the endpoint.
#[test]
fn bad_exporter_settings_stop_the_start() {
    let refused = |env: &[(&str, &str)]| {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("projects")).unwrap();
        let output = crate::support::daemon::command(dir.path(), &[])
            .envs(env.iter().copied())
            .output_within(STEP, "toold serve")
            .expect("toold runs");
        assert!(!output.status.success(), "started with {env:?}");
        String::from_utf8_lossy(&output.stderr).into_owned()
    };
    let endpoint = ("OTEL_EXPORTER_OTLP_ENDPOINT", "http://127.0.0.1:9");
    let stderr = refused(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", "no-value")]);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_HEADERS"), "{stderr}");
    let stderr = refused(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", "a=b%0d%0ac: d")]);
    assert!(stderr.contains("not a valid header"), "{stderr}");
    let stderr = refused(&[endpoint, ("OTEL_EXPORTER_OTLP_TIMEOUT", "soon")]);
    assert!(stderr.contains("OTEL_EXPORTER_OTLP_TIMEOUT"), "{stderr}");
    let stderr = refused(&[endpoint, ("OTEL_EXPORTER_OTLP_HEADERS", "content-length=1")]);
    assert!(stderr.contains("set by the exporter"), "{stderr}");
    let stderr = refused(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", "https://127.0.0.1:9"),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
    ]);
    assert!(stderr.contains("TLS"), "{stderr}");
}

#[tokio::test]
async fn a_batch_is_one_tree_under_the_callers_traceparent_over_grpc() {
    a_batch_is_one_tree_under_the_callers_traceparent(Protocol::Grpc).await;
}

#[tokio::test]
async fn a_batch_is_one_tree_under_the_callers_traceparent_over_http_protobuf() {
    a_batch_is_one_tree_under_the_callers_traceparent(Protocol::HttpProtobuf).await;
}
