//! `toold cp` (issue 37) against a real daemon: a tree with nested files, a 1 MiB binary, an
//! executable script and an empty directory goes up (checked through `GET …/files` and a
//! `bash` call running the script) and comes back down file by file, content and executable
//! bit; a single file both ways; absolute remote paths and the bare `SESSION:`. The
//! refusals are in `transfer_refusals`.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};

use super::harness::{Ran, run};
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

pub(super) async fn remote_file(toold: &Toold, session: &str, path: &str) -> (StatusCode, Vec<u8>) {
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

pub(super) fn done(ran: &Ran) {
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

#[tokio::test]
async fn absolute_remote_paths_and_the_bare_workspace_work() {
    let toold = Toold::start();
    let session = toold.session().await;
    let workspace = toold.workspace(&session).await;
    let local = tempfile::tempdir().unwrap();
    let file = local.path().join("note.txt");
    std::fs::write(&file, "noted\n").unwrap();
    let file = file.to_str().unwrap();

    // `SESSION:` is the workspace: a file keeps its name there.
    done(&run(&toold, &["cp", file, &format!("{session}:")]).await);
    assert_eq!(
        remote_file(&toold, &session, "note.txt").await.1,
        b"noted\n"
    );
    // An absolute path inside the workspace, for a file and for a directory.
    let absolute = format!("{session}:{}/abs/deep/note.txt", workspace.display());
    done(&run(&toold, &["cp", file, &absolute]).await);
    assert_eq!(
        remote_file(&toold, &session, "abs/deep/note.txt").await.1,
        b"noted\n"
    );
    let out = local.path().join("abs");
    let dir = format!("{session}:{}/abs", workspace.display());
    done(&run(&toold, &["cp", &dir, out.to_str().unwrap()]).await);
    assert_eq!(
        std::fs::read_to_string(out.join("deep/note.txt")).unwrap(),
        "noted\n"
    );
    // The whole workspace comes down from `SESSION:`.
    let all = local.path().join("all");
    done(
        &run(
            &toold,
            &["cp", &format!("{session}:"), all.to_str().unwrap()],
        )
        .await,
    );
    assert!(all.join("note.txt").is_file() && all.join("abs/deep/note.txt").is_file());
}
