//! The image cache through the real daemon: pull, list, delete (refused while in use), twenty
//! sessions pulling once, and the failures that must leave nothing behind.

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;
use crate::support::registry::IMAGE_ENV;

fn workspaces(toold: &Toold) -> Vec<String> {
    let dir = toold.dir.path().join("data/workspaces");
    std::fs::read_dir(dir)
        .map(|d| {
            d.flatten()
                .map(|e| e.file_name().to_string_lossy().into_owned())
                .collect()
        })
        .unwrap_or_default()
}

fn cached_entries(toold: &Toold) -> Vec<String> {
    let dir = toold.dir.path().join("data/images");
    let mut out: Vec<String> = std::fs::read_dir(&dir)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n != "tmp")
        .collect();
    out.extend(
        std::fs::read_dir(dir.join("tmp"))
            .unwrap()
            .flatten()
            .map(|e| format!("tmp/{}", e.file_name().to_string_lossy())),
    );
    out
}

async fn sessions(toold: &Toold) -> Vec<Value> {
    toold.get("/v1/sessions").await.body["sessions"]
        .as_array()
        .unwrap()
        .clone()
}

#[tokio::test]
async fn an_image_is_pulled_listed_leased_and_deleted_only_when_unused() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let pulled = toold
        .post("/v1/images/pull", &json!({"image": image}))
        .await;
    assert_eq!(pulled.status, StatusCode::OK, "{}", pulled.body);
    let digest = pulled.body["digest"].as_str().unwrap().to_owned();
    assert!(digest.starts_with("sha256:"), "{}", pulled.body);
    assert!(
        pulled.body["env"]
            .as_array()
            .unwrap()
            .contains(&json!(IMAGE_ENV)),
        "{}",
        pulled.body
    );
    assert!(pulled.body["size_bytes"].as_u64().unwrap() > 500_000);
    let rootfs = toold
        .dir
        .path()
        .join("data/images")
        .join(digest.trim_start_matches("sha256:"))
        .join("rootfs");
    assert!(rootfs.join("etc/marker").is_file());

    let listed = toold.get("/v1/images").await;
    assert_eq!(listed.body["images"][0]["digest"], json!(digest));
    assert!(
        listed.body["images"][0]["references"]
            .as_array()
            .unwrap()
            .contains(&json!(image))
    );

    let created = toold
        .post("/v1/sessions", &json!({"environment": {"image": image}}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.body);
    let environment = &created.body["environment"];
    assert_eq!(environment["digest"], json!(digest));
    assert!(
        ["bwrap", "landlock"].contains(&environment["isolation"].as_str().unwrap()),
        "{environment}"
    );
    assert_eq!(environment["network"], "none");
    assert_eq!(environment["workdir"], "/workspace");
    assert_eq!(environment["limits"]["memory_mb"], 2048);
    let id = created.body["id"].as_str().unwrap().to_owned();
    assert_eq!(toold.get("/v1/images").await.body["images"][0]["in_use"], 1);

    let refused = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains(&digest)
    );
    assert!(rootfs.join("etc/marker").is_file());

    assert_eq!(
        toold.delete(&format!("/v1/sessions/{id}")).await.status,
        StatusCode::OK
    );
    let deleted = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    assert!(!rootfs.exists());
    assert_eq!(toold.get("/v1/images").await.body["images"], json!([]));
    let again = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(again.status, StatusCode::NOT_FOUND, "{}", again.body);

    let metrics = toold.get_text("/metrics").await.1;
    assert!(
        metrics.contains("toold_image_pulls_total{outcome=\"ok\"}"),
        "{metrics}"
    );
    assert!(metrics.contains("toold_image_cache_bytes"), "{metrics}");
}

#[tokio::test]
async fn twenty_sessions_created_at_once_pull_the_image_once() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let before = registry.blob_gets().len();
    let image = registry.image("test/busybox:1");
    let body = json!({"environment": {"image": image}});
    let creations = (0..20).map(|_| toold.post("/v1/sessions", &body));
    let replies = futures::future::join_all(creations).await;
    let mut digests = Vec::new();
    for reply in &replies {
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        digests.push(reply.body["environment"]["digest"].clone());
    }
    digests.dedup();
    assert_eq!(digests.len(), 1, "{digests:?}");
    let gets = registry.blob_gets();
    let fetched = &gets[before..];
    let mut distinct = fetched.to_vec();
    distinct.sort();
    distinct.dedup();
    // One config and one layer, each fetched once.
    assert_eq!(distinct.len(), 2, "{fetched:?}");
    assert_eq!(fetched.len(), 2, "each blob fetched once: {fetched:?}");
    let listed = toold.get("/v1/images").await;
    assert_eq!(listed.body["images"][0]["in_use"], 20);
}

#[tokio::test]
async fn an_unknown_image_a_stopped_registry_and_a_tampered_blob_fail_cleanly() {
    let Some((mut registry, toold)) = fixture("") else {
        return;
    };
    let missing = registry.image("test/nothing:1");
    let reply = toold
        .post("/v1/sessions", &json!({"environment": {"image": missing}}))
        .await;
    assert_eq!(reply.status, StatusCode::NOT_FOUND, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(&missing), "{message}");

    // A blob whose bytes are not the ones its digest names.
    for blob in registry.blob_files() {
        let mut bytes = std::fs::read(&blob).unwrap();
        if bytes.len() > 10_000 {
            let at = bytes.len() / 2;
            bytes[at] ^= 0xff;
            std::fs::write(&blob, bytes).unwrap();
        }
    }
    let image = registry.image("test/busybox:1");
    let reply = toold
        .post("/v1/sessions", &json!({"environment": {"image": image}}))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&image) && message.contains("digest"),
        "{message}"
    );
    assert_eq!(reply.body["error"]["code"], "bad_gateway");

    registry.stop();
    let reply = toold
        .post("/v1/sessions", &json!({"environment": {"image": image}}))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_GATEWAY, "{}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(
        message.contains(&image) && message.contains("unreachable"),
        "{message}"
    );
    let pull = toold
        .post("/v1/images/pull", &json!({"image": image}))
        .await;
    assert_eq!(pull.status, StatusCode::BAD_GATEWAY, "{}", pull.body);

    // Nothing behind: no session, no workspace, nothing in the cache.
    assert_eq!(sessions(&toold).await, Vec::<Value>::new());
    assert_eq!(workspaces(&toold), Vec::<String>::new());
    assert_eq!(cached_entries(&toold), Vec::<String>::new());
    let metrics = toold.get_text("/metrics").await.1;
    assert!(
        metrics.contains("toold_image_pulls_total{outcome=\"error\"}"),
        "{metrics}"
    );
}

#[tokio::test]
async fn bad_environment_requests_are_refused_and_create_nothing() {
    let Some((registry, toold)) = fixture(
        "[environments]\ndefault_limits = { memory_mb = 512 }\nmax_limits = { memory_mb = 1024 }\n",
    ) else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let outside = tempfile::tempdir().unwrap();
    let cases = [
        (json!({"environment": "busybox"}), 400, "EnvironmentRequest"),
        (
            json!({"environment": {"image": 7}}),
            400,
            "expected a string",
        ),
        (
            json!({"environment": {"image": image, "colour": "red"}}),
            400,
            "colour",
        ),
        (json!({"environment": {}}), 400, "image or rootfs"),
        (
            json!({"environment": {"image": image, "rootfs": "/srv"}}),
            400,
            "not both",
        ),
        (
            json!({"environment": {"image": "UPPER CASE:tag"}}),
            400,
            "not a valid reference",
        ),
        (
            json!({"environment": {"image": image, "limits": {"memory_mb": 4096}}}),
            400,
            "memory_mb = 4096",
        ),
        (
            json!({"environment": {"image": image, "limits": {"pids": -1}}}),
            400,
            "u64",
        ),
        (
            json!({"environment": {"image": image}, "working_directory": "/tmp"}),
            400,
            "workdir",
        ),
        (
            json!({"environment": {"image": image, "isolation": "docker"}}),
            400,
            "unknown variant",
        ),
        (
            json!({"environment": {"image": image, "workdir": "../etc"}}),
            400,
            "workdir",
        ),
        (
            json!({"environment": {"image": image, "workdir": "/a/../../etc"}}),
            400,
            "workdir",
        ),
        (
            json!({"environment": {"image": image, "env": {"A=B": "1"}}}),
            400,
            "A=B",
        ),
        (
            json!({"environment": {"rootfs": outside.path()}}),
            403,
            "rootfs",
        ),
        (
            json!({"environment": {"rootfs": "/nonexistent/root"}}),
            404,
            "rootfs",
        ),
    ];
    for (body, status, needle) in cases {
        let reply = toold.post("/v1/sessions", &body).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.body);
        let text = reply.body.to_string();
        assert!(text.contains(needle), "{body}: {text}");
    }
    let bad = [
        ("/v1/images/pull", json!({"image": 1}), 400),
        ("/v1/images/pull", json!({"image": "x", "extra": true}), 400),
        ("/v1/images/pull", json!({}), 400),
    ];
    for (path, body, status) in bad {
        let reply = toold.post(path, &body).await;
        assert_eq!(reply.status.as_u16(), status, "{body}: {}", reply.body);
    }
    let huge = vec![b'x'; 64 << 20];
    assert_eq!(
        toold.post_bytes("/v1/images/pull", huge).await.status,
        StatusCode::PAYLOAD_TOO_LARGE
    );
    for digest in [
        "sha256:..%2F..%2Fetc",
        "sha256:ABC",
        "md5:00",
        "..",
        "sha256:%2E%2E",
    ] {
        let reply = toold.delete(&format!("/v1/images/{digest}")).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{digest}: {}",
            reply.body
        );
    }
    assert_eq!(sessions(&toold).await, Vec::<Value>::new());
    assert_eq!(workspaces(&toold), Vec::<String>::new());
    assert_eq!(toold.get("/v1/images").await.body["images"], json!([]));
    // A plain session's snapshot is a workspace, not a root: refused with an environment.
    let plain = toold.post("/v1/sessions", &json!({})).await;
    let plain_id = plain.body["id"].as_str().expect("a session id").to_owned();
    let snapshot = toold
        .post(&format!("/v1/sessions/{plain_id}/snapshots"), &json!({}))
        .await;
    assert_eq!(snapshot.status.as_u16(), 201, "{}", snapshot.body);
    let body = json!({"environment": {"image": image}, "from_snapshot": snapshot.body["id"]});
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status.as_u16(), 400, "{body}: {}", reply.body);
    assert!(
        reply
            .body
            .to_string()
            .contains("a snapshot of a session without an environment"),
        "{}",
        reply.body
    );
}
