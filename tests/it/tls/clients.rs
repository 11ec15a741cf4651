//! Clients other than toold's own code, on the one TLS port: Python's `requests` and grpcio
//! (the gRPC example, `examples/python/client.py --ca-cert`) with the test CA, both against
//! one daemon; and the terminal client with `--ca-cert`, which without it refuses the unknown
//! CA.
//!
//! The Python clients run in the venv `.ci/run` makes (grpcio, grpcio-tools, requests) and
//! names in `TOOLD_TEST_PYTHON`; without it the test is skipped locally and fails in CI.

use std::path::Path;
use std::process::Command;

use super::TlsDaemon;
use crate::support::daemon::without_settings;
use crate::support::deadline::{OutputWithin, STEP};
use crate::support::python::python;

/// Runs `python script args`, failing the test with its output unless it succeeds.
fn run_python(python: &Path, script: &Path, args: &[&str]) -> String {
    let output = Command::new(python)
        .arg(script)
        .args(args)
        .output_within(STEP, "the client")
        .expect("python starts");
    let stdout = String::from_utf8_lossy(&output.stdout).into_owned();
    assert!(
        output.status.success(),
        "{} failed ({}):\n{stdout}\n{}",
        script.display(),
        output.status,
        String::from_utf8_lossy(&output.stderr)
    );
    stdout
}

#[test]
fn python_requests_and_grpcio_work_on_the_one_tls_port() {
    let Some(python) = python("Python requests and grpcio clients over TLS") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let toold = TlsDaemon::start(dir.path());
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let ca = toold.ca.ca_file.to_str().unwrap();

    let base = format!("https://{}", toold.address);
    let said = run_python(
        &python,
        &root.join("tests/it/tls/requests_client.py"),
        &[&base, ca],
    );
    assert!(said.contains("requests over tls: ok"), "{said}");

    // The host name the certificate names: grpcio checks it against the SAN.
    let port = toold.address.rsplit(':').next().unwrap();
    let said = run_python(
        &python,
        &root.join("examples/python/client.py"),
        &[&format!("localhost:{port}"), "--ca-cert", ca],
    );
    assert!(said.contains("python example: ok"), "{said}");
}

#[test]
fn the_terminal_client_trusts_the_ca_named_by_ca_cert() {
    let dir = tempfile::tempdir().unwrap();
    let toold = TlsDaemon::start(dir.path());
    let sessions = |extra: &[&str]| {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
        without_settings(&mut command);
        let output = command
            .args(["sessions", "--url", &format!("https://{}", toold.address)])
            .args(extra)
            .output_within(STEP, "the client")
            .expect("the client starts");
        (
            output.status.code(),
            String::from_utf8_lossy(&output.stderr).into_owned(),
        )
    };
    let (code, stderr) = sessions(&["--ca-cert", toold.ca.ca_file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "{stderr}");

    // The CA is no public one: without it the certificate is not trusted (exit 5, not 4:
    // the daemon answered).
    let (code, stderr) = sessions(&[]);
    assert_eq!(code, Some(5), "a certificate error: {stderr}");

    let missing = dir.path().join("no-such-ca.pem");
    let (code, stderr) = sessions(&["--ca-cert", missing.to_str().unwrap()]);
    assert_eq!(code, Some(2), "{stderr}");
    assert!(stderr.contains("no-such-ca.pem"), "{stderr}");
}
