//! The `agent` tool end to end (issue 22): the real daemon with agent A's token, and
//! `examples/python/agent_provider.py` as the `agent` provider (grpcio from
//! `TOOLD_TEST_PYTHON`; skipped without it outside CI). A batch calls `agent`; the provider
//! runs its scripted plan (a `write_file`, a `bash`, a write outside the workspace) in the
//! child session with the child token; the parent's SSE stream shows the child's events
//! tagged with the child; the wider call is denied; the child token is refused on the parent
//! and for creating a session; interrupting the parent cancels the child's running `bash`.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use crate::auth::AGENT_A;
use crate::http::harness::{SseReader, Toold};
use crate::providers::{Provider, daemon, ok_output, tool_names};

/// `agent_provider.py` registered as agent A with `args`; `None` without Python.
async fn agent_provider(toold: &Toold, args: &[&str]) -> Option<Provider> {
    let started = Provider::start_script("agent_provider.py", toold, AGENT_A, args).await?;
    Some(started.expect("the agent provider registers"))
}

/// Frames of `stream` up to the first that `last` accepts; every frame read.
async fn until(stream: &mut SseReader, last: impl Fn(&Value) -> bool) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let frame = stream.next().await.expect("the stream stays open");
        let done = last(&frame.data);
        seen.push(frame.data);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn the_agent_tool_runs_its_plan_in_a_child_session() {
    let toold = daemon("");
    let parent = toold.session().await;
    assert!(
        !tool_names(&toold, &parent)
            .await
            .contains(&"agent".to_owned())
    );
    let Some(mut provider) = agent_provider(&toold, &["--wider", "--probe"]).await else {
        return;
    };
    assert!(
        tool_names(&toold, &parent)
            .await
            .contains(&"agent".to_owned())
    );
    let mut events = toold
        .sse(&format!("/v1/sessions/{parent}/events"), None, None)
        .await;

    let input = json!({"description": "note", "prompt": "hello from the parent"});
    let result = toold.call_one(&parent, "agent", input).await;
    let summary: Value = serde_json::from_str(ok_output(&result)).unwrap();
    let child = summary["session_id"].as_str().unwrap().to_owned();
    assert_ne!(child, parent);
    let steps = summary["steps"].as_array().unwrap();
    let ids: Vec<&str> = steps.iter().map(|s| s["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["write", "outside", "bash"], "{summary}");
    assert_eq!(steps[0]["is_error"], false, "{summary}");
    assert_eq!(steps[1]["error_kind"], "permission_denied", "{summary}");
    assert!(
        steps[1]["output"]
            .as_str()
            .unwrap()
            .contains("danger_full_access"),
        "{summary}"
    );
    assert_eq!(steps[2]["is_error"], false, "{summary}");
    assert!(
        steps[2]["output"]
            .as_str()
            .unwrap()
            .contains("22 agent_note.txt"),
        "{summary}"
    );
    // The child token is refused everywhere but its child.
    let probes = &summary["probes"];
    assert_eq!(probes["list_parent_tools"], "NOT_FOUND", "{summary}");
    assert_eq!(probes["run_in_parent"], "NOT_FOUND", "{summary}");
    assert_eq!(probes["create_session"], "PERMISSION_DENIED", "{summary}");
    let workspace = toold.workspace(&parent).await;
    let note = std::fs::read_to_string(workspace.join("agent_note.txt")).unwrap();
    assert_eq!(note, "hello from the parent\n");
    provider.line_starting("result").await;

    // The parent's stream: its own `agent` call around the child's, tagged with the child.
    let seen = until(&mut events, |e| {
        e["type"] == "tool:post" && e["session_id"] == parent && e["tool"] == "agent"
    })
    .await;
    let of_child = |kind: &str, tool: &str| {
        seen.iter()
            .any(|e| e["type"] == kind && e["session_id"] == child && e["tool"] == tool)
    };
    let started = |e: &&Value| e["type"] == "session:start" && e["session_id"] == child;
    assert!(seen.iter().any(|e| started(&e)), "{seen:?}");
    assert!(of_child("tool:post", "write_file"), "{seen:?}");
    assert!(
        of_child("tool:error", "write_file"),
        "the denied call: {seen:?}"
    );
    assert!(of_child("tool:post", "bash"), "{seen:?}");
    let sessions: Vec<&Value> = seen.iter().map(|e| &e["session_id"]).collect();
    assert!(
        sessions.iter().all(|s| **s == parent || **s == child),
        "{sessions:?}"
    );

    // The call ended: the child is closed, its calls audited under A.
    let reply = toold.get(&format!("/v1/sessions/{child}")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    let calls = toold.get(&format!("/v1/calls?session={child}")).await;
    assert_eq!(calls.status, StatusCode::OK, "{}", calls.body);
    let rows = calls.body["calls"]
        .as_array()
        .unwrap_or_else(|| panic!("{}", calls.body));
    assert_eq!(rows.len(), 3, "{}", calls.body);
    assert!(
        rows.iter().all(|row| row["principal"] == "agent-a"),
        "{}",
        calls.body
    );
    let by_child = |e: &&Value| e["session_id"] == child && e["type"] == "batch:start";
    let starts: Vec<&Value> = seen.iter().filter(by_child).collect();
    assert_eq!(starts.len(), 3, "{seen:?}");
    assert!(starts.iter().all(|e| e["actor"] == "agent-a"), "{starts:?}");

    // No `agent` provider, no `agent` tool.
    provider.kill();
    let mut offered = true;
    for _ in 0..100 {
        offered = tool_names(&toold, &parent)
            .await
            .contains(&"agent".to_owned());
        if !offered {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
    assert!(!offered, "the agent tool left with its provider");
}

#[tokio::test]
async fn interrupting_the_parent_cancels_the_childs_running_bash() {
    let toold = daemon("");
    let parent = toold.session().await;
    let Some(mut provider) = agent_provider(&toold, &["--long-bash"]).await else {
        return;
    };
    let mut events = toold
        .sse(&format!("/v1/sessions/{parent}/events"), None, None)
        .await;
    let body = json!({"calls": [{"id": "a", "name": "agent",
        "input": {"description": "long", "prompt": "wait"}}]});
    let running = tokio::spawn(
        toold
            .request_as(
                toold.token.as_deref(),
                Method::POST,
                &format!("/v1/sessions/{parent}/batches"),
            )
            .header("content-type", "application/json")
            .body(body.to_string())
            .send(),
    );
    let seen = until(&mut events, |e| {
        e["type"] == "tool:pre" && e["tool"] == "bash" && e["session_id"] != parent
    })
    .await;
    let child = seen.last().unwrap()["session_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let reply = toold
        .post(&format!("/v1/sessions/{parent}/interrupt"), &json!({}))
        .await;
    assert!(reply.status.is_success(), "{}", reply.body);
    let answer = running.await.unwrap().unwrap().bytes().await.unwrap();
    let answer: Value = serde_json::from_slice(&answer).unwrap();
    assert_eq!(answer["results"][0]["error_kind"], "cancelled", "{answer}");
    let seen = until(&mut events, |e| {
        e["type"] == "tool:error" && e["tool"] == "bash" && e["session_id"] == child
    })
    .await;
    let bash = seen.last().unwrap();
    assert_eq!(bash["data"]["error_kind"], "cancelled", "{bash}");
    provider.line_starting("cancel").await;
}
