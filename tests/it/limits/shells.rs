//! `shell_calls_per_session` (over it a call waits its turn) and
//! `background_shells_per_session` (over it, starting one is that call's error).

use serde_json::{Value, json};

use super::limited;
use crate::auth::{AGENT_A, session_of};

/// Runs `calls` in `session` as A; the results.
async fn results(toold: &crate::http::harness::Toold, session: &str, calls: Value) -> Vec<Value> {
    let reply = super::run(toold, AGENT_A, session, json!({"calls": calls})).await;
    assert_eq!(reply.status, reqwest::StatusCode::OK, "{}", reply.body);
    reply.body["results"].as_array().unwrap().clone()
}

#[tokio::test]
async fn parallel_bash_calls_over_the_limit_wait_their_turn() {
    let toold = limited("shell_calls_per_session = 1");
    let session = session_of(&toold, AGENT_A, json!({})).await;
    // Read-only calls, so the dispatcher runs them in parallel; each prints when it ran.
    let timed = |id: &str| {
        json!({"id": id, "name": "bash", "input": {
            "command": "date +%s%N; sleep 0.2; date +%s%N"
        }})
    };
    let results = results(
        &toold,
        &session,
        json!([timed("r1"), timed("r2"), timed("r3")]),
    )
    .await;
    let mut intervals: Vec<(u128, u128)> = results
        .iter()
        .map(|result| {
            assert_eq!(result["is_error"], false, "{result}");
            let stamps: Vec<u128> = result["output"]
                .as_str()
                .unwrap()
                .lines()
                .filter_map(|line| line.trim().parse().ok())
                .collect();
            (stamps[0], stamps[1])
        })
        .collect();
    intervals.sort_unstable();
    for pair in intervals.windows(2) {
        assert!(pair[1].0 >= pair[0].1, "two ran at once: {intervals:?}");
    }
}

#[tokio::test]
async fn a_background_shell_over_the_limit_is_refused_until_one_ends() {
    let toold = limited("background_shells_per_session = 1");
    let (s1, s2) = (
        session_of(&toold, AGENT_A, json!({})).await,
        session_of(&toold, AGENT_A, json!({})).await,
    );
    let background = json!([{"id": "bg", "name": "bash", "input": {
        "command": "sleep 60", "run_in_background": true
    }}]);
    let first = &results(&toold, &s1, background.clone()).await[0];
    assert_eq!(first["is_error"], false, "{first}");
    let task = first["output"]
        .as_str()
        .unwrap()
        .split_whitespace()
        .find(|word| word.starts_with("bash_"))
        .unwrap()
        .to_owned();
    let refused = &results(&toold, &s1, background.clone()).await[0];
    assert_eq!(refused["is_error"], true, "{refused}");
    assert!(
        refused["output"]
            .as_str()
            .unwrap()
            .contains("background_shells_per_session = 1"),
        "{refused}"
    );
    // Another session has its own.
    let other = &results(&toold, &s2, background.clone()).await[0];
    assert_eq!(other["is_error"], false, "{other}");
    // Once the first is stopped, the session may start another.
    let killed = &results(
        &toold,
        &s1,
        json!([{"id": "k", "name": "kill_shell", "input": {"task_id": task}}]),
    )
    .await[0];
    assert_eq!(killed["is_error"], false, "{killed}");
    let again = &results(&toold, &s1, background).await[0];
    assert_eq!(again["is_error"], false, "{again}");
}
