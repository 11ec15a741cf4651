//! The client explains itself (issue 35): global flags before or after the subcommand; the
//! listings' header rows and their "no …" when empty; `call` saying, on a terminal and off
//! it, that it waits for an approval and which command answers it; a refused TLS
//! certificate reported as such with exit 5, apart from exit 4 "unreachable".

use std::process::Stdio;
use std::time::Duration;

use serde_json::{Value, json};
use tokio::io::AsyncBufReadExt;

use super::harness::{Ran, client_at, ended, finish, run};
use crate::http::harness::Toold;
use crate::support::daemon::{DaemonProcess, without_settings};
use crate::tls::{ServerFiles, TestCa, TlsDaemon};

const ASK_ECHO: &str = "[permissions]\nask = [\"bash(echo:*)\"]\n";

/// A URL where nothing listens (a port that was just free).
fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}

#[tokio::test]
async fn global_flags_work_before_and_after_the_subcommand() {
    let dir = std::sync::Arc::new(tempfile::tempdir().unwrap());
    let toold = Toold::start_with(dir, &["--auth-token", "secret"]);
    let session = toold.session().await;
    // TOOLD_URL points nowhere and no TOOLD_TOKEN is set: only the flags can make it work.
    let dead = dead_url();
    let base = toold.base.as_str();
    let flags = ["--url", base, "--token", "secret", "-o", "json"];
    let listed = |ran: &Ran| -> Value {
        assert_eq!(ran.code, 0, "{ran:?}");
        serde_json::from_str(&ran.stdout).unwrap_or_else(|e| panic!("{e}: {ran:?}"))
    };
    let before: Vec<&str> = flags.iter().copied().chain(["sessions"]).collect();
    let after: Vec<&str> = ["sessions"].into_iter().chain(flags).collect();
    let mixed = [
        "--url", base, "sessions", "--token", "secret", "--output", "json",
    ];
    for args in [&before[..], &after[..], &mixed[..]] {
        let sessions = listed(&finish(client_at(&dead, None, args)).await);
        assert_eq!(sessions[0]["id"], session.as_str(), "{args:?}");
    }

    let input = r#"{"command":"echo anywhere"}"#;
    let call = finish(client_at(
        &dead,
        None,
        &["--token", "secret", "--url", base, "call", "bash", input],
    ))
    .await;
    assert_eq!(
        (call.code, call.stdout.as_str()),
        (0, "anywhere\n"),
        "{call:?}"
    );
    let approvals = finish(client_at(
        &dead,
        None,
        &[
            "-o",
            "json",
            "--url",
            base,
            "approvals",
            "--token",
            "secret",
        ],
    ))
    .await;
    assert_eq!(listed(&approvals), json!([]));
}

#[tokio::test]
async fn listings_have_a_header_row_and_say_when_they_are_empty() {
    let toold = Toold::start();
    let sessions = run(&toold, &["sessions"]).await;
    assert_eq!(sessions.code, 0, "{sessions:?}");
    assert_eq!(
        sessions.stdout,
        "ID\tMODE\tINTERACTIVE\tOWNER\tWORKING_DIRECTORY\tSTATE\tIMAGE\tTIER\tLIMITS\n"
    );
    assert!(sessions.stderr.contains("no sessions"), "{sessions:?}");
    let approvals = run(&toold, &["approvals"]).await;
    assert_eq!(approvals.code, 0, "{approvals:?}");
    assert_eq!(approvals.stdout, "ID\tSESSION\tTOOL\tCALL\tINPUT\tREASON\n");
    assert!(
        approvals.stderr.contains("no pending approvals"),
        "{approvals:?}"
    );
    let json = run(&toold, &["sessions", "-o", "json"]).await;
    assert_eq!(json.stdout.trim(), "[]", "{json:?}");

    let session = toold.session().await;
    let sessions = run(&toold, &["sessions"]).await;
    let lines: Vec<&str> = sessions.stdout.lines().collect();
    assert_eq!(lines.len(), 2, "{sessions:?}");
    let columns: Vec<&str> = lines[1].split('\t').collect();
    assert_eq!(columns.len(), 9, "a column under each heading: {columns:?}");
    assert_eq!((columns[0], columns[5]), (session.as_str(), "open"));
    // A plain session runs in no environment: no image, tier or limits.
    assert_eq!(&columns[6..], ["-", "-", "-"], "{columns:?}");
    assert!(!sessions.stderr.contains("no sessions"), "{sessions:?}");

    let tools = run(&toold, &["tools"]).await;
    assert_eq!(tools.stdout.lines().next(), Some("NAME\tDESCRIPTION"));
}

/// The notice `call` printed, its approval id, and the command it says answers it.
fn waiting_notice(stderr: &str) -> Option<(String, Vec<String>)> {
    let line = stderr
        .lines()
        .find(|l| l.contains("waiting for approval "))?;
    let id = line
        .split("waiting for approval ")
        .nth(1)?
        .split_whitespace()
        .next()?
        .to_owned();
    let command = line.split("answer with: ").nth(1)?.split(" (or ").next()?;
    let words = command.split_whitespace().map(str::to_owned).collect();
    Some((id, words))
}

#[tokio::test]
async fn call_off_a_terminal_says_it_waits_for_approval_and_how_to_answer() {
    let toold = Toold::start_with_config(ASK_ECHO);
    let input = json!({"command": "echo approved"}).to_string();
    let mut call = client_at(&toold.base, None, &["call", "bash", &input])
        .spawn()
        .unwrap();
    let mut stderr = tokio::io::BufReader::new(call.stderr.take().unwrap()).lines();
    let mut seen = String::new();
    let notice = tokio::time::timeout(Duration::from_secs(30), async {
        while let Some(line) = stderr.next_line().await.unwrap() {
            seen.push_str(&line);
            seen.push('\n');
            if let Some(notice) = waiting_notice(&line) {
                return notice;
            }
        }
        panic!("the call ended without saying it waits: {seen}");
    })
    .await
    .expect("the call says it waits within 30 s");
    let (id, command) = notice;
    assert!(id.starts_with("appr_"), "{id}");
    assert_eq!(command[..4], ["toold", "approvals", "allow", id.as_str()]);
    assert_eq!(
        command[4..],
        ["--url", toold.base.as_str()],
        "a URL not the default"
    );
    let line = seen.lines().last().unwrap();
    assert!(
        line.contains(&format!(
            "(or toold approvals deny {id} --url {})",
            toold.base
        )),
        "{line}"
    );

    // The command as printed answers it (TOOLD_URL points nowhere: its --url is what works).
    let answered = finish(client_at(
        &dead_url(),
        None,
        &command[1..].iter().map(String::as_str).collect::<Vec<_>>(),
    ))
    .await;
    assert_eq!(answered.code, 0, "{answered:?}");
    let output = tokio::time::timeout(Duration::from_secs(30), call.wait_with_output())
        .await
        .expect("the call ends once allowed")
        .unwrap();
    assert_eq!(output.status.code(), Some(0));
    assert_eq!(String::from_utf8_lossy(&output.stdout), "approved\n");
}

#[tokio::test]
async fn call_on_a_terminal_says_it_waits_for_approval_above_the_spinner() {
    let toold = Toold::start_with_config(ASK_ECHO);
    let input = json!({"command": "echo on-a-terminal"}).to_string();
    let binary = env!("CARGO_BIN_EXE_toold");
    let mut command = std::process::Command::new("script");
    without_settings(&mut command);
    command
        .args([
            "-qfec",
            &format!("{binary} call bash '{input}'"),
            "/dev/null",
        ])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    command.env("TOOLD_URL", &toold.base);
    let child = tokio::process::Command::from(command)
        .spawn()
        .expect("script runs");

    // Answered over the API once it is pending (30 s guard).
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    let (session, id) = loop {
        let sessions = toold.get("/v1/sessions").await;
        let mut found = None;
        for session in sessions.body["sessions"].as_array().into_iter().flatten() {
            let session = session["id"].as_str().unwrap_or_default().to_owned();
            let pending = toold
                .get(&format!("/v1/sessions/{session}/approvals"))
                .await;
            if let Some(id) = pending.body["approvals"][0]["id"].as_str() {
                found = Some((session, id.to_owned()));
            }
        }
        if let Some(found) = found {
            break found;
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval appeared"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    // The notice is printed as the approval is asked for; give it a moment to be read.
    tokio::time::sleep(Duration::from_millis(300)).await;
    let allowed = toold
        .post(
            &format!("/v1/sessions/{session}/approvals/{id}"),
            &json!({"decision": "allow"}),
        )
        .await;
    assert!(allowed.status.is_success(), "{}", allowed.body);
    let ran = ended(child).await;
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stdout
            .contains(&format!("\r\x1b[Ktoold: waiting for approval {id} (bash")),
        "on a line of its own: {ran:?}"
    );
    assert!(
        ran.stdout
            .contains(&format!("answer with: toold approvals allow {id} --url")),
        "{ran:?}"
    );
    assert!(ran.stdout.contains("on-a-terminal"), "{ran:?}");
}

/// `toold sessions --url URL EXTRA…` against a TLS daemon; its exit code and stderr.
fn sessions_over_tls(url: &str, extra: &[&str]) -> (Option<i32>, String) {
    let mut command = std::process::Command::new(env!("CARGO_BIN_EXE_toold"));
    without_settings(&mut command);
    let output = command
        .args(["sessions", "--url", url])
        .args(extra)
        .output()
        .expect("the client starts");
    (
        output.status.code(),
        String::from_utf8_lossy(&output.stderr).into_owned(),
    )
}

#[test]
fn a_refused_certificate_is_a_certificate_error_with_exit_5_not_unreachable() {
    // Signed by a CA the client does not know (as a self-signed certificate is).
    let dir = tempfile::tempdir().unwrap();
    let toold = TlsDaemon::start(dir.path());
    let url = format!("https://{}", toold.address);
    let (code, stderr) = sessions_over_tls(&url, &[]);
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains(&format!(
            "the certificate of {url} is signed by an authority"
        )),
        "{stderr}"
    );
    assert!(
        stderr.contains("--ca-cert"),
        "says how to trust it: {stderr}"
    );
    assert!(!stderr.contains("nothing answers"), "{stderr}");
    let (code, stderr) =
        sessions_over_tls(&url, &["--ca-cert", toold.ca.ca_file.to_str().unwrap()]);
    assert_eq!(code, Some(0), "trusted with its CA: {stderr}");

    // A trusted CA, but a certificate for another host.
    let other = tempfile::tempdir().unwrap();
    let ca = TestCa::new(other.path());
    let files = ServerFiles {
        cert: other.path().join("server.pem"),
        key: other.path().join("server.key"),
    };
    ca.issue_for(&["elsewhere.example"], "elsewhere", &files);
    let daemon = DaemonProcess::start(
        other.path(),
        &[
            "--tls-cert",
            files.cert.to_str().unwrap(),
            "--tls-key",
            files.key.to_str().unwrap(),
        ],
    );
    let (code, stderr) =
        sessions_over_tls(&daemon.base, &["--ca-cert", ca.ca_file.to_str().unwrap()]);
    assert_eq!(code, Some(5), "{stderr}");
    assert!(
        stderr.contains("is not valid for the URL's host name"),
        "{stderr}"
    );

    // Nothing listening is still 4.
    let https_dead = dead_url().replace("http://", "https://");
    let (code, stderr) = sessions_over_tls(&https_dead, &[]);
    assert_eq!(code, Some(4), "{stderr}");
    assert!(stderr.contains("nothing answers"), "{stderr}");
}
