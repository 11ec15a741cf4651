//! The `landlock` isolation tier through the real daemon: a session on the registry image
//! with `"isolation": "landlock"` runs its commands in the image's root (`chroot`), with no
//! capabilities and a Landlock ruleset as the boundary: it sees the image and not the host,
//! writes only its workspace, cannot climb out of its root, signal the daemon or reach a
//! loopback port, and its audit rows name the tier (DESIGN §12).

use serde_json::json;

use super::fixture;
use super::gvisor::{bash, session, text};
use crate::support::registry::MARKER;

#[tokio::test]
async fn a_landlock_session_runs_in_the_images_root_and_stays_there() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(
        &toold,
        &image,
        "workspace_write",
        json!({"isolation": "landlock"}),
    )
    .await;
    let shown = toold.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        shown.body["environment"]["isolation"], "landlock",
        "{}",
        shown.body
    );

    // The image's root, its Env, the workspace as the working directory; not the host.
    let out = bash(
        &toold,
        &id,
        "cat /etc/marker; pwd; echo \"mark=$TOOLD_IMAGE_MARK\"; \
         if test -e /usr/bin/python3; then echo host-python; else echo no-python; fi; \
         echo x > /dev/null && echo devnull-ok",
    )
    .await;
    assert_eq!(out["is_error"], false, "{out}");
    assert_eq!(out["metadata"]["sandbox"], "landlock", "{out}");
    let lines: Vec<&str> = text(&out).lines().collect();
    assert!(text(&out).contains(MARKER), "{out}");
    assert!(lines.contains(&"/workspace"), "{out}");
    assert!(lines.contains(&"mark=from-the-image"), "{out}");
    assert!(lines.contains(&"no-python"), "{out}");
    assert!(lines.contains(&"devnull-ok"), "{out}");

    // A write in the workspace is the file read_file reads; outside it, refused.
    let made = bash(&toold, &id, "echo from-landlock > /workspace/made.txt").await;
    assert_eq!(made["is_error"], false, "{made}");
    let read = toold
        .call_one(
            &id,
            "read_file",
            json!({"file_path": "/workspace/made.txt"}),
        )
        .await;
    assert!(text(&read).contains("from-landlock"), "{read}");
    let outside = bash(&toold, &id, "echo x > /etc/nope").await;
    assert_eq!(outside["is_error"], true, "{outside}");
    assert!(text(&outside).contains("denied"), "{outside}");
    let etc = toold
        .call_one(&id, "read_file", json!({"file_path": "/etc/nope"}))
        .await;
    assert_eq!(etc["is_error"], true, "{etc}");

    // No way out: a host file by its path is not in the root; the capabilities are gone, so
    // a chroot (the classic climb out) is refused; the daemon cannot be signalled.
    let secret = toold.dir.path().join("host-secret.txt");
    std::fs::write(&secret, "host-secret-bytes\n").unwrap();
    let secret = secret.canonicalize().unwrap();
    let climb = bash(
        &toold,
        &id,
        &format!(
            "cat {}; busybox chroot /workspace /bin/sh -c true; echo chroot=$?; \
             busybox kill -0 {}; echo kill=$?",
            secret.display(),
            toold.pid()
        ),
    )
    .await;
    let said = text(&climb);
    println!("climbing out: {said}");
    assert!(!said.contains("host-secret-bytes"), "{climb}");
    assert!(!said.contains("chroot=0"), "{climb}");
    assert!(said.contains("chroot="), "{climb}");
    assert!(!said.contains("kill=0"), "{climb}");
    assert!(said.contains("kill="), "{climb}");

    // network = "none": a loopback port on the host is not reached.
    super::escapes::loopback_is_unreachable(&toold, &id, "landlock").await;

    // Every audit row of the session names the tier, the file tools' too.
    let calls = toold.get(&format!("/v1/calls?session={id}")).await;
    let rows = calls.body["calls"].as_array().unwrap();
    assert!(rows.len() >= 5, "{}", calls.body);
    for row in rows {
        assert_eq!(row["isolation"], "landlock", "{row}");
    }
}

#[tokio::test]
async fn a_danger_full_access_landlock_session_writes_its_root_and_only_its_own() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let first = session(
        &toold,
        &image,
        "danger_full_access",
        json!({"isolation": "landlock"}),
    )
    .await;
    let wrote = bash(
        &toold,
        &first,
        "echo mine > /etc/written && cat /etc/written",
    )
    .await;
    assert_eq!(wrote["is_error"], false, "{wrote}");
    assert!(text(&wrote).contains("mine"), "{wrote}");
    let second = session(
        &toold,
        &image,
        "danger_full_access",
        json!({"isolation": "landlock"}),
    )
    .await;
    let other = bash(&toold, &second, "cat /etc/written; echo rc=$?").await;
    assert!(!text(&other).contains("mine"), "{other}");
    let rootfs = std::fs::read_dir(toold.dir.path().join("data/images"))
        .unwrap()
        .filter_map(Result::ok)
        .map(|entry| entry.path().join("rootfs"))
        .find(|path| path.is_dir())
        .expect("the image's cached root");
    assert!(!rootfs.join("etc/written").exists());
}

#[tokio::test]
async fn auto_is_landlock_where_the_shell_sandbox_is_not_bubblewrap() {
    let Some((registry, toold)) = fixture("[sandbox]\nmode = \"landlock\"\n") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(&toold, &image, "workspace_write", json!({})).await;
    let shown = toold.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        shown.body["environment"]["isolation"], "landlock",
        "{}",
        shown.body
    );
    let out = bash(&toold, &id, "cat /etc/marker").await;
    assert_eq!(out["metadata"]["sandbox"], "landlock", "{out}");
    assert!(text(&out).contains(MARKER), "{out}");
    // bwrap is not on offer there.
    let refused = toold
        .post(
            "/v1/sessions",
            &json!({"environment": {"image": image, "isolation": "bwrap"}}),
        )
        .await;
    assert_eq!(
        refused.status,
        reqwest::StatusCode::BAD_REQUEST,
        "{}",
        refused.body
    );
    assert!(
        refused.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("not available on this daemon (available: landlock"),
        "{}",
        refused.body
    );
}
