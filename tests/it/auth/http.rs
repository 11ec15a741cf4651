//! The HTTP door and its SSE streams: B meets A's session, batch and result as missing ids,
//! and lists and streams nothing of A's; O reads all of it and changes nothing; audit rows
//! and events name who acted.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::{
    ADMIN, AGENT_A, AGENT_B, MISSING, OBSERVER, bash, call, daemon, get, like_missing, post,
    session_of,
};
use crate::http::harness::Toold;

/// A's session after a batch whose output was offloaded: (session, batch, result).
async fn as_work(toold: &Toold) -> (String, String, String) {
    let a = session_of(
        toold,
        AGENT_A,
        json!({"metadata": {"note": "a-private-note"}}),
    )
    .await;
    let ran = post(
        toold,
        AGENT_A,
        &format!("/v1/sessions/{a}/batches"),
        bash("seq 1 400000"),
    )
    .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let batch = ran.body["batch_id"].as_str().unwrap().to_owned();
    let result = ran.body["results"][0]["offloaded"]["result_id"]
        .as_str()
        .unwrap()
        .to_owned();
    (a, batch, result)
}

/// Every session request of the API about session `id` (batch `batch`).
fn requests(id: &str, batch: &str) -> Vec<(Method, String, Option<Value>)> {
    let decision = json!({"decision": "allow"});
    vec![
        (Method::GET, format!("/v1/sessions/{id}"), None),
        (Method::GET, format!("/v1/sessions/{id}/calls"), None),
        (Method::GET, format!("/v1/sessions/{id}/tools"), None),
        (Method::GET, format!("/v1/sessions/{id}/approvals"), None),
        (
            Method::GET,
            format!("/v1/sessions/{id}/batches/{batch}"),
            None,
        ),
        (
            Method::GET,
            format!("/v1/sessions/{id}/batches/{batch}/calls"),
            None,
        ),
        (Method::GET, format!("/v1/sessions/{id}/events"), None),
        (
            Method::POST,
            format!("/v1/sessions/{id}/batches"),
            Some(bash("echo hi")),
        ),
        (Method::POST, format!("/v1/sessions/{id}/interrupt"), None),
        (
            Method::POST,
            format!("/v1/sessions/{id}/approvals/appr_1"),
            Some(decision),
        ),
        (Method::DELETE, format!("/v1/sessions/{id}"), None),
    ]
}

#[tokio::test]
async fn another_agents_session_batch_and_result_are_missing_ids_to_an_agent() {
    let toold = daemon();
    let (a, batch, result) = as_work(&toold).await;
    for ((method, path, body), (_, missing_path, _)) in requests(&a, &batch)
        .into_iter()
        .zip(requests(MISSING, &batch))
    {
        let theirs = call(&toold, AGENT_B, method.clone(), &path, body.clone()).await;
        let missing = call(&toold, AGENT_B, method, &missing_path, body).await;
        assert_eq!(
            theirs.status,
            StatusCode::NOT_FOUND,
            "{path}: {}",
            theirs.body
        );
        like_missing(
            &theirs,
            &missing,
            (&a, MISSING),
            &["a-private-note", &result],
        );
    }
    let theirs = get(&toold, AGENT_B, &format!("/v1/results/{result}")).await;
    let missing = get(
        &toold,
        AGENT_B,
        "/v1/results/res_00000000000000000000000000000000",
    )
    .await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.body);
    like_missing(
        &theirs,
        &missing,
        (&result, "res_00000000000000000000000000000000"),
        &[&a],
    );

    // B's listing has only B's sessions; A's and the admin's listings have A's.
    let b = session_of(&toold, AGENT_B, json!({})).await;
    let listed = |reply: crate::http::harness::Reply| reply.body["sessions"].to_string();
    let bs = listed(get(&toold, AGENT_B, "/v1/sessions").await);
    assert!(bs.contains(&b) && !bs.contains(&a), "{bs}");
    for token in [AGENT_A, ADMIN, OBSERVER] {
        assert!(listed(get(&toold, token, "/v1/sessions").await).contains(&a));
    }
    // A's session is untouched: still open, its one call the only one.
    let session = get(&toold, AGENT_A, &format!("/v1/sessions/{a}")).await;
    assert_eq!(session.body["closed"], false, "{}", session.body);
    let calls = get(&toold, AGENT_A, &format!("/v1/sessions/{a}/calls")).await;
    assert_eq!(
        calls.body["calls"].as_array().unwrap().len(),
        1,
        "{}",
        calls.body
    );
}

#[tokio::test]
async fn an_observer_reads_everything_and_each_write_is_forbidden() {
    let toold = daemon();
    let (a, batch, result) = as_work(&toold).await;
    // (The event stream, an endless body, is read as a stream below.)
    let requests = requests(&a, &batch).into_iter();
    for (method, path, body) in requests.filter(|(_, path, _)| !path.ends_with("/events")) {
        let reply = call(&toold, OBSERVER, method.clone(), &path, body).await;
        let expected = if method == Method::GET {
            StatusCode::OK
        } else {
            StatusCode::FORBIDDEN
        };
        assert_eq!(reply.status, expected, "{method} {path}: {}", reply.body);
        if expected == StatusCode::FORBIDDEN {
            assert_eq!(reply.body["error"]["code"], "forbidden", "{}", reply.body);
        }
    }
    let created = post(&toold, OBSERVER, "/v1/sessions", json!({})).await;
    assert_eq!(created.status, StatusCode::FORBIDDEN, "{}", created.body);
    let page = get(&toold, OBSERVER, &format!("/v1/results/{result}?limit=10")).await;
    assert_eq!(page.body["content"], "1\n2\n3\n4\n5\n", "{}", page.body);
    // Nothing changed: A's session is open, with its one call, and no other session exists.
    let session = get(&toold, OBSERVER, &format!("/v1/sessions/{a}")).await;
    assert_eq!(session.body["closed"], false, "{}", session.body);
    assert_eq!(session.body["principal"], "agent-a", "{}", session.body);
    let calls = get(&toold, OBSERVER, &format!("/v1/sessions/{a}/calls")).await;
    assert_eq!(
        calls.body["calls"].as_array().unwrap().len(),
        1,
        "{}",
        calls.body
    );
    let all = get(&toold, ADMIN, "/v1/sessions").await.body["sessions"].clone();
    assert_eq!(all.as_array().unwrap().len(), 1, "{all}");
    let path = format!("/v1/sessions/{a}/events");
    let mut events = toold.sse_as(Some(OBSERVER), &path, None, Some(0)).await;
    let first = events.next().await.expect("the session's first event");
    assert_eq!(first.event, "session:start", "{first:?}");
}

#[tokio::test]
async fn audit_rows_and_events_name_who_acted() {
    let toold = daemon();
    let (a, _, _) = as_work(&toold).await;
    // The admin acts in A's session too: its row and events name the admin (`token-1`).
    let ran = post(
        &toold,
        ADMIN,
        &format!("/v1/sessions/{a}/batches"),
        bash("echo admin"),
    )
    .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    let calls = get(&toold, AGENT_A, &format!("/v1/sessions/{a}/calls")).await;
    let principals: Vec<&Value> = calls.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .map(|row| &row["principal"])
        .collect();
    assert_eq!(
        principals,
        [&json!("agent-a"), &json!("token-1")],
        "{}",
        calls.body
    );

    let mut events = toold
        .sse_as(
            Some(AGENT_A),
            &format!("/v1/sessions/{a}/events"),
            None,
            Some(0),
        )
        .await;
    let mut actors = Vec::new();
    while actors.len() < 2 {
        let frame = events.next().await.expect("the session's events");
        assert_eq!(frame.data["session_id"], a.as_str(), "{:?}", frame);
        if ["session:start", "batch:start"].contains(&frame.event.as_str()) {
            actors.push((frame.event.clone(), frame.data["actor"].clone()));
        }
    }
    assert_eq!(actors[0], ("session:start".to_owned(), json!("agent-a")));
    assert_eq!(actors[1], ("batch:start".to_owned(), json!("agent-a")));
}

#[tokio::test]
async fn an_agents_global_event_stream_shows_only_its_own_sessions() {
    let toold = daemon();
    let (a, _, _) = as_work(&toold).await;
    // Replayed from the store (A's earlier events), then live (A's and B's new ones).
    let mut bs_stream = toold
        .sse_as(Some(AGENT_B), "/v1/events", None, Some(0))
        .await;
    let mut observers = toold
        .sse_as(Some(OBSERVER), "/v1/events", None, Some(0))
        .await;
    let again = post(
        &toold,
        AGENT_A,
        &format!("/v1/sessions/{a}/batches"),
        bash("echo again"),
    )
    .await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let b = session_of(&toold, AGENT_B, json!({})).await;
    let ran = post(
        &toold,
        AGENT_B,
        &format!("/v1/sessions/{b}/batches"),
        bash("echo b"),
    )
    .await;
    assert_eq!(ran.status, StatusCode::OK, "{}", ran.body);
    loop {
        let frame = bs_stream.next().await.expect("B's events");
        assert_eq!(
            frame.data["session_id"],
            b.as_str(),
            "A's event reached B: {frame:?}"
        );
        if frame.event == "batch:end" {
            break;
        }
    }
    // The observer's stream has both.
    let mut seen = std::collections::HashSet::new();
    while seen.len() < 2 {
        let frame = observers.next().await.expect("everyone's events");
        if frame.event == "batch:end" {
            seen.insert(frame.data["session_id"].as_str().unwrap().to_owned());
        }
    }
    assert!(seen.contains(&a) && seen.contains(&b), "{seen:?}");
}

#[tokio::test]
async fn every_401_names_the_bearer_scheme() {
    let toold = daemon();
    let url = |path: &str| format!("{}{path}", toold.base);
    let initialize = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "2025-11-25", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let requests = [
        ("no token", toold.client.get(url("/v1/sessions"))),
        (
            "a wrong token",
            toold.client.get(url("/v1/sessions")).bearer_auth("nope"),
        ),
        (
            "not bearer",
            toold
                .client
                .get(url("/v1/mcp/servers"))
                .basic_auth("user", Some("pass")),
        ),
        (
            "/mcp, no token",
            toold
                .client
                .post(url("/mcp"))
                .header("content-type", "application/json")
                .header("accept", "application/json, text/event-stream")
                .body(initialize.to_string()),
        ),
        (
            "/v1/sessions/{id}/mcp, a wrong token",
            toold
                .client
                .post(url(&format!("/v1/sessions/{MISSING}/mcp")))
                .bearer_auth("nope")
                .header("content-type", "application/json")
                .body(initialize.to_string()),
        ),
    ];
    for (case, request) in requests {
        let response = request.send().await.unwrap();
        assert_eq!(response.status(), StatusCode::UNAUTHORIZED, "{case}");
        let challenge = response
            .headers()
            .get("www-authenticate")
            .unwrap_or_else(|| panic!("{case}: no WWW-Authenticate"));
        assert_eq!(challenge, "Bearer realm=\"toold\"", "{case}");
    }
    // An admitted request and a probe carry none.
    let admitted = toold
        .client
        .get(url("/v1/sessions"))
        .bearer_auth(AGENT_A)
        .send()
        .await
        .unwrap();
    assert_eq!(admitted.status(), StatusCode::OK);
    assert!(admitted.headers().get("www-authenticate").is_none());
    let probe = toold.client.get(url("/healthz")).send().await.unwrap();
    assert_eq!(probe.status(), StatusCode::OK);
    assert!(probe.headers().get("www-authenticate").is_none());
}
