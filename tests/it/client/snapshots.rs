//! `toold snapshot` and `toold fork` (issue 37) against a real daemon: the id alone on stdout
//! (and the daemon's answer with `-o json`), forks listed as `SESSION  SNAPSHOT` rows whose
//! sessions exist and see the file of the moment; an unknown session and `-n 0` refused.

use reqwest::{Method, StatusCode};
use serde_json::Value;

use super::harness::run;
use crate::http::harness::Toold;

async fn read(toold: &Toold, session: &str, path: &str) -> (StatusCode, String) {
    let request = toold.request(Method::GET, &format!("/v1/sessions/{session}/files/{path}"));
    let response = request.send().await.unwrap();
    (response.status(), response.text().await.unwrap())
}

#[tokio::test]
async fn a_snapshot_prints_its_id_and_forks_see_the_file() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("state.txt");
    std::fs::write(&file, "before the fork\n").unwrap();
    let put = run(
        &toold,
        &[
            "cp",
            file.to_str().unwrap(),
            &format!("{session}:state.txt"),
        ],
    )
    .await;
    assert_eq!(put.code, 0, "{put:?}");

    let taken = run(&toold, &["snapshot", &session, "--name", "first"]).await;
    assert_eq!(taken.code, 0, "{taken:?}");
    let id = taken.stdout.trim();
    assert!(
        id.starts_with("snap_") && !id.contains(char::is_whitespace),
        "{taken:?}"
    );
    let stored = toold.get(&format!("/v1/snapshots/{id}")).await;
    assert_eq!(stored.status, StatusCode::OK, "{}", stored.body);
    assert_eq!(stored.body["name"], "first");
    let as_json = run(&toold, &["-o", "json", "snapshot", &session]).await;
    let answer: Value = serde_json::from_str(&as_json.stdout).unwrap();
    assert!(
        answer["id"].as_str().unwrap().starts_with("snap_"),
        "{answer}"
    );
    assert_eq!(answer["session_id"], session.as_str());

    let forked = run(&toold, &["fork", &session, "-n", "2"]).await;
    assert_eq!(forked.code, 0, "{forked:?}");
    let mut lines = forked.stdout.lines();
    assert_eq!(lines.next(), Some("SESSION\tSNAPSHOT"));
    let rows: Vec<(String, String)> = lines
        .map(|line| {
            let (session, snapshot) = line.split_once('\t').unwrap();
            (session.to_owned(), snapshot.to_owned())
        })
        .collect();
    assert_eq!(rows.len(), 2, "{forked:?}");
    assert_ne!(rows[0].0, rows[1].0);
    assert_eq!(rows[0].1, rows[1].1);
    assert!(rows[0].1.starts_with("snap_"));
    for (fork, _) in &rows {
        assert_ne!(fork, &session);
        assert_eq!(
            read(&toold, fork, "state.txt").await,
            (StatusCode::OK, "before the fork\n".to_owned())
        );
    }

    let as_json = run(&toold, &["-o", "json", "fork", &session, "-n", "1"]).await;
    let answer: Value = serde_json::from_str(&as_json.stdout).unwrap();
    assert_eq!(answer["sessions"].as_array().unwrap().len(), 1, "{answer}");
    assert!(answer["snapshot_id"].as_str().unwrap().starts_with("snap_"));
}

#[tokio::test]
async fn an_unknown_session_and_a_count_of_zero_are_refused() {
    let toold = Toold::start();
    let session = toold.session().await;
    for args in [
        &["snapshot", "sess_nope"][..],
        &["fork", "sess_nope", "-n", "2"][..],
    ] {
        let ran = run(&toold, args).await;
        assert_eq!(ran.code, 1, "{ran:?}");
        assert!(
            ran.stderr.contains("unknown session \"sess_nope\""),
            "{ran:?}"
        );
    }
    let zero = run(&toold, &["fork", &session, "-n", "0"]).await;
    assert_eq!(zero.code, 2, "{zero:?}");
    assert!(zero.stderr.contains("1 or more"), "{zero:?}");
    let listed = toold.get("/v1/snapshots").await;
    assert_eq!(
        listed.body["snapshots"],
        serde_json::json!([]),
        "nothing was taken"
    );
}
