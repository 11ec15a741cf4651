//! Provided tools in the pipeline: every definition format, a batch mixing built-in and
//! provided calls (results in order, the parallel-safe provided calls overlapping as the
//! provider's own clock shows), progress events, audit rows, permission rules naming the
//! provided tool and a pre-tool hook matching it.

use serde_json::{Value, json};

use super::{Provider, daemon, ok_output, session};
use crate::auth::AGENT_A;
use crate::mcp_bridge::observed::types_of;

#[tokio::test]
async fn a_provided_tool_is_defined_in_every_format() {
    let toold = daemon("");
    let Some(_provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await else {
        return;
    };
    let id = session(&toold, &["demo"]).await;
    let named = |tools: &Value, path: &[&str]| -> Option<Value> {
        tools
            .as_array()
            .unwrap()
            .iter()
            .find(|tool| path.iter().fold(*tool, |at, key| &at[*key]) == "demo__echo")
            .cloned()
    };
    for (format, path) in [
        ("anthropic", &["name"][..]),
        ("openai", &["name"][..]),
        ("openai_chat", &["function", "name"][..]),
        ("mcp", &["name"][..]),
        ("toold", &["name"][..]),
    ] {
        let reply = toold
            .get(&format!("/v1/sessions/{id}/tools?format={format}"))
            .await;
        let tool =
            named(&reply.body["tools"], path).unwrap_or_else(|| panic!("{format}: {}", reply.body));
        assert!(
            tool.to_string().contains("Echoes `text` back"),
            "{format}: {tool}"
        );
        assert!(tool.to_string().contains("sleep_ms"), "{format}: {tool}");
    }
    let toold_format = toold
        .get(&format!("/v1/sessions/{id}/tools?format=toold"))
        .await;
    let echo = named(&toold_format.body["tools"], &["name"]).unwrap();
    let slow = toold_format.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|t| t["name"] == "demo__slow")
        .unwrap()
        .clone();
    assert_eq!(echo["read_only"], true, "{echo}");
    assert_eq!(slow["read_only"], false, "{slow}");
    assert_eq!(
        slow["destructive"], true,
        "unset destructive fails closed: {slow}"
    );
}

#[tokio::test]
async fn a_mixed_batch_keeps_order_and_runs_provided_calls_in_parallel() {
    let toold = daemon("");
    let Some(_provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await else {
        return;
    };
    let id = session(&toold, &["demo"]).await;
    let workspace = toold.workspace(&id).await;
    std::fs::write(workspace.join("note.txt"), "a note\n").unwrap();
    // Live, from before the batch: progress is published as it happens.
    let mut stream = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, None)
        .await;
    let body = toold
        .run_batch(
            &id,
            json!([
                {"id": "r1", "name": "read_file", "input": {"file_path": "note.txt"}},
                {"id": "e1", "name": "demo__echo", "input": {"text": "one", "sleep_ms": 400}},
                {"id": "e2", "name": "demo__echo", "input": {"text": "two", "sleep_ms": 400}},
                {"id": "r2", "name": "read_file", "input": {"file_path": "note.txt"}},
            ]),
        )
        .await;
    let results = body["results"].as_array().unwrap();
    let ids: Vec<&str> = results.iter().map(|r| r["id"].as_str().unwrap()).collect();
    assert_eq!(ids, ["r1", "e1", "e2", "r2"], "{body}");
    assert!(ok_output(&results[0]).contains("a note"));
    let one: Value = serde_json::from_str(ok_output(&results[1])).unwrap();
    let two: Value = serde_json::from_str(ok_output(&results[2])).unwrap();
    assert_eq!(
        (one["echo"].as_str(), two["echo"].as_str()),
        (Some("one"), Some("two"))
    );
    let ((s1, e1), (s2, e2)) = (start_end(&one), start_end(&two));
    assert!(
        s1 < e2 && s2 < e1,
        "the two echo calls overlapped: {one} {two}"
    );

    let mut frames = Vec::new();
    while frames
        .last()
        .is_none_or(|f: &crate::http::harness::Frame| f.event != "batch:end")
    {
        frames.push(stream.next().await.expect("the event stream stays open"));
    }
    let echo = types_of(&frames, "demo__echo");
    assert!(echo.contains(&"tool:progress"), "{echo:?}");
    let progress = frames.iter().find(|f| f.event == "tool:progress").unwrap();
    assert_eq!(
        progress.data["data"]["stage"], "started",
        "{:?}",
        progress.data
    );
    assert!(
        echo.contains(&"tool:pre") && echo.contains(&"tool:post"),
        "{echo:?}"
    );

    let rows = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    let tools: Vec<&str> = rows.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["tool"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools.iter().filter(|t| **t == "demo__echo").count(),
        2,
        "{}",
        rows.body
    );
}

fn start_end(v: &Value) -> (u64, u64) {
    (
        v["started_ms"].as_u64().unwrap(),
        v["ended_ms"].as_u64().unwrap(),
    )
}

#[tokio::test]
async fn rules_and_hooks_apply_to_provided_calls() {
    let scripts = tempfile::tempdir().unwrap();
    let seen = scripts.path().join("seen.jsonl");
    let hook = scripts.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ninput=\"$(cat)\"\nprintf '%s\\n' \"$input\" >> '{}'\n\
             case \"$input\" in *forbidden*) echo 'not that text' >&2; exit 2;; esac\n",
            seen.display()
        ),
    )
    .unwrap();
    let head = format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"demo__echo\"\ncommand = \"sh {}\"\n",
        hook.display()
    );
    let toold = daemon(&head);
    let Some(_provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await else {
        return;
    };
    let id = toold
        .session_with(&json!({"providers": ["demo"], "rules": {"deny": ["demo__slow"]}}))
        .await;
    let denied = toold
        .call_one(&id, "demo__slow", json!({"seconds": 0}))
        .await;
    assert_eq!(denied["error_kind"], "permission_denied", "{denied}");
    let blocked = toold
        .call_one(&id, "demo__echo", json!({"text": "forbidden"}))
        .await;
    assert_eq!(blocked["error_kind"], "hook_blocked", "{blocked}");
    assert!(
        blocked["output"]
            .as_str()
            .unwrap()
            .contains("not that text"),
        "{blocked}"
    );
    let invalid = toold.call_one(&id, "demo__echo", json!({"text": 7})).await;
    assert_eq!(invalid["error_kind"], "input_validation", "{invalid}");
    let allowed = toold
        .call_one(&id, "demo__echo", json!({"text": "fine"}))
        .await;
    assert!(ok_output(&allowed).contains("\"fine\""), "{allowed}");
    let hooked: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(
        hooked.len(),
        2,
        "validation refused the third before the hook: {hooked:?}"
    );
    assert_eq!(hooked[0]["tool_name"], "demo__echo");
    assert_eq!(hooked[1]["tool_input"], json!({"text": "fine"}));

    let rows = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    let described: Vec<(Value, Value)> = rows.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| (row["requested_name"].clone(), row["is_error"].clone()))
        .collect();
    assert_eq!(
        described,
        vec![
            (json!("demo__slow"), json!(true)),
            (json!("demo__echo"), json!(true)),
            (json!("demo__echo"), json!(true)),
            (json!("demo__echo"), json!(false)),
        ],
        "{}",
        rows.body
    );
}
