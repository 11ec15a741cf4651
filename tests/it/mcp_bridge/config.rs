//! Bad `[[mcp_servers]]` settings are refused at start-up: the daemon exits non-zero before
//! it listens, and its message names the server and the key (`mcp_servers "NAME": KEY: …`,
//! or `mcp_servers[INDEX]` for an entry without a valid name) and the offending value. Each
//! case is one entry made wrong; the entries are session-scoped, so nothing is spawned and
//! no npm server is needed.

use std::io::Read;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::{Duration, Instant};

use crate::support::daemon::command;
use crate::support::mcp_servers::{ServerEntry, settings};

/// A valid stdio entry named `name`.
fn cat(name: &str) -> ServerEntry {
    ServerEntry::stdio(name, Path::new("/bin/cat"), &[])
}

/// Starts the daemon with these entries; its exit status and stderr once it exits (failing
/// if it is still running after 20 s, i.e. it accepted the settings).
fn start_up(entries: &[ServerEntry]) -> (ExitStatus, String) {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("projects")).unwrap();
    let file = dir.path().join("toold.toml");
    let toml = settings("", entries);
    std::fs::write(&file, &toml).unwrap();
    let mut child = command(dir.path(), &["--config", file.to_str().unwrap()])
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toold starts");
    let deadline = Instant::now() + Duration::from_secs(20);
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            let _ = child.wait();
            panic!("the daemon accepted these settings:\n{toml}");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    child
        .stderr
        .take()
        .unwrap()
        .read_to_string(&mut stderr)
        .unwrap();
    (status, stderr)
}

/// The daemon refuses `entries` with a message holding every one of `expected`.
#[track_caller]
fn refused(entries: &[ServerEntry], expected: &[&str]) {
    let (status, stderr) = start_up(entries);
    assert!(!status.success(), "exit {status}; stderr: {stderr}");
    for part in expected {
        assert!(
            stderr.contains(part),
            "{part:?} not in the message: {stderr}"
        );
    }
}

/// The control: the same writer's valid entry starts (the daemon prints its address).
#[test]
fn valid_entries_are_accepted() {
    crate::http::harness::Toold::start_with_config(&settings("", &[cat("ok"), cat("ok-2")]));
}

#[test]
fn an_unknown_key_is_refused_naming_the_server_and_the_key() {
    refused(
        &[cat("fs"), cat("other").set("colour", "blue")],
        &["mcp_servers \"other\"", "colour"],
    );
}

#[test]
fn a_command_not_on_path_is_refused() {
    refused(
        &[ServerEntry::named("fs").set("command", "toold-no-such-server")],
        &["mcp_servers \"fs\": command", "toold-no-such-server"],
    );
}

#[test]
fn a_command_path_that_is_no_file_is_refused() {
    refused(
        &[ServerEntry::named("fs").set("command", "/nonexistent/server")],
        &["mcp_servers \"fs\": command", "/nonexistent/server"],
    );
}

#[test]
fn neither_command_nor_url_is_refused() {
    refused(&[ServerEntry::named("fs")], &["mcp_servers \"fs\""]);
}

#[test]
fn both_command_and_url_are_refused() {
    refused(
        &[cat("fs").set("url", "http://127.0.0.1:9/mcp")],
        &["mcp_servers \"fs\""],
    );
}

#[test]
fn a_bad_url_is_refused() {
    refused(
        &[ServerEntry::http("web", "not a url")],
        &["mcp_servers \"web\": url", "not a url"],
    );
    refused(
        &[ServerEntry::http("web", "ftp://127.0.0.1/mcp")],
        &["mcp_servers \"web\": url", "ftp://127.0.0.1/mcp"],
    );
}

#[test]
fn a_duplicate_name_is_refused() {
    refused(&[cat("fs"), cat("fs")], &["mcp_servers \"fs\": name"]);
}

#[test]
fn a_name_with_a_double_underscore_is_refused() {
    // Named by its index or by the name it has (the contract prefers the index).
    refused(
        &[cat("fs"), cat("a__b")],
        &["mcp_servers", ": name", "a__b"],
    );
}

#[test]
fn a_name_outside_the_allowed_characters_is_refused() {
    refused(&[cat("my server")], &["mcp_servers", ": name", "my server"]);
}

#[test]
fn a_name_over_32_characters_is_refused() {
    let long = "s".repeat(33);
    refused(&[cat(&long)], &["mcp_servers", ": name", &long]);
}
