//! The `gvisor` isolation tier through the real daemon: a session on the registry image with
//! `"isolation": "gvisor"` runs its commands in a gVisor sandbox (a kernel of its own), over
//! the same root the file tools see, with no network unless asked, and every audit row of it
//! names the tier (DESIGN §12).

use std::io::{Read, Write};
use std::time::Duration;

use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;
use crate::support::registry::MARKER;

/// Whether `runsc` is installed; skips (outside CI) when not.
pub fn runsc_available() -> bool {
    let found = std::process::Command::new("runsc")
        .arg("--version")
        .output()
        .is_ok_and(|out| out.status.success());
    if !found {
        crate::support::skip_unless_ci("runsc (gVisor) is not installed");
    }
    found
}

pub async fn session(toold: &Toold, image: &str, mode: &str, environment: Value) -> String {
    let mut body = json!({"environment": {"image": image}, "permission_mode": mode});
    if let (Some(into), Some(extra)) =
        (body["environment"].as_object_mut(), environment.as_object())
    {
        into.extend(extra.clone());
    }
    toold.session_with(&body).await
}

pub async fn bash(toold: &Toold, session: &str, command: &str) -> Value {
    toold
        .call_one(session, "bash", json!({"command": command}))
        .await
}

pub fn text(result: &Value) -> &str {
    result["output"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn a_gvisor_session_has_its_own_kernel_and_the_images_root() {
    if !runsc_available() {
        return;
    }
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(
        &toold,
        &image,
        "workspace_write",
        json!({"isolation": "gvisor"}),
    )
    .await;
    let shown = toold.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        shown.body["environment"]["isolation"], "gvisor",
        "{}",
        shown.body
    );

    let host = std::process::Command::new("uname")
        .arg("-r")
        .output()
        .unwrap();
    let host = String::from_utf8(host.stdout).unwrap();
    let out = bash(&toold, &id, "uname -r; cat /etc/marker; pwd").await;
    assert_eq!(out["is_error"], false, "{out}");
    assert_eq!(out["metadata"]["sandbox"], "gvisor", "{out}");
    let lines: Vec<&str> = text(&out).lines().collect();
    assert!(lines.len() >= 3, "{out}");
    assert_ne!(lines[0].trim(), host.trim(), "{out}");
    assert!(text(&out).contains(MARKER), "{out}");
    assert!(lines.contains(&"/workspace"), "{out}");

    // A write in the workspace is the file read_file reads; outside it, refused.
    let made = bash(&toold, &id, "echo from-gvisor > /workspace/made.txt").await;
    assert_eq!(made["is_error"], false, "{made}");
    let read = toold
        .call_one(
            &id,
            "read_file",
            json!({"file_path": "/workspace/made.txt"}),
        )
        .await;
    assert!(text(&read).contains("from-gvisor"), "{read}");
    let outside = bash(&toold, &id, "echo x > /etc/nope").await;
    assert!(
        text(&outside).contains("Read-only file system"),
        "{outside}"
    );

    // The exit status comes back, and a second call reuses the session's sandbox.
    let failed = bash(&toold, &id, "exit 7").await;
    assert_eq!(failed["metadata"]["exit_code"], 7, "{failed}");

    // A command stopped by its timeout is killed inside too.
    let slow = toold
        .call_one(
            &id,
            "bash",
            json!({"command": "sleep 30; echo late > /workspace/late.txt", "timeout": 1000}),
        )
        .await;
    assert_eq!(slow["is_error"], true, "{slow}");
    let listed = bash(&toold, &id, "ps").await;
    assert!(!text(&listed).contains("sleep 30"), "{listed}");

    // A bwrap session on the same daemon stays bwrap, and the host's kernel.
    let plain = session(&toold, &image, "workspace_write", json!({})).await;
    let out = bash(&toold, &plain, "uname -r").await;
    assert_eq!(out["metadata"]["sandbox"], "bwrap", "{out}");
    assert_eq!(text(&out).trim(), host.trim(), "{out}");

    // Every audit row of the gvisor session says its tier (DESIGN §12), bash's and read_file's.
    let rows = toold.get(&format!("/v1/sessions/{id}/calls")).await;
    let rows = rows.body["calls"].as_array().unwrap().clone();
    assert!(rows.len() >= 6, "{rows:?}");
    for row in &rows {
        assert_eq!(row["isolation"], "gvisor", "{row}");
    }

    // Closing the session removes its sandbox.
    let closed = toold.delete(&format!("/v1/sessions/{id}")).await;
    assert_eq!(closed.status, reqwest::StatusCode::OK, "{}", closed.body);
    let state = toold.dir.path().join("data/runsc/state");
    crate::support::deadline::within(Duration::from_secs(10), "the sandbox to go", async {
        loop {
            let listed = std::process::Command::new("runsc")
                .arg("--root")
                .arg(&state)
                .args(["list", "-quiet"])
                .output()
                .unwrap();
            if String::from_utf8_lossy(&listed.stdout).trim().is_empty() {
                break;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    })
    .await;
}

#[tokio::test]
async fn a_gvisor_session_reaches_the_hosts_loopback_only_with_network_host() {
    if !runsc_available() {
        return;
    }
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    // A server on the host's loopback; the sandbox has a loopback of its own.
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    listener.set_nonblocking(true).unwrap();
    let served = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let server = {
        let (served, stop) = (served.clone(), stop.clone());
        std::thread::spawn(move || {
            while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                match listener.accept() {
                    Ok((mut stream, _)) => {
                        served.store(true, std::sync::atomic::Ordering::Relaxed);
                        let mut buf = [0_u8; 512];
                        let _ = stream.read(&mut buf);
                        let _ = stream.write_all(
                            b"HTTP/1.0 200 OK\r\nContent-Length: 12\r\n\r\nhost-secret\n",
                        );
                    }
                    Err(_) => std::thread::sleep(Duration::from_millis(10)),
                }
            }
        })
    };
    let image = registry.image("test/busybox:1");
    let id = session(
        &toold,
        &image,
        "workspace_write",
        json!({"isolation": "gvisor", "network": "none"}),
    )
    .await;
    let out = bash(
        &toold,
        &id,
        &format!("wget -q -T 3 -O - http://127.0.0.1:{port}/; echo status=$?"),
    )
    .await;
    assert!(text(&out).contains("status="), "{out}");
    assert!(!text(&out).contains("status=0"), "{out}");
    assert!(!text(&out).contains("host-secret"), "{out}");
    assert!(!served.load(std::sync::atomic::Ordering::Relaxed), "{out}");

    // `network = "host"` is runsc's --network=host: the same server answers.
    let host = session(
        &toold,
        &image,
        "workspace_write",
        json!({"isolation": "gvisor", "network": "host"}),
    )
    .await;
    let reached = bash(
        &toold,
        &host,
        // busybox's wget segfaults under runsc's host network; its nc does not.
        &format!(
            "printf 'GET / HTTP/1.0\\r\\n\\r\\n' | busybox nc -w 5 127.0.0.1 {port}; echo status=$?"
        ),
    )
    .await;
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    server.join().unwrap();
    assert!(text(&reached).contains("host-secret"), "{reached}");
    assert!(
        served.load(std::sync::atomic::Ordering::Relaxed),
        "{reached}"
    );
}
