//! A Postgres fleet: a snapshot taken on daemon A starts a session on daemon B, with nothing
//! shared between them but the database and the workspace root both allow (its layers live in
//! that root's `.toold-snapshots`). Outside CI without `TOOLD_TEST_POSTGRES_URL` it skips.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::json;

use super::put_file;
use crate::http::harness::Toold;
use crate::support::postgres::{TestSchema, postgres_url};

fn daemon(url: &str, shared: &std::path::Path) -> Toold {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let shared = shared.to_str().unwrap();
    Toold::start_with(dir, &["--database-url", url, "--allowed-root", shared])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_snapshot_taken_on_a_starts_a_session_on_b() {
    let Some(server) = postgres_url("workspace fleet test") else {
        return;
    };
    let schema = TestSchema::create(&server).await;
    let shared = tempfile::tempdir().unwrap();
    let project = shared.path().canonicalize().unwrap().join("repo");
    std::fs::create_dir(&project).unwrap();
    let a = daemon(&schema.url(), shared.path());
    let b = daemon(&schema.url(), shared.path());

    let session = a.session_with(&json!({"working_directory": project})).await;
    assert_eq!(
        put_file(&a, &session, "src/lib.rs", b"fn from_a() {}".to_vec())
            .await
            .status,
        StatusCode::OK
    );
    let snap = a
        .post(&format!("/v1/sessions/{session}/snapshots"), &json!({}))
        .await;
    assert_eq!(snap.status, StatusCode::CREATED, "{}", snap.body);
    let id = snap.body["id"].as_str().unwrap();
    assert!(shared.path().join(".toold-snapshots").join(id).is_dir());

    let on_b = b.post("/v1/sessions", &json!({"from_snapshot": id})).await;
    assert_eq!(on_b.status, StatusCode::CREATED, "{}", on_b.body);
    assert_ne!(on_b.body["owner"], snap.body["owner"]);
    let from = on_b.body["id"].as_str().unwrap();
    let (status, _, body) =
        super::get_bytes(&b, &format!("/v1/sessions/{from}/files/src/lib.rs"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, b"fn from_a() {}");
    let ran = b
        .call_one(from, "bash", json!({"command": "cat src/lib.rs"}))
        .await;
    assert_eq!(
        ran["output"].as_str().unwrap().trim(),
        "fn from_a() {}",
        "{ran}"
    );
    // B lists it too (one database), and A's session is unchanged by B's writes.
    put_file(&b, from, "src/lib.rs", b"changed on b".to_vec()).await;
    let (_, _, on_a) =
        super::get_bytes(&a, &format!("/v1/sessions/{session}/files/src/lib.rs"), &[]).await;
    assert_eq!(on_a, b"fn from_a() {}");
    assert_eq!(
        b.get(&format!("/v1/snapshots/{id}")).await.status,
        StatusCode::OK
    );
    drop((a, b));
    drop(schema);
}
