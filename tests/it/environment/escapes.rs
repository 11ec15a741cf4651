//! Escapes from an environment's `bash`, for each tier: a host file named by its absolute
//! path, a link through `/proc/1/root`, a write outside `workdir` in a `workspace_write`
//! session. None reaches the host (DESIGN §12).

use serde_json::json;

use super::fixture;
use super::gvisor::{bash, runsc_available, session, text};

/// Runs the escapes in a session of `isolation` on a daemon that has a secret on the host.
async fn no_escape(isolation: &str) {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let secret = toold.dir.path().join("host-secret.txt");
    std::fs::write(&secret, "host-secret-bytes\n").unwrap();
    let secret = secret.canonicalize().unwrap();
    let image = registry.image("test/busybox:1");
    let id = session(
        &toold,
        &image,
        "workspace_write",
        json!({"isolation": isolation}),
    )
    .await;
    let tier = bash(&toold, &id, "true").await;
    assert_eq!(tier["metadata"]["sandbox"], isolation, "{tier}");

    // By its absolute host path: not in the environment's root.
    let by_path = bash(&toold, &id, &format!("cat {}", secret.display())).await;
    assert!(!text(&by_path).contains("host-secret-bytes"), "{by_path}");
    assert!(text(&by_path).contains("No such file"), "{by_path}");
    // Through /proc/1/root: pid 1 is the sandbox's own, its root the environment's.
    let linked = bash(
        &toold,
        &id,
        &format!(
            "ln -s /proc/1/root{} /workspace/link; cat /workspace/link; cat /proc/1/root{}",
            secret.display(),
            secret.display()
        ),
    )
    .await;
    assert!(!text(&linked).contains("host-secret-bytes"), "{linked}");
    let by_tool = toold
        .call_one(&id, "read_file", json!({"file_path": "/workspace/link"}))
        .await;
    assert!(!text(&by_tool).contains("host-secret-bytes"), "{by_tool}");
    // A host path under the data directory (every session's root lives there).
    let data = toold.dir.path().join("data").canonicalize().unwrap();
    let listed = bash(&toold, &id, &format!("ls {}; echo listed", data.display())).await;
    assert!(!text(&listed).contains("environments"), "{listed}");

    // Writes outside the workspace: refused, and nothing lands on the host.
    let target = toold.dir.path().join("written-from-inside");
    let wrote = bash(
        &toold,
        &id,
        &format!(
            "echo x > /etc/escaped; echo x > /escaped; echo x > {}; echo x > /proc/1/root/etc/escaped2; echo done",
            target.display()
        ),
    )
    .await;
    assert!(text(&wrote).contains("done"), "{wrote}");
    assert!(!target.exists(), "{wrote}");
    let root = bash(&toold, &id, "ls /etc/escaped /escaped /etc/escaped2 2>&1").await;
    assert!(!text(&root).contains("\n/etc/escaped\n"), "{root}");
    let etc = toold
        .call_one(&id, "read_file", json!({"file_path": "/etc/escaped"}))
        .await;
    assert_eq!(etc["is_error"], true, "{etc}");
    let top = toold
        .call_one(&id, "read_file", json!({"file_path": "/escaped"}))
        .await;
    assert_eq!(top["is_error"], true, "{top}");
}

#[tokio::test]
async fn bubblewrap_environments_keep_host_files_out() {
    no_escape("bwrap").await;
}

#[tokio::test]
async fn gvisor_environments_keep_host_files_out() {
    if !runsc_available() {
        return;
    }
    no_escape("gvisor").await;
}
