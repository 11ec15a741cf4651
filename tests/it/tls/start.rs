//! TLS settings that cannot work stop the start, with an error saying what is wrong: a
//! certificate without a key (or the reverse, from the environment), a file that does not
//! exist, a file that holds no PEM, a key that does not fit the certificate.

use std::path::Path;

use super::{ServerFiles, TestCa};
use crate::support::daemon::command;
use crate::support::deadline::{OutputWithin, STEP};

/// `toold serve` with `args` (and `env`) over `dir`: it must fail; its stderr.
fn refused_start(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> String {
    std::fs::create_dir_all(dir.join("projects")).unwrap();
    let output = command(dir, args)
        .envs(env.iter().copied())
        .output_within(STEP, "toold serve")
        .expect("toold starts");
    let stderr = String::from_utf8_lossy(&output.stderr).into_owned();
    assert!(!output.status.success(), "started with {args:?}: {stderr}");
    assert!(
        output.stdout.is_empty(),
        "no listening line: {}",
        String::from_utf8_lossy(&output.stdout)
    );
    stderr
}

#[test]
fn half_or_broken_tls_settings_stop_the_start_naming_the_problem() {
    let dir = tempfile::tempdir().unwrap();
    let ca = TestCa::new(dir.path());
    let files = ServerFiles {
        cert: dir.path().join("server.pem"),
        key: dir.path().join("server.key"),
    };
    ca.issue("start", &files);
    let cert = files.cert.to_str().unwrap();
    let key = files.key.to_str().unwrap();

    let stderr = refused_start(dir.path(), &["--tls-cert", cert], &[]);
    assert!(
        stderr.contains("tls_cert is set, tls_key is not"),
        "{stderr}"
    );
    let stderr = refused_start(dir.path(), &[], &[("TOOLD_TLS_KEY", key)]);
    assert!(
        stderr.contains("tls_key is set, tls_cert is not"),
        "{stderr}"
    );

    let missing = dir.path().join("missing.pem");
    let stderr = refused_start(
        dir.path(),
        &["--tls-cert", missing.to_str().unwrap(), "--tls-key", key],
        &[],
    );
    assert!(
        stderr.contains("missing.pem") && stderr.contains("cannot read"),
        "{stderr}"
    );

    // The key file given as the certificate: PEM, but no CERTIFICATE in it.
    let stderr = refused_start(dir.path(), &["--tls-cert", key, "--tls-key", key], &[]);
    assert!(
        stderr.contains("server.key") && stderr.contains("no CERTIFICATE"),
        "{stderr}"
    );

    // Another certificate's key.
    let other = ServerFiles {
        cert: dir.path().join("other.pem"),
        key: dir.path().join("other.key"),
    };
    ca.issue("other", &other);
    let other_key = other.key.to_str().unwrap();
    let stderr = refused_start(
        dir.path(),
        &["--tls-cert", cert, "--tls-key", other_key],
        &[],
    );
    assert!(stderr.contains("does not fit"), "{stderr}");
}
