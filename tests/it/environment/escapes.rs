//! Escapes from an environment's `bash`, for each tier (`bwrap`, `landlock`, `gvisor`): a host
//! file named by its absolute path, a link through `/proc/1/root`, a write outside `workdir`
//! in a `workspace_write` session, and the plain sessions' escape suite (`shell::sandbox`):
//! writes to `$HOME`, to the workspace's parent, through a symlink the host made in the
//! workspace and through `/proc/self/root`, and a connection to a loopback port. None
//! reaches the host (DESIGN §12).

use std::net::TcpListener;

use serde_json::json;

use super::fixture;
use super::gvisor::{bash, runsc_available, session, text};
use crate::http::harness::Toold;

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

    // The plain sessions' suite: each write fails and reaches nothing on the host.
    let outside = tempfile::tempdir().unwrap();
    let outside = outside.path().canonicalize().unwrap();
    // The link is made inside (the session's root is mounted in the daemon's namespace only);
    // it names the host directory, which inside is no directory at all.
    let linked = bash(
        &toold,
        &id,
        &format!("busybox ln -s {} /workspace/link-out", outside.display()),
    )
    .await;
    assert_eq!(linked["is_error"], false, "{linked}");
    let home = std::path::PathBuf::from(std::env::var("HOME").expect("HOME is set"));
    let mark = format!("toold-env-escape-{}", std::process::id());
    let targets = [
        ("$HOME", format!("\"$HOME/{mark}\""), home.join(&mark)),
        (
            "a symlink",
            "link-out/through-symlink".to_owned(),
            outside.join("through-symlink"),
        ),
        (
            "/proc/self/root",
            format!("/proc/self/root{}/through-proc", outside.display()),
            outside.join("through-proc"),
        ),
    ];
    for (what, word, host_path) in targets {
        let wrote = bash(&toold, &id, &format!("echo escaped > {word}")).await;
        assert_eq!(
            wrote["is_error"], true,
            "{isolation}: writing to {what}: {wrote}"
        );
        assert!(
            !host_path.exists(),
            "{isolation}: writing to {what} reached {}",
            host_path.display()
        );
    }
    // The workspace's parent is the environment's `/`, outside `workdir`.
    let parent = bash(&toold, &id, &format!("echo escaped > ../{mark}")).await;
    assert_eq!(parent["is_error"], true, "{isolation}: {parent}");
    let landed = toold
        .call_one(&id, "read_file", json!({"file_path": format!("/{mark}")}))
        .await;
    assert_eq!(landed["is_error"], true, "{isolation}: {landed}");
    loopback_is_unreachable(&toold, &id, isolation).await;
}

/// A loopback port on the host is not reached from session `id` (`network = "none"`).
pub async fn loopback_is_unreachable(toold: &Toold, id: &str, isolation: &str) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let connect = bash(
        toold,
        id,
        &format!("echo hi | busybox nc 127.0.0.1 {port}; echo nc=$?"),
    )
    .await;
    println!("{isolation}, connecting: {}", text(&connect));
    assert!(!text(&connect).contains("nc=0"), "{isolation}: {connect}");
    assert!(
        listener.accept().is_err(),
        "{isolation}: the loopback listener got a connection"
    );
}

#[tokio::test]
async fn bubblewrap_environments_keep_host_files_out() {
    no_escape("bwrap").await;
}

#[tokio::test]
async fn landlock_environments_keep_host_files_out() {
    no_escape("landlock").await;
}

#[tokio::test]
async fn gvisor_environments_keep_host_files_out() {
    if !runsc_available() {
        return;
    }
    no_escape("gvisor").await;
}
