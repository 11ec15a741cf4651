//! `bash true` through the real daemon under each sandbox (issue 6): none (sandbox off,
//! unsandboxed runs allowed), Landlock and bubblewrap, one call per request over loopback,
//! p50/p99. Each runs on a daemon of its own, configured by a settings file; a sandbox this
//! machine lacks is reported as skipped, not measured.

use std::time::Duration;

use serde_json::json;
use toold::tools::SandboxCapability;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;

const WARM_UP: usize = 20;
const SAMPLES: usize = 300;

pub async fn report() {
    // The daemon's own probe, so "available" means what it means to the daemon.
    let capability = SandboxCapability::probe();
    let sandboxes = [
        ("none", "mode = \"off\"\nallow_unsandboxed = true\n", true),
        (
            "landlock",
            "mode = \"landlock\"\n",
            capability.landlock_abi.is_ok(),
        ),
        ("bwrap", "mode = \"bwrap\"\n", capability.bubblewrap.is_ok()),
    ];
    for (name, settings, available) in sandboxes {
        if !available {
            println!("bash true ({name:>8}): skipped, this machine cannot run it");
            continue;
        }
        let (p50, p99) = measure(name, settings).await;
        println!(
            "bash true ({name:>8}): p50 {:.2} ms, p99 {:.2} ms ({SAMPLES} calls over HTTP, audited)",
            super::ms(p50),
            super::ms(p99)
        );
    }
}

async fn measure(name: &str, settings: &str) -> (Duration, Duration) {
    let dir = super::fixture_dir();
    let config = dir.path().join("toold.toml");
    std::fs::write(&config, format!("[sandbox]\n{settings}")).expect("settings file");
    let config = config.to_str().expect("UTF-8 path").to_owned();
    let daemon = Daemon::start_with(dir.path(), &["--config", &config]).await;
    let projects = dir
        .path()
        .join("projects")
        .canonicalize()
        .expect("projects");
    let session = super::create_session(daemon.address, &projects).await;
    let request = PreparedRequest::post_json(
        daemon.address,
        &format!("/v1/sessions/{session}/batches"),
        &json!({"calls": [{"id": "t", "name": "bash", "input": {"command": "true"}}]}),
    );
    let mut connection = Connection::open(daemon.address).await.expect("connects");
    let first = connection.send(&request).await.expect("a batch").json();
    let result = &first["results"][0];
    assert_eq!(result["is_error"], false, "bash true runs: {first}");
    assert_eq!(
        result["metadata"]["sandbox"], name,
        "the sandbox asked for ran: {first}"
    );
    super::time_requests(&mut connection, &request, WARM_UP).await;
    let mut samples = super::time_requests(&mut connection, &request, SAMPLES).await;
    daemon.terminate();
    super::percentiles(&mut samples)
}
