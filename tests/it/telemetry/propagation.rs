//! The context onward with traces off (no endpoint set): the caller's `traceparent` and
//! `tracestate` reach a command hook (`TRACEPARENT`, `TRACESTATE`), an HTTP hook (headers)
//! and the shell (`TRACEPARENT`) unchanged, and the audit row keeps its trace id; without
//! one, or with a malformed one, nothing is passed and the row's `trace_id` is null.

use std::sync::{Arc, Mutex};

use axum::http::HeaderMap;
use reqwest::StatusCode;
use serde_json::{Value, json};

use super::traces::{PARENT, TRACE, traceparent};
use crate::http::harness::Toold;

/// An HTTP hook answering 200 with nothing to say, keeping each request's trace headers.
async fn http_hook() -> (String, Arc<Mutex<Vec<(String, String)>>>) {
    let seen = Arc::new(Mutex::new(Vec::new()));
    let into = seen.clone();
    let route = axum::routing::post(move |headers: HeaderMap| {
        let into = into.clone();
        async move {
            let header = |name: &str| {
                headers
                    .get(name)
                    .map(|v| v.to_str().unwrap().to_owned())
                    .unwrap_or_default()
            };
            into.lock()
                .unwrap()
                .push((header("traceparent"), header("tracestate")));
            ""
        }
    });
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/hook", listener.local_addr().unwrap());
    tokio::spawn(async move {
        axum::serve(listener, axum::Router::new().route("/hook", route))
            .await
            .unwrap();
    });
    (url, seen)
}

async fn print_env(toold: &Toold, session: &str, call: &str, traceparent: Option<&str>) -> Value {
    let batch = json!({"calls": [{"id": call, "name": "bash",
        "input": {"command": "env"}}]});
    let mut post = toold
        .client
        .post(format!("{}/v1/sessions/{session}/batches", toold.base))
        .header("content-type", "application/json")
        .body(batch.to_string());
    if let Some(value) = traceparent {
        post = post
            .header("traceparent", value)
            .header("tracestate", "vendor=kept");
    }
    let reply = toold.send(post).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["results"][0].clone()
}

/// The trace variables a shell printed with `env`.
fn context_of(result: &Value) -> Vec<String> {
    assert_eq!(result["is_error"], false, "{result}");
    let output = result["output"].as_str().unwrap();
    let mut lines: Vec<String> = output
        .lines()
        .filter(|line| line.starts_with("TRACEPARENT=") || line.starts_with("TRACESTATE="))
        .map(str::to_owned)
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn hooks_and_shells_receive_the_callers_context_with_traces_off() {
    let (url, http_seen) = http_hook().await;
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let (hook, seen) =
        super::recording_hook(dir.path(), "%s|%s\\n", "\"$TRACEPARENT\" \"$TRACESTATE\"");
    let config = format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"bash\"\ncommand = \"sh {}\"\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"bash\"\nurl = \"{url}\"\n",
        hook.display()
    );
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, config).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let toold = Toold::start_with(dir, &["--config", &file]);
    let session = toold.session().await;
    let incoming = traceparent(TRACE, PARENT);

    let traced = print_env(&toold, &session, "traced", Some(&incoming)).await;
    assert_eq!(traced["is_error"], false, "{traced}");
    assert_eq!(
        context_of(&traced),
        [
            format!("TRACEPARENT={incoming}"),
            "TRACESTATE=vendor=kept".into()
        ]
    );
    let plain = print_env(&toold, &session, "plain", None).await;
    assert_eq!(context_of(&plain), Vec::<String>::new());
    let malformed = print_env(&toold, &session, "malformed", Some("00-not-a-trace-01")).await;
    assert_eq!(context_of(&malformed), Vec::<String>::new());

    let lines: Vec<String> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(str::to_owned)
        .collect();
    assert_eq!(
        lines,
        [format!("{incoming}|vendor=kept"), "|".into(), "|".into()]
    );
    let headers = http_seen.lock().unwrap().clone();
    assert_eq!(
        headers,
        [
            (incoming.clone(), "vendor=kept".to_owned()),
            (String::new(), String::new()),
            (String::new(), String::new())
        ]
    );

    let rows = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    let trace_ids: Vec<&Value> = rows.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| &row["trace_id"])
        .collect();
    assert_eq!(trace_ids, [&json!(TRACE), &Value::Null, &Value::Null]);
}
