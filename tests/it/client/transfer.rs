//! `toold cp` (issue 37) against a real daemon: a tree with nested files, a 1 MiB binary, an
//! executable script and an empty directory goes up (checked through `GET …/files` and a
//! `bash` call running the script) and comes back down file by file, content and executable
//! bit; a single file both ways; and each refusal with its exit code and its message.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::{Ran, client_at, finish, run};
use crate::http::harness::Toold;

/// Every byte value, many times over, and not a multiple of a chunk.
fn binary() -> Vec<u8> {
    (0..(1u32 << 20) + 7)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 11) as u8)
        .collect()
}

/// A tree: nested text, a binary, an executable script, an empty directory.
fn source_tree(root: &Path) {
    std::fs::create_dir_all(root.join("nested/deeper")).unwrap();
    std::fs::create_dir_all(root.join("empty")).unwrap();
    std::fs::write(root.join("nested/deeper/notes.txt"), "deep text\n").unwrap();
    std::fs::write(root.join("nested/top.txt"), "top text\n").unwrap();
    std::fs::write(root.join("blob.bin"), binary()).unwrap();
    let script = root.join("run.sh");
    std::fs::write(&script, "#!/bin/sh\necho ran from the script\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o755)).unwrap();
}

/// Relative path → (content, executable?) of every file, and `None` for a directory.
fn tree(root: &Path) -> BTreeMap<String, Option<(Vec<u8>, bool)>> {
    let mut found = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let relative = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::metadata(&path).unwrap();
            if meta.is_dir() {
                found.insert(relative, None);
                stack.push(path);
            } else {
                let executable = meta.permissions().mode() & 0o111 != 0;
                found.insert(relative, Some((std::fs::read(&path).unwrap(), executable)));
            }
        }
    }
    found
}

async fn remote_file(toold: &Toold, session: &str, path: &str) -> (StatusCode, Vec<u8>) {
    let request = toold.request(Method::GET, &format!("/v1/sessions/{session}/files/{path}"));
    let response = request.send().await.unwrap();
    let status = response.status();
    (status, response.bytes().await.unwrap().to_vec())
}

async fn bash(toold: &Toold, session: &str, command: &str) -> String {
    let result = toold
        .call_one(session, "bash", json!({"command": command}))
        .await;
    assert_eq!(result["is_error"], false, "{result}");
    result["output"].as_str().unwrap().trim().to_owned()
}

fn done(ran: &Ran) {
    assert_eq!(ran.code, 0, "{ran:?}");
    // Not a terminal: no progress line.
    assert_eq!(ran.stderr, "", "{ran:?}");
}

#[tokio::test]
async fn a_directory_goes_up_and_comes_back_down_file_by_file() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let source = local.path().join("src");
    source_tree(&source);

    let up = run(
        &toold,
        &[
            "cp",
            source.to_str().unwrap(),
            &format!("{session}:project"),
        ],
    )
    .await;
    done(&up);
    assert_eq!(up.stdout, "", "text output prints nothing on success");
    let (status, blob) = remote_file(&toold, &session, "project/blob.bin").await;
    assert_eq!(status, StatusCode::OK);
    assert!(blob == binary(), "the binary arrived whole");
    let (_, notes) = remote_file(&toold, &session, "project/nested/deeper/notes.txt").await;
    assert_eq!(notes, b"deep text\n");
    assert_eq!(
        bash(
            &toold,
            &session,
            "./project/run.sh && test -d project/empty && echo empty"
        )
        .await,
        "ran from the script\nempty"
    );

    let out = local.path().join("fresh/out");
    let down = run(
        &toold,
        &["cp", &format!("{session}:project"), out.to_str().unwrap()],
    )
    .await;
    done(&down);
    let (sent, came) = (tree(&source), tree(&out));
    assert_eq!(
        sent.keys().collect::<Vec<_>>(),
        came.keys().collect::<Vec<_>>()
    );
    for (path, file) in &sent {
        assert!(
            file == &came[path],
            "{path}: content or executable bit differs"
        );
    }
    assert!(
        came["run.sh"].as_ref().unwrap().1,
        "run.sh came down executable"
    );

    // -o json: the daemon's answer up, and what was written down.
    let json_up = run(
        &toold,
        &[
            "-o",
            "json",
            "cp",
            source.to_str().unwrap(),
            &format!("{session}:again"),
        ],
    )
    .await;
    assert_eq!(json_up.code, 0, "{json_up:?}");
    assert!(
        serde_json::from_str::<Value>(&json_up.stdout)
            .unwrap()
            .is_object()
    );
    let again = local.path().join("again");
    let json_down = run(
        &toold,
        &[
            "-o",
            "json",
            "cp",
            &format!("{session}:again"),
            again.to_str().unwrap(),
        ],
    )
    .await;
    let answer: Value = serde_json::from_str(&json_down.stdout).unwrap();
    assert_eq!(answer["entries"], sent.len(), "{answer}");
    assert!(answer["bytes"].as_u64().unwrap() > binary().len() as u64);
}

#[tokio::test]
async fn a_single_file_goes_both_ways_and_keeps_its_mode_going_up() {
    let toold = Toold::start();
    let session = toold.session().await;
    let local = tempfile::tempdir().unwrap();
    let script = local.path().join("tool.sh");
    std::fs::write(&script, "#!/bin/sh\necho tool ran\n").unwrap();
    std::fs::set_permissions(&script, std::fs::Permissions::from_mode(0o750)).unwrap();
    let data = local.path().join("data.bin");
    std::fs::write(&data, binary()).unwrap();

    // A remote path ending in `/` takes the local name; one that does not is the name.
    done(
        &run(
            &toold,
            &["cp", script.to_str().unwrap(), &format!("{session}:bin/")],
        )
        .await,
    );
    done(
        &run(
            &toold,
            &[
                "cp",
                data.to_str().unwrap(),
                &format!("{session}:d/copy.bin"),
            ],
        )
        .await,
    );
    assert_eq!(bash(&toold, &session, "./bin/tool.sh").await, "tool ran");
    assert_eq!(
        bash(&toold, &session, "stat -c %a bin/tool.sh").await,
        "750"
    );
    let (_, copy) = remote_file(&toold, &session, "d/copy.bin").await;
    assert!(copy == binary());

    // Down into a directory (the remote name), or to a file name.
    let out = tempfile::tempdir().unwrap();
    let into = out.path().to_str().unwrap();
    done(&run(&toold, &["cp", &format!("{session}:bin/tool.sh"), into]).await);
    assert_eq!(
        std::fs::read_to_string(out.path().join("tool.sh")).unwrap(),
        "#!/bin/sh\necho tool ran\n"
    );
    let named = out.path().join("named.bin");
    done(
        &run(
            &toold,
            &[
                "cp",
                &format!("{session}:d/copy.bin"),
                named.to_str().unwrap(),
            ],
        )
        .await,
    );
    assert!(std::fs::read(&named).unwrap() == binary());
    let leftovers: Vec<_> = std::fs::read_dir(out.path())
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .filter(|name| name.starts_with(".toold-cp-"))
        .collect();
    assert!(leftovers.is_empty(), "{leftovers:?}");
}

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
