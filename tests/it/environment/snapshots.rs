//! Snapshots and forks of environment sessions through the real daemon (DESIGN §12, issue
//! 38): a snapshot carries what the session wrote anywhere in its root (the workspace at
//! `workdir` included, deletions too), a session from it has the same environment over the
//! same image, each session's writes stay its own, a fork copies none of the image, the image
//! stays leased while such a session lives, and a restart mounts it again.

use std::path::Path;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture;
use super::gvisor::{bash, runsc_available, text};
use crate::http::harness::Toold;
use crate::support::registry::MARKER;

async fn read(toold: &Toold, session: &str, path: &str) -> Value {
    toold
        .call_one(session, "read_file", json!({"file_path": path}))
        .await
}

/// Snapshot `session`; its id.
async fn snapshot(toold: &Toold, session: &str) -> String {
    let reply = toold
        .post(&format!("/v1/sessions/{session}/snapshots"), &json!({}))
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().expect("a snapshot id").to_owned()
}

/// A session from `snapshot`; its answer.
async fn from_snapshot(toold: &Toold, snapshot: &str) -> Value {
    let body = json!({"from_snapshot": snapshot, "permission_mode": "danger_full_access"});
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body
}

/// `bash` in `session`, which must succeed; its output.
async fn run(toold: &Toold, session: &str, command: &str) -> String {
    let out = bash(toold, session, command).await;
    assert_eq!(out["is_error"], false, "{command}: {out}");
    text(&out).to_owned()
}

/// The source writes in its root and its workspace and deletes an image file.
const SOURCE_WRITES: &str = "echo source-root > /etc/marker-from-source && \
     echo source-workspace > /workspace/ws.txt && rm /etc/os-release";

#[tokio::test]
async fn a_session_from_an_environment_snapshot_sees_the_sources_root_and_keeps_its_own() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let source = toold
        .session_with(&json!({
            "environment": {"image": image, "env": {"SNAP_VAR": "from-request"}},
            "permission_mode": "danger_full_access"}))
        .await;
    run(&toold, &source, SOURCE_WRITES).await;
    let id = snapshot(&toold, &source).await;

    let created = from_snapshot(&toold, &id).await;
    let from = created["id"].as_str().unwrap().to_owned();
    assert_eq!(created["copy"], "cow", "{created}");
    assert_eq!(created["from_snapshot"], id.as_str(), "{created}");
    let source_env = toold.get(&format!("/v1/sessions/{source}")).await.body["environment"].clone();
    let env = &created["environment"];
    for field in [
        "image",
        "digest",
        "isolation",
        "network",
        "limits",
        "workdir",
        "env",
    ] {
        assert_eq!(env[field], source_env[field], "{field}: {created}");
    }
    assert_eq!(env["isolation"], "bwrap", "{created}");

    // Both of the source's writes, through read_file and bash; its deletion too.
    let marker = read(&toold, &from, "/etc/marker-from-source").await;
    assert!(text(&marker).ends_with("\tsource-root\n"), "{marker}");
    let workspace = read(&toold, &from, "/workspace/ws.txt").await;
    assert!(
        text(&workspace).ends_with("\tsource-workspace\n"),
        "{workspace}"
    );
    let out = run(
        &toold,
        &from,
        "cat /etc/marker-from-source ws.txt /etc/marker; pwd; echo var=$SNAP_VAR; \
         test -e /etc/os-release || echo os-release-gone",
    )
    .await;
    for expected in [
        "source-root",
        "source-workspace",
        MARKER,
        "/workspace",
        "var=from-request",
        "os-release-gone",
    ] {
        assert!(out.contains(expected), "{expected}: {out}");
    }

    // Writes after the snapshot stay with the session that made them, both ways.
    run(&toold, &from, "echo mine > /etc/from-only").await;
    run(&toold, &source, "echo later > /etc/source-later").await;
    let seen = run(&toold, &source, "cat /etc/from-only 2>&1; true").await;
    assert!(seen.contains("No such file"), "{seen}");
    let seen = run(&toold, &from, "cat /etc/source-later 2>&1; true").await;
    assert!(seen.contains("No such file"), "{seen}");
    assert_eq!(
        read(&toold, &source, "/etc/from-only").await["is_error"],
        true
    );

    // The session from the snapshot holds the image, the source closed.
    let digest = env["digest"].as_str().unwrap().to_owned();
    let closed = toold.delete(&format!("/v1/sessions/{source}")).await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.body);
    let refused = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);

    // A restart mounts its root again: the snapshot's layer and its own writes, and the lease.
    let config = toold.dir.path().join("toold.toml");
    let toold = toold.terminate_and_restart(&["--config", config.to_str().unwrap()]);
    let out = run(
        &toold,
        &from,
        "cat /etc/marker-from-source /etc/from-only ws.txt",
    )
    .await;
    assert_eq!(out, "source-root\nmine\nsource-workspace\n");
    let refused = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.body);

    // With the image gone from the cache, a session from the snapshot pulls it by digest.
    let closed = toold.delete(&format!("/v1/sessions/{from}")).await;
    assert_eq!(closed.status, StatusCode::OK, "{}", closed.body);
    let deleted = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
    let again = from_snapshot(&toold, &id).await;
    assert_eq!(again["environment"]["digest"], digest.as_str(), "{again}");
    let again = again["id"].as_str().unwrap();
    let out = run(&toold, again, "cat /etc/marker-from-source /etc/marker").await;
    assert!(out.contains("source-root") && out.contains(MARKER), "{out}");
    toold.terminate();
}

#[tokio::test]
async fn a_fork_of_an_environment_session_shares_the_image_and_keeps_each_forks_writes() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let source = toold
        .session_with(
            &json!({"environment": {"image": image}, "permission_mode": "danger_full_access"}),
        )
        .await;
    run(&toold, &source, SOURCE_WRITES).await;
    let fork = toold
        .post(&format!("/v1/sessions/{source}/fork"), &json!({"count": 2}))
        .await;
    assert_eq!(fork.status, StatusCode::CREATED, "{}", fork.body);
    let forks: Vec<String> = fork.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .collect();
    assert_eq!(forks.len(), 2, "{}", fork.body);
    for (i, id) in forks.iter().enumerate() {
        let shown = toold.get(&format!("/v1/sessions/{id}")).await.body;
        assert_eq!(shown["environment"]["isolation"], "bwrap", "{shown}");
        assert_eq!(shown["permission_mode"], "danger_full_access", "{shown}");
        let out = run(
            &toold,
            id,
            &format!("cat /etc/marker-from-source ws.txt && echo {i} > /etc/own"),
        )
        .await;
        assert_eq!(out, "source-root\nsource-workspace\n");
    }
    for (i, id) in forks.iter().enumerate() {
        assert_eq!(run(&toold, id, "cat /etc/own").await, format!("{i}\n"));
    }
    let seen = run(&toold, &source, "cat /etc/own 2>&1; true").await;
    assert!(seen.contains("No such file"), "{seen}");

    // The snapshot's layer holds the source's changes and nothing of the image.
    let forked = fork.body["snapshot_id"].as_str().unwrap();
    let layer = toold
        .projects()
        .join(".toold-snapshots")
        .join(forked)
        .join("layer");
    assert!(
        layer.join("etc/marker-from-source").is_file(),
        "{}",
        layer.display()
    );
    assert!(layer.join("workspace/ws.txt").is_file());
    assert!(
        !layer.join("etc/marker").exists(),
        "an image file was copied"
    );
    assert!(
        !layer.join("bin").exists(),
        "the image's binaries were copied"
    );

    // A snapshot of a fork stacks on the first: it carries the source's and the fork's writes.
    let second = snapshot(&toold, &forks[0]).await;
    let created = from_snapshot(&toold, &second).await;
    let out = run(
        &toold,
        created["id"].as_str().unwrap(),
        "cat /etc/marker-from-source /etc/own",
    )
    .await;
    assert_eq!(out, "source-root\n0\n");
}

#[tokio::test]
async fn a_gvisor_sessions_snapshot_starts_gvisor_sessions() {
    if !runsc_available() {
        return;
    }
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let source = toold
        .session_with(&json!({
            "environment": {"image": image, "isolation": "gvisor"},
            "permission_mode": "danger_full_access"}))
        .await;
    run(&toold, &source, SOURCE_WRITES).await;
    let id = snapshot(&toold, &source).await;
    let created = from_snapshot(&toold, &id).await;
    assert_eq!(created["environment"]["isolation"], "gvisor", "{created}");
    let from = created["id"].as_str().unwrap();
    let out = bash(
        &toold,
        from,
        "cat /etc/marker-from-source /workspace/ws.txt",
    )
    .await;
    assert_eq!(out["metadata"]["sandbox"], "gvisor", "{out}");
    assert_eq!(text(&out), "source-root\nsource-workspace\n", "{out}");
}

#[tokio::test]
async fn an_environment_snapshot_with_an_environment_too_is_refused() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let source = toold
        .session_with(&json!({"environment": {"image": image}}))
        .await;
    let id = snapshot(&toold, &source).await;
    let body = json!({"from_snapshot": id, "environment": {"image": image}});
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(
        reply
            .body
            .to_string()
            .contains("give no environment with it"),
        "{}",
        reply.body
    );
}

/// A daemon for `registry` on the Postgres schema `url` whose allowed root (`projects/`, the
/// harness's) is `shared`, as a fleet's daemons share theirs.
fn fleet_daemon(registry: &crate::support::registry::Registry, url: &str, shared: &Path) -> Toold {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    std::os::unix::fs::symlink(shared, dir.path().join("projects")).unwrap();
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, registry.settings()).unwrap();
    let file = file.to_str().unwrap().to_owned();
    Toold::start_with(dir, &["--config", &file, "--database-url", url])
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_environment_snapshot_taken_on_a_starts_a_session_on_b_which_pulls_the_image() {
    use crate::support::postgres::{TestSchema, postgres_url};
    let Some(server) = postgres_url("environment snapshot fleet test") else {
        return;
    };
    if let Err(why) = crate::support::registry::available() {
        crate::support::skip_unless_ci(&why);
        return;
    }
    let registry = crate::support::registry::Registry::start();
    let schema = TestSchema::create(&server).await;
    let shared = tempfile::tempdir().unwrap();
    let a = fleet_daemon(&registry, &schema.url(), shared.path());
    let b = fleet_daemon(&registry, &schema.url(), shared.path());
    let image = registry.image("test/busybox:1");
    let source = a
        .session_with(
            &json!({"environment": {"image": image}, "permission_mode": "danger_full_access"}),
        )
        .await;
    run(&a, &source, SOURCE_WRITES).await;
    let id = snapshot(&a, &source).await;
    let layer = shared
        .path()
        .join(".toold-snapshots")
        .join(&id)
        .join("layer");
    assert!(
        layer.join("etc/marker-from-source").is_file(),
        "{}",
        layer.display()
    );

    // B has never pulled the image: the session's creation pulls it by digest.
    assert_eq!(b.get("/v1/images").await.body["images"], json!([]));
    let on_b = from_snapshot(&b, &id).await;
    assert_ne!(
        on_b["owner"],
        a.get(&format!("/v1/sessions/{source}")).await.body["owner"]
    );
    let from = on_b["id"].as_str().unwrap();
    let out = run(
        &b,
        from,
        "cat /etc/marker-from-source /workspace/ws.txt /etc/marker",
    )
    .await;
    assert!(out.starts_with("source-root\nsource-workspace\n"), "{out}");
    assert!(out.contains(MARKER), "{out}");
    let cached = b.get("/v1/images").await.body;
    assert_eq!(
        cached["images"][0]["digest"], on_b["environment"]["digest"],
        "{cached}"
    );
    drop((a, b));
    drop(schema);
}
