//! Child sessions made through the HTTP door (`POST /v1/sessions` with `parent_session_id`)
//! against the real daemon: what they inherit, what is refused (with bad input of every
//! kind), who may make one, closing with the parent, and the parent's event streams carrying
//! the child's events, live and replayed.

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::auth::{self, AGENT_A, AGENT_B, MISSING, OBSERVER};
use crate::http::harness::{SseReader, Toold};

async fn create(toold: &Toold, body: Value) -> (StatusCode, Value) {
    let reply = toold.post("/v1/sessions", &body).await;
    (reply.status, reply.body)
}

fn message(body: &Value) -> &str {
    body["error"]["message"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_child_inherits_its_parent_and_may_only_narrow_it() {
    let toold = Toold::start();
    let parent = toold
        .session_with(&json!({"permission_mode": "workspace_write",
            "rules": {"allow": ["bash(git status)"], "deny": ["bash(rm:*)"]}}))
        .await;
    let parent_info = toold.get(&format!("/v1/sessions/{parent}")).await.body;
    let (status, child) = create(
        &toold,
        json!({"parent_session_id": parent, "rules": {"deny": ["bash(curl:*)"]}}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{child}");
    assert_eq!(child["parent_session_id"], json!(parent));
    assert_eq!(child["working_directory"], parent_info["working_directory"]);
    assert_eq!(child["permission_mode"], "workspace_write");
    assert_eq!(child["principal"], parent_info["principal"]);
    assert_eq!(child["rules"]["allow"], json!(["bash(git status)"]));
    assert_eq!(
        child["rules"]["deny"],
        json!(["bash(rm:*)", "bash(curl:*)"])
    );
    assert!(
        parent_info.get("parent_session_id").is_none(),
        "{parent_info}"
    );
    let (status, narrower) = create(
        &toold,
        json!({"parent_session_id": parent, "permission_mode": "read_only"}),
    )
    .await;
    assert_eq!(status, StatusCode::CREATED, "{narrower}");
    assert_eq!(narrower["permission_mode"], "read_only");

    let refusals = [
        (
            json!({"parent_session_id": parent, "permission_mode": "danger_full_access"}),
            "permission_mode \"danger_full_access\" is wider than the parent's \"workspace_write\"",
        ),
        (
            json!({"parent_session_id": parent, "rules": {"allow": ["write_file"]}}),
            "not allow rules",
        ),
        (
            json!({"parent_session_id": parent, "working_directory": toold.projects()}),
            "differs",
        ),
        (
            json!({"parent_session_id": parent, "interactive": true}),
            "interactive",
        ),
    ];
    // More than the parent may give is forbidden; a malformed request is invalid.
    for (body, expected) in refusals {
        let (status, reply) = create(&toold, body.clone()).await;
        assert_eq!(status, StatusCode::FORBIDDEN, "{body}: {reply}");
        assert!(message(&reply).contains(expected), "{body}: {reply}");
    }
    for body in [
        json!({"parent_session_id": 42}),
        json!({"parent_session_id": [parent]}),
    ] {
        let (status, reply) = create(&toold, body.clone()).await;
        assert_eq!(status, StatusCode::BAD_REQUEST, "{body}: {reply}");
        assert!(
            message(&reply).contains("expected a string"),
            "{body}: {reply}"
        );
    }
    let (status, reply) = create(&toold, json!({"parent_session_id": MISSING})).await;
    assert_eq!(status, StatusCode::NOT_FOUND, "{reply}");
    assert_eq!(message(&reply), format!("unknown session \"{MISSING}\""));
    let reply = toold
        .post_bytes("/v1/sessions", br#"{"parent_session_id": "#.to_vec())
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    let huge = json!({"parent_session_id": "x".repeat(20 * 1024 * 1024)});
    let reply = toold.post("/v1/sessions", &huge).await;
    assert_eq!(
        reply.status,
        StatusCode::PAYLOAD_TOO_LARGE,
        "{}",
        reply.body
    );
    // Nothing refused was made.
    let listed = toold.get("/v1/sessions").await.body;
    assert_eq!(listed["sessions"].as_array().unwrap().len(), 3, "{listed}");
}

#[tokio::test]
async fn closing_the_parent_closes_its_child() {
    let toold = Toold::start();
    let parent = toold.session().await;
    let (_, child) = create(&toold, json!({"parent_session_id": parent})).await;
    let child = child["id"].as_str().unwrap();
    let reply = toold.delete(&format!("/v1/sessions/{parent}")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let reply = toold.get(&format!("/v1/sessions/{child}")).await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    let listed = toold.get("/v1/sessions").await.body;
    assert_eq!(listed["sessions"], json!([]), "{listed}");
}

#[tokio::test]
async fn only_who_may_change_the_parent_makes_it_a_child() {
    let toold = auth::daemon();
    let parent = auth::session_of(&toold, AGENT_A, json!({})).await;
    let as_b = auth::post(
        &toold,
        AGENT_B,
        "/v1/sessions",
        json!({"parent_session_id": parent}),
    )
    .await;
    let missing = auth::post(
        &toold,
        AGENT_B,
        "/v1/sessions",
        json!({"parent_session_id": MISSING}),
    )
    .await;
    auth::like_missing(&as_b, &missing, (&parent, MISSING), &["agent-a"]);
    let as_observer = auth::post(
        &toold,
        OBSERVER,
        "/v1/sessions",
        json!({"parent_session_id": parent}),
    )
    .await;
    assert_eq!(
        as_observer.status,
        StatusCode::FORBIDDEN,
        "{}",
        as_observer.body
    );
    // The admin may, and the child is still A's.
    let as_admin = toold
        .post("/v1/sessions", &json!({"parent_session_id": parent}))
        .await;
    assert_eq!(as_admin.status, StatusCode::CREATED, "{}", as_admin.body);
    assert_eq!(as_admin.body["principal"], "agent-a");
    let child = as_admin.body["id"].as_str().unwrap();
    let seen = auth::get(&toold, AGENT_A, &format!("/v1/sessions/{child}")).await;
    assert_eq!(seen.status, StatusCode::OK, "{}", seen.body);
}

/// Frames of `stream` until one of `type` in session `session`; every frame read.
async fn until(stream: &mut SseReader, event: &str, session: &str) -> Vec<Value> {
    let mut seen = Vec::new();
    loop {
        let frame = stream.next().await.expect("the stream stays open");
        let done = frame.event == event && frame.data["session_id"] == session;
        seen.push(frame.data);
        if done {
            return seen;
        }
    }
}

#[tokio::test]
async fn the_parents_subscribers_get_the_childs_events_tagged_with_the_child() {
    let toold = Toold::start();
    let parent = toold.session().await;
    let other = toold.session().await;
    let mut on_parent = toold
        .sse(&format!("/v1/sessions/{parent}/events"), None, None)
        .await;
    let mut filtered = toold
        .sse(
            &format!("/v1/events?session={parent}&type=tool:post"),
            None,
            None,
        )
        .await;
    let (_, child) = create(&toold, json!({"parent_session_id": parent})).await;
    let child = child["id"].as_str().unwrap().to_owned();
    toold
        .call_one(
            &other,
            "write_file",
            json!({"file_path": "o.txt", "content": "o"}),
        )
        .await;
    let result = toold
        .call_one(
            &child,
            "write_file",
            json!({"file_path": "c.txt", "content": "c"}),
        )
        .await;
    assert_eq!(result["is_error"], false, "{result}");

    let seen = until(&mut on_parent, "tool:post", &child).await;
    let types: Vec<&str> = seen.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert!(
        types.contains(&"session:start") && types.contains(&"tool:pre"),
        "{types:?}"
    );
    assert!(
        seen.iter().all(|e| e["session_id"] == child),
        "only the child's: {seen:?}"
    );
    let seen = until(&mut filtered, "tool:post", &child).await;
    assert_eq!(
        seen.len(),
        1,
        "the type filter holds for relayed events: {seen:?}"
    );
    assert_eq!(seen[0]["tool"], "write_file");

    // Replayed too: a subscriber resuming from before the child existed.
    let mut resumed = toold
        .sse(&format!("/v1/sessions/{parent}/events"), None, Some(0))
        .await;
    let seen = until(&mut resumed, "tool:post", &child).await;
    assert!(
        seen.iter()
            .any(|e| e["type"] == "session:start" && e["session_id"] == parent)
    );
    assert!(seen.iter().all(|e| e["session_id"] != other), "{seen:?}");
    // The child's own stream has the child's events alone.
    let mut on_child = toold
        .sse(&format!("/v1/sessions/{child}/events"), None, Some(0))
        .await;
    let seen = until(&mut on_child, "tool:post", &child).await;
    assert!(seen.iter().all(|e| e["session_id"] == child), "{seen:?}");
}
