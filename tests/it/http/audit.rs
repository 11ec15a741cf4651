//! `GET /v1/calls` across sessions against the real daemon: rows from three sessions of two
//! principals (allowed by the mode, denied by a rule, denied by a hook, asked and approved,
//! failed, timed out) come back exactly for each filter and for combinations, paged newest
//! first; an agent sees its own sessions' rows only; unknown filters and malformed times
//! are a 400 naming them; paging while another client inserts rows loses and repeats nothing.

use std::collections::HashSet;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::auth::{ADMIN, AGENT_A, AGENT_B, OBSERVER, daemon_configured, get, post, session_of};
use crate::http::harness::Toold;

/// A hook that blocks any `write_file` whose input mentions a secret.
fn hook_settings(dir: &std::path::Path) -> String {
    let hook = dir.join("no-secrets.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$(cat)\" in *secret*) echo 'secrets stay out' >&2; exit 2;; esac\n",
    )
    .unwrap();
    format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"write_file\"\ncommand = \"sh {}\"\n",
        hook.display()
    )
}

/// Every row `query` selects as `token` sees them, paged by `limit`.
pub async fn listed(toold: &Toold, token: &str, query: &str, limit: u32) -> Vec<Value> {
    let mut rows = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let after = cursor.map(|c| format!("&cursor={c}")).unwrap_or_default();
        let path = format!("/v1/calls?limit={limit}{after}&{query}");
        let reply = get(toold, token, &path).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
        rows.extend(reply.body["calls"].as_array().unwrap().iter().cloned());
        match reply.body["next_cursor"].as_i64() {
            Some(next) => cursor = Some(next),
            None => return rows,
        }
    }
}

fn call_ids(rows: &[Value]) -> Vec<String> {
    rows.iter()
        .map(|row| {
            format!(
                "{}/{}",
                row["session_id"].as_str().unwrap(),
                row["call_id"].as_str().unwrap()
            )
        })
        .collect()
}

async fn run(toold: &Toold, token: &str, session: &str, calls: Value) -> Value {
    let reply = post(
        toold,
        token,
        &format!("/v1/sessions/{session}/batches"),
        json!({ "calls": calls }),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body
}

/// The scenario: (daemon, [a1, a2, b1]).
async fn scenario() -> (Toold, [String; 3]) {
    let scripts = tempfile::tempdir().unwrap();
    let toold = daemon_configured(&hook_settings(scripts.path()), &[]);
    let rules = json!({"interactive": true, "rules": {"deny": ["bash(rm:*)"]}});
    let a1 = session_of(&toold, AGENT_A, rules.clone()).await;
    let a2 = session_of(&toold, AGENT_A, rules).await;
    let b1 = session_of(&toold, AGENT_B, json!({})).await;
    run(
        &toold,
        AGENT_A,
        &a1,
        json!([
            {"id": "allowed", "name": "bash", "input": {"command": "echo hi"}},
            {"id": "by-rule", "name": "bash", "input": {"command": "rm -rf build"}},
            {"id": "by-hook", "name": "write_file", "input": {"file_path": "x.txt", "content": "a secret"}},
        ]),
    )
    .await;
    // Asked, and approved by a person.
    let batch = run(
        &toold,
        AGENT_A,
        &a2,
        json!([{"id": "asked", "name": "bash", "input": {"command": "echo ask me"}}]),
    );
    let approve = async {
        let deadline = tokio::time::Instant::now() + std::time::Duration::from_secs(30);
        loop {
            let pending = get(&toold, AGENT_A, &format!("/v1/sessions/{a2}/approvals")).await;
            if let Some(id) = pending.body["approvals"][0]["id"].as_str() {
                let path = format!("/v1/sessions/{a2}/approvals/{id}");
                let reply = post(&toold, AGENT_A, &path, json!({"decision": "allow"})).await;
                assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
                return;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "no approval appeared"
            );
            tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        }
    };
    tokio::join!(batch, approve);
    run(
        &toold,
        AGENT_B,
        &b1,
        json!([
            {"id": "failed", "name": "read_file", "input": {"path": "no-such-file"}},
            {"id": "timed-out", "name": "bash", "input": {"command": "sleep 5", "timeout": 300}},
            {"id": "unknown", "name": "reed_file", "input": {}},
        ]),
    )
    .await;
    (toold, [a1, a2, b1])
}

/// Whether `row` passes the filter `name=value`, judged from the row's own fields.
fn passes(row: &Value, name: &str, value: &str) -> bool {
    let time = |field: &Value| humantime::parse_rfc3339(field.as_str().unwrap()).unwrap();
    let at = || humantime::parse_rfc3339(value).unwrap();
    match name {
        "session" => row["session_id"] == value,
        "batch_id" | "principal" | "trace_id" | "error_kind" => row[name] == value,
        "tool" => row["tool"] == value || row["requested_name"] == value,
        "decision" => row["decision"]["decision"] == value,
        "decided_by" => row["decision"]["decided_by"]["by"] == value,
        "is_error" => row["is_error"].as_bool() == value.parse().ok(),
        "since" => time(&row["started_at"]) >= at(),
        "until" => time(&row["started_at"]) < at(),
        other => panic!("no such filter {other}"),
    }
}

#[tokio::test]
async fn each_filter_and_combinations_select_exactly_their_rows_and_agents_see_their_own() {
    let (toold, [a1, a2, b1]) = scenario().await;
    let all = listed(&toold, ADMIN, "", 100).await;
    assert_eq!(all.len(), 7, "{all:#?}");
    // Newest first.
    let cursors: Vec<i64> = all
        .iter()
        .map(|row| row["cursor"].as_i64().unwrap())
        .collect();
    assert!(cursors.windows(2).all(|w| w[0] > w[1]), "{cursors:?}");
    let row = |call: &str| all.iter().find(|r| r["call_id"] == call).unwrap().clone();
    // The scenario made what it says.
    assert_eq!(row("allowed")["decision"]["decided_by"]["by"], "mode");
    assert_eq!(row("by-rule")["decision"]["decided_by"]["by"], "rule");
    assert_eq!(
        row("by-hook")["decision"]["decided_by"]["by"],
        "hook",
        "{}",
        row("by-hook")
    );
    assert_eq!(row("asked")["decision"]["decided_by"]["by"], "approver");
    assert_eq!(row("failed")["is_error"], true);
    assert_eq!(
        row("timed-out")["error_kind"],
        "timeout",
        "{}",
        row("timed-out")
    );
    assert_eq!(row("unknown")["error_kind"], "unknown_tool");

    let middle = row("asked")["started_at"].as_str().unwrap().to_owned();
    let batch = row("by-rule")["batch_id"].as_str().unwrap().to_owned();
    let singles: Vec<(&str, String)> = vec![
        ("session", a1.clone()),
        ("session", b1.clone()),
        ("batch_id", batch),
        ("principal", "agent-a".into()),
        ("principal", "agent-b".into()),
        ("tool", "bash".into()),
        ("tool", "reed_file".into()),
        ("decision", "allow".into()),
        ("decision", "deny".into()),
        ("decided_by", "rule".into()),
        ("decided_by", "hook".into()),
        ("decided_by", "approver".into()),
        ("decided_by", "mode".into()),
        ("error_kind", "permission_denied".into()),
        ("error_kind", "hook_blocked".into()),
        ("error_kind", "timeout".into()),
        ("is_error", "true".into()),
        ("is_error", "false".into()),
        ("since", middle.clone()),
        ("until", middle.clone()),
    ];
    let encode = |value: &str| value.replace('+', "%2B");
    for (name, value) in &singles {
        let expected: Vec<String> = call_ids(
            &all.iter()
                .filter(|r| passes(r, name, value))
                .cloned()
                .collect::<Vec<_>>(),
        );
        assert!(!expected.is_empty(), "{name}={value} selects something");
        let got = call_ids(&listed(&toold, ADMIN, &format!("{name}={}", encode(value)), 2).await);
        assert_eq!(got, expected, "{name}={value}");
    }
    // Pairs of different filters, every one.
    for (i, (n1, v1)) in singles.iter().enumerate() {
        for (n2, v2) in singles.iter().skip(i + 1).filter(|(n2, _)| n2 != n1) {
            let expected: Vec<String> = call_ids(
                &all.iter()
                    .filter(|r| passes(r, n1, v1) && passes(r, n2, v2))
                    .cloned()
                    .collect::<Vec<_>>(),
            );
            let query = format!("{n1}={}&{n2}={}", encode(v1), encode(v2));
            let got = call_ids(&listed(&toold, ADMIN, &query, 3).await);
            assert_eq!(got, expected, "{query}");
        }
    }
    // Three at once: bash, denied, since the first call.
    let first = all.last().unwrap()["started_at"]
        .as_str()
        .unwrap()
        .to_owned();
    let got = listed(
        &toold,
        ADMIN,
        &format!("tool=bash&decision=deny&since={}", encode(&first)),
        5,
    )
    .await;
    assert_eq!(call_ids(&got), [format!("{a1}/by-rule")]);

    // An agent sees its own sessions' rows, an observer all of them.
    let mine = listed(&toold, AGENT_A, "", 2).await;
    let expected: Vec<String> = call_ids(
        &all.iter()
            .filter(|r| r["session_id"] == a1.as_str() || r["session_id"] == a2.as_str())
            .cloned()
            .collect::<Vec<_>>(),
    );
    assert_eq!(call_ids(&mine), expected);
    assert_eq!(listed(&toold, AGENT_B, "", 2).await.len(), 3);
    assert!(
        listed(&toold, AGENT_A, "principal=agent-b", 2)
            .await
            .is_empty()
    );
    assert_eq!(listed(&toold, OBSERVER, "", 100).await, all);
    // Another's session named outright is as missing as a session that does not exist.
    let hidden = get(&toold, AGENT_A, &format!("/v1/calls?session={b1}")).await;
    assert_eq!(hidden.status, StatusCode::NOT_FOUND, "{}", hidden.body);
    // Oldest first on request.
    let mut oldest = call_ids(&listed(&toold, ADMIN, "order=asc", 3).await);
    oldest.reverse();
    assert_eq!(oldest, call_ids(&all));
}

#[tokio::test]
async fn unknown_filters_and_malformed_values_are_a_400_naming_them() {
    let toold = daemon_configured("", &[]);
    let cases = [
        ("tooll=bash", "tooll"),
        ("since=yesterday", "since"),
        ("until=2026-13-01T00:00:00Z", "until"),
        ("since=2026-01-01", "since"),
        ("decision=maybe", "maybe"),
        ("error_kind=oops", "oops"),
        ("is_error=perhaps", "is_error"),
        ("order=sideways", "sideways"),
        ("limit=0", "limit"),
        ("cursor=abc", "cursor"),
    ];
    for (query, named) in cases {
        let reply = get(&toold, ADMIN, &format!("/v1/calls?{query}")).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{query}: {}",
            reply.body
        );
        let message = reply.body["error"]["message"].as_str().unwrap();
        assert!(message.contains(named), "{query}: {message}");
    }
    // Offsets other than Z are RFC 3339 too.
    let reply = get(&toold, ADMIN, "/v1/calls?since=2026-01-01T02:00:00%2B02:00").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
}

#[tokio::test]
async fn paging_while_another_client_inserts_rows_loses_and_repeats_nothing() {
    let toold = daemon_configured("", &[]);
    let session = session_of(&toold, ADMIN, json!({})).await;
    let echo = |n: usize| {
        (0..n)
            .map(|i| json!({"id": format!("c{i}"), "name": "bash", "input": {"command": "true"}}))
            .collect::<Vec<_>>()
    };
    for _ in 0..4 {
        run(&toold, ADMIN, &session, Value::Array(echo(10))).await;
    }
    let writer = async {
        for _ in 0..15 {
            run(&toold, ADMIN, &session, Value::Array(echo(4))).await;
        }
    };
    let reader = async {
        let mut seen = Vec::new();
        let mut cursor: Option<i64> = None;
        loop {
            let after = cursor.map(|c| format!("&cursor={c}")).unwrap_or_default();
            let reply = get(&toold, ADMIN, &format!("/v1/calls?limit=3{after}")).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
            seen.extend(reply.body["calls"].as_array().unwrap().iter().cloned());
            match reply.body["next_cursor"].as_i64() {
                Some(next) => cursor = Some(next),
                None => return seen,
            }
        }
    };
    let ((), seen) = tokio::join!(writer, reader);
    let top = seen[0]["cursor"].as_i64().unwrap();
    let cursors: Vec<i64> = seen.iter().map(|r| r["cursor"].as_i64().unwrap()).collect();
    let unique: HashSet<i64> = cursors.iter().copied().collect();
    assert_eq!(unique.len(), cursors.len(), "nothing repeats");
    let now: Vec<i64> = listed(&toold, ADMIN, "", 1000)
        .await
        .iter()
        .map(|r| r["cursor"].as_i64().unwrap())
        .filter(|c| *c <= top)
        .collect();
    assert_eq!(cursors, now, "nothing is skipped");
    assert!(cursors.len() >= 40);
}
