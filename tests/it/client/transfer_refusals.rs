//! `toold cp` refused (issue 37): both sides local or both remote (exit 2), an unknown
//! session and another agent's (exit 1, named), a missing local source or remote path, a path
//! out of the workspace (the session's mode: exit 1, not the token's 3), a directory over a
//! local file, and an archive the daemon refuses while it is still being sent (its reason, not
//! the cut body's); a FIFO left out with a note.

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::harness::{Ran, client_at, finish, run};
use super::transfer::{done, remote_file};
use crate::http::harness::Toold;

/// Asserts a refused copy: its exit code and a message naming the problem.
fn refused(ran: &Ran, code: i32, message: &str) {
    assert_eq!(ran.code, code, "{ran:?}");
    assert!(ran.stderr.contains(message), "{message:?} in {ran:?}");
    assert_eq!(ran.stdout, "", "{ran:?}");
}

#[tokio::test]
async fn refused_copies_exit_non_zero_and_say_why() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let here = local.path().to_str().unwrap();
    let file = local.path().join("a.txt");
    std::fs::write(&file, "a").unwrap();
    let file = file.to_str().unwrap();
    let remote = |path: &str| format!("{session}:{path}");

    let both_local = run(&toold, &["cp", file, here]).await;
    refused(&both_local, 2, "write SESSION:PATH");
    let both_remote = run(&toold, &["cp", &remote("a"), &remote("b")]).await;
    refused(&both_remote, 2, "are both in a session");
    let unknown = run(&toold, &["cp", file, "sess_nope:a.txt"]).await;
    refused(&unknown, 1, "no session \"sess_nope\"");
    let unknown_down = run(&toold, &["cp", "sess_nope:a.txt", here]).await;
    refused(&unknown_down, 1, "no session \"sess_nope\"");
    let missing = local.path().join("missing");
    let missing_source = run(&toold, &["cp", missing.to_str().unwrap(), &remote("x")]).await;
    refused(&missing_source, 1, "cannot read");
    let missing_remote = run(&toold, &["cp", &remote("nothing/here"), here]).await;
    refused(&missing_remote, 1, "does not exist");
    // Out of the workspace: the session's mode refuses it (not the token: exit 1, not 3).
    let escape = run(&toold, &["cp", &remote("../.."), here]).await;
    refused(&escape, 1, "danger_full_access");
    let escape_up = run(&toold, &["cp", file, &remote("../outside.txt")]).await;
    refused(&escape_up, 1, "danger_full_access");
    // A directory does not come down over a file.
    done(&run(&toold, &["cp", here, &remote("tree")]).await);
    let over_file = run(&toold, &["cp", &remote("tree"), file]).await;
    refused(&over_file, 1, "is not a directory");
    assert_eq!(std::fs::read_to_string(file).unwrap(), "a");
}

#[tokio::test]
async fn another_agents_session_is_an_unknown_one() {
    use crate::auth::{AGENT_A, AGENT_B, call, daemon};
    let toold = daemon();
    let created = call(
        &toold,
        AGENT_A,
        Method::POST,
        "/v1/sessions",
        Some(json!({})),
    )
    .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("a.txt");
    std::fs::write(&file, "a").unwrap();
    let file = file.to_str().unwrap();
    let target = format!("{session}:a.txt");
    let own = finish(client_at(
        &toold.base,
        Some(AGENT_A),
        &["cp", file, &target],
    ))
    .await;
    done(&own);
    let here = local.path().to_str().unwrap();
    for args in [["cp", file, target.as_str()], ["cp", target.as_str(), here]] {
        let other = finish(client_at(&toold.base, Some(AGENT_B), &args)).await;
        refused(&other, 1, &format!("no session \"{session}\""));
    }
}

#[tokio::test]
async fn an_archive_the_daemon_refuses_mid_stream_says_why_and_writes_nothing() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let tree = local.path().join("tree");
    std::fs::create_dir(&tree).unwrap();
    // Packed first (names in order), so the daemon answers while the big file is still
    // being sent: the answer, not the cut body, is what the client reports.
    std::os::unix::fs::symlink("/etc/passwd", tree.join("a_link")).unwrap();
    std::fs::write(tree.join("z_big.bin"), vec![1u8; 64 << 20]).unwrap();
    let ran = run(
        &toold,
        &["cp", tree.to_str().unwrap(), &format!("{session}:tree")],
    )
    .await;
    // The daemon calls the archive invalid: a usage error (exit 2), with its reason.
    refused(&ran, 2, "resolves outside the target");
    let (status, _) = remote_file(&toold, &session, "tree/z_big.bin").await;
    assert_eq!(status, StatusCode::NOT_FOUND);

    // A FIFO is left out with a note; the rest goes up.
    std::fs::remove_file(tree.join("a_link")).unwrap();
    let made = std::process::Command::new("mkfifo")
        .arg(tree.join("pipe"))
        .status()
        .unwrap();
    assert!(made.success());
    let ran = run(
        &toold,
        &["cp", tree.to_str().unwrap(), &format!("{session}:tree")],
    )
    .await;
    assert_eq!(ran.code, 0, "{ran:?}");
    assert!(
        ran.stderr.contains("left out") && ran.stderr.contains("pipe"),
        "{ran:?}"
    );
    let (status, big) = remote_file(&toold, &session, "tree/z_big.bin").await;
    assert_eq!((status, big.len()), (StatusCode::OK, 64 << 20));
}
