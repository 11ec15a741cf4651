//! Snapshots and forks through the real daemon: a session from a snapshot sees the content of
//! its moment; three forks write one file and see only their own write; a snapshot outlives a
//! restart; agents see only their own; quotas.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::put_file;
use crate::http::harness::Toold;

async fn read(toold: &Toold, session: &str, path: &str) -> String {
    let (status, _, body) =
        super::get_bytes(toold, &format!("/v1/sessions/{session}/files/{path}"), &[]).await;
    assert_eq!(status, StatusCode::OK, "{path} in {session}");
    String::from_utf8(body).unwrap()
}

async fn bash(toold: &Toold, session: &str, command: &str) -> String {
    let result = toold
        .call_one(session, "bash", json!({"command": command}))
        .await;
    assert_eq!(result["is_error"], false, "{result}");
    result["output"].as_str().unwrap().trim().to_owned()
}

async fn snapshot(toold: &Toold, session: &str) -> Value {
    let reply = toold
        .post(
            &format!("/v1/sessions/{session}/snapshots"),
            &json!({"name": "before"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body
}

#[tokio::test]
async fn a_session_from_a_snapshot_sees_the_old_content_and_forks_stay_apart() {
    let toold = Toold::start();
    let session = toold.session().await;
    put_file(&toold, &session, "src/state.txt", b"old".to_vec()).await;
    // A background shell running at the snapshot is stopped (it held the old directory).
    bash(&toold, &session, "echo kept > kept.txt").await;
    let snap = snapshot(&toold, &session).await;
    let id = snap["id"].as_str().unwrap();
    assert!(id.starts_with("snap_"));
    assert_eq!(snap["name"], "before");
    assert!(snap["size_bytes"].as_u64().unwrap() >= 8);
    println!("snapshot copy: {}", snap["copy"]);

    // The session runs on, over its frozen layer: its change is its own.
    put_file(&toold, &session, "src/state.txt", b"new".to_vec()).await;
    assert_eq!(
        bash(&toold, &session, "cat src/state.txt kept.txt").await,
        "newkept"
    );
    let from = toold
        .post("/v1/sessions", &json!({"from_snapshot": id}))
        .await;
    assert_eq!(from.status, StatusCode::CREATED, "{}", from.body);
    assert_eq!(from.body["from_snapshot"], id);
    let restored = from.body["id"].as_str().unwrap();
    assert_eq!(read(&toold, restored, "src/state.txt").await, "old");
    assert_eq!(bash(&toold, restored, "cat src/state.txt").await, "old");
    let found = toold
        .call_one(
            restored,
            "grep_search",
            json!({"pattern": "old", "path": "src"}),
        )
        .await;
    assert!(
        found["output"].as_str().unwrap().contains("state.txt"),
        "{found}"
    );

    let fork = toold
        .post(
            &format!("/v1/sessions/{session}/fork"),
            &json!({"count": 3}),
        )
        .await;
    assert_eq!(fork.status, StatusCode::CREATED, "{}", fork.body);
    let forks: Vec<String> = fork.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(forks.len(), 3);
    for (i, fork) in forks.iter().enumerate() {
        assert_eq!(read(&toold, fork, "src/state.txt").await, "new");
        bash(&toold, fork, &format!("echo fork{i} > src/state.txt")).await;
    }
    for (i, fork) in forks.iter().enumerate() {
        assert_eq!(
            read(&toold, fork, "src/state.txt").await,
            format!("fork{i}\n")
        );
        let read_file = toold
            .call_one(fork, "read_file", json!({"file_path": "src/state.txt"}))
            .await;
        assert!(
            read_file["output"]
                .as_str()
                .unwrap()
                .contains(&format!("fork{i}")),
            "{read_file}"
        );
    }
    assert_eq!(read(&toold, &session, "src/state.txt").await, "new");
    assert_eq!(read(&toold, restored, "src/state.txt").await, "old");
    // A closed fork takes its changes with it; the others keep theirs.
    assert_eq!(
        toold
            .delete(&format!("/v1/sessions/{}", forks[0]))
            .await
            .status,
        StatusCode::OK
    );
    assert_eq!(read(&toold, &forks[1], "src/state.txt").await, "fork1\n");

    let listed = toold.get("/v1/snapshots").await;
    assert_eq!(
        listed.body["snapshots"].as_array().unwrap().len(),
        2,
        "{}",
        listed.body
    );
    let bad = [
        json!({"count": 0}),
        json!({"count": 65}),
        json!({"count": "3"}),
        json!({"count": 1, "extra": 1}),
    ];
    for body in bad {
        let reply = toold
            .post(&format!("/v1/sessions/{session}/fork"), &body)
            .await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{body}: {}",
            reply.body
        );
    }
    let reply = toold
        .post("/v1/sessions", &json!({"from_snapshot": "snap_nothing"}))
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND);
    let reply = toold
        .post_bytes(
            &format!("/v1/sessions/{session}/snapshots"),
            b"{not json".to_vec(),
        )
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn a_snapshot_and_the_sessions_over_it_outlive_a_restart() {
    let toold = Toold::start();
    let session = toold.session().await;
    put_file(&toold, &session, "a.txt", b"kept".to_vec()).await;
    let id = snapshot(&toold, &session).await["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let from = toold.session_with(&json!({"from_snapshot": id})).await;
    put_file(&toold, &from, "b.txt", b"mine".to_vec()).await;

    let toold = toold.terminate_and_restart(&[]);
    let again = toold.get(&format!("/v1/snapshots/{id}")).await;
    assert_eq!(again.status, StatusCode::OK, "{}", again.body);
    let later = toold.session_with(&json!({"from_snapshot": id})).await;
    assert_eq!(read(&toold, &later, "a.txt").await, "kept");
    assert_eq!(read(&toold, &from, "a.txt").await, "kept");
    assert_eq!(read(&toold, &from, "b.txt").await, "mine");
    assert_eq!(read(&toold, &session, "a.txt").await, "kept");
    // Deleting it leaves the sessions over it whole.
    assert_eq!(
        toold.delete(&format!("/v1/snapshots/{id}")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        toold.get(&format!("/v1/snapshots/{id}")).await.status,
        StatusCode::NOT_FOUND
    );
    assert_eq!(read(&toold, &later, "a.txt").await, "kept");
    toold.terminate();
}

#[tokio::test]
async fn another_agents_snapshot_is_not_there_and_quotas_hold() {
    use crate::auth::{AGENT_A, AGENT_B, OBSERVER, call, daemon_configured};
    let toold = daemon_configured("[limits]\nsnapshots_per_principal = 1\n", &[]);
    let created = call(
        &toold,
        AGENT_A,
        Method::POST,
        "/v1/sessions",
        Some(json!({})),
    )
    .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let taken = call(
        &toold,
        AGENT_A,
        Method::POST,
        &format!("/v1/sessions/{session}/snapshots"),
        Some(json!({})),
    )
    .await;
    assert_eq!(taken.status, StatusCode::CREATED, "{}", taken.body);
    let id = taken.body["id"].as_str().unwrap().to_owned();
    let again = call(
        &toold,
        AGENT_A,
        Method::POST,
        &format!("/v1/sessions/{session}/snapshots"),
        None,
    )
    .await;
    assert_eq!(
        again.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        again.body
    );
    assert_eq!(again.body["error"]["code"], "limit_exceeded");

    let missing = format!("unknown snapshot \"{id}\"");
    for (method, path) in [
        (Method::GET, format!("/v1/snapshots/{id}")),
        (Method::DELETE, format!("/v1/snapshots/{id}")),
    ] {
        let reply = call(&toold, AGENT_B, method, &path, None).await;
        assert_eq!(reply.status, StatusCode::NOT_FOUND);
        assert_eq!(reply.body["error"]["message"], missing);
    }
    let from = call(
        &toold,
        AGENT_B,
        Method::POST,
        "/v1/sessions",
        Some(json!({"from_snapshot": id})),
    )
    .await;
    assert_eq!(from.status, StatusCode::NOT_FOUND);
    assert_eq!(from.body["error"]["message"], missing);
    let fork = call(
        &toold,
        AGENT_B,
        Method::POST,
        &format!("/v1/sessions/{session}/fork"),
        Some(json!({"count": 1})),
    )
    .await;
    assert_eq!(fork.status, StatusCode::NOT_FOUND);
    let snap = call(
        &toold,
        AGENT_B,
        Method::POST,
        &format!("/v1/sessions/{session}/snapshots"),
        None,
    )
    .await;
    assert_eq!(snap.status, StatusCode::NOT_FOUND);
    let listed = call(&toold, AGENT_B, Method::GET, "/v1/snapshots", None).await;
    assert_eq!(listed.body["snapshots"], json!([]));
    let observed = call(&toold, OBSERVER, Method::GET, "/v1/snapshots", None).await;
    assert_eq!(observed.body["snapshots"].as_array().unwrap().len(), 1);
    let deleted = call(
        &toold,
        OBSERVER,
        Method::DELETE,
        &format!("/v1/snapshots/{id}"),
        None,
    )
    .await;
    assert_eq!(deleted.status, StatusCode::FORBIDDEN);
    let own = call(
        &toold,
        AGENT_A,
        Method::DELETE,
        &format!("/v1/snapshots/{id}"),
        None,
    )
    .await;
    assert_eq!(own.status, StatusCode::OK);
    let after = call(
        &toold,
        AGENT_A,
        Method::POST,
        &format!("/v1/sessions/{session}/snapshots"),
        None,
    )
    .await;
    assert_eq!(
        after.status,
        StatusCode::CREATED,
        "the quota frees with the delete: {}",
        after.body
    );
}

#[tokio::test]
async fn a_snapshot_body_that_is_not_an_object_is_a_400_and_takes_nothing() {
    let toold = Toold::start();
    let session = toold.session().await;
    let path = format!("/v1/sessions/{session}/snapshots");
    for body in [
        &b"[]"[..],
        b"[\"x\"]",
        b"\"before\"",
        b"7",
        b"true",
        b"{\"name\": 7}",
        b"{\"nme\": \"x\"}",
        b"{",
    ] {
        let reply = toold.post_bytes(&path, body.to_vec()).await;
        assert_eq!(
            reply.status,
            StatusCode::BAD_REQUEST,
            "{}: {}",
            String::from_utf8_lossy(body),
            reply.body
        );
        assert_eq!(
            reply.body["error"]["code"], "invalid_request",
            "{}",
            reply.body
        );
    }
    assert_eq!(
        toold.get("/v1/snapshots").await.body["snapshots"],
        json!([])
    );
    // No body, whitespace and `null` (the schema's other `oneOf` arm) name nothing.
    for body in [&b""[..], b" \n", b"null"] {
        let reply = toold.post_bytes(&path, body.to_vec()).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        assert_eq!(reply.body["name"], Value::Null);
    }
}
