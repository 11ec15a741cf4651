//! How provided calls end besides a result: cancelled on interrupt and on timeout (the
//! provider is sent `Cancel`), failed naming the provider when it dies mid-call, and shared
//! between two connections under one name.

use std::collections::HashMap;

use serde_json::{Value, json};

use super::{Provider, daemon, ok_output, session};
use crate::auth::{AGENT_A, get};

#[tokio::test]
async fn an_interrupt_cancels_a_provided_call_and_the_provider_is_told() {
    let toold = daemon("");
    let Some(mut provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await
    else {
        return;
    };
    let id = session(&toold, &["demo"]).await;
    let batch = toold.call_one(&id, "demo__slow", json!({"seconds": 120}));
    let interrupt = async {
        provider.line_starting("invoke slow").await;
        let reply = toold
            .post(&format!("/v1/sessions/{id}/interrupt"), &json!({}))
            .await;
        assert!(reply.status.is_success(), "{}", reply.body);
    };
    let (result, ()) = tokio::join!(batch, interrupt);
    assert_eq!(result["error_kind"], "cancelled", "{result}");
    let cancel = provider.line_starting("cancel").await;
    assert!(cancel.len() > "cancel ".len(), "{cancel}");
}

#[tokio::test]
async fn a_provided_call_past_its_timeout_times_out_and_the_provider_is_told() {
    let toold = daemon("");
    let Some(mut provider) = Provider::connect(
        &toold,
        AGENT_A,
        &["--provider", "demo", "--timeout-ms", "300"],
    )
    .await
    else {
        return;
    };
    let id = session(&toold, &["demo"]).await;
    let result = toold
        .call_one(&id, "demo__slow", json!({"seconds": 120}))
        .await;
    assert_eq!(result["error_kind"], "timeout", "{result}");
    provider.line_starting("cancel").await;
}

#[tokio::test]
async fn a_provider_killed_mid_call_fails_that_call_naming_it() {
    let toold = daemon("");
    let Some(mut provider) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await
    else {
        return;
    };
    let id = session(&toold, &["demo"]).await;
    let batch = toold.call_one(&id, "demo__slow", json!({"seconds": 120}));
    let kill = async {
        provider.line_starting("invoke slow").await;
        provider.kill();
    };
    let (result, ()) = tokio::join!(batch, kill);
    assert_eq!(result["is_error"], true, "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("provider \"demo\""), "{result}");
    assert!(output.contains("not retried"), "{result}");
    // The next batch's pool has no tool of the provider left.
    let after = toold
        .call_one(&id, "demo__slow", json!({"seconds": 0}))
        .await;
    assert_eq!(after["error_kind"], "unknown_tool", "{after}");
}

#[tokio::test]
async fn two_connections_under_one_name_share_a_hundred_calls() {
    let toold = daemon("");
    let Some(_one) = Provider::connect(&toold, AGENT_A, &["--provider", "demo"]).await else {
        return;
    };
    let _two = Provider::connect(&toold, AGENT_A, &["--provider", "demo"])
        .await
        .unwrap();
    let id = session(&toold, &["demo"]).await;
    let mut by_connection: HashMap<String, usize> = HashMap::new();
    for batch in 0..10 {
        let calls: Vec<Value> = (0..10)
            .map(|n| json!({"id": format!("c{n}"), "name": "demo__echo", "input": {"text": format!("{batch}-{n}")}}))
            .collect();
        let body = toold.run_batch(&id, json!(calls)).await;
        for result in body["results"].as_array().unwrap() {
            let echoed: Value = serde_json::from_str(ok_output(result)).unwrap();
            *by_connection
                .entry(echoed["connection"].as_str().unwrap().to_owned())
                .or_default() += 1;
        }
    }
    assert_eq!(
        by_connection.len(),
        2,
        "both connections got calls: {by_connection:?}"
    );
    assert_eq!(by_connection.values().sum::<usize>(), 100);
    let listed = get(&toold, AGENT_A, "/v1/providers").await;
    let connections = listed.body["providers"][0]["connections"]
        .as_array()
        .unwrap()
        .clone();
    let invoked: u64 = connections
        .iter()
        .map(|c| c["invoked"].as_u64().unwrap())
        .sum();
    assert_eq!(invoked, 100, "{}", listed.body);
    assert!(
        connections.iter().all(|c| c["in_flight"] == 0),
        "{}",
        listed.body
    );
}
