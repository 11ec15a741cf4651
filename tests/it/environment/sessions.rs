//! Sessions on the registry image through the real daemon: one view for `bash` and the file
//! tools, the image's `Env` and workdir, writes private to the session (DESIGN §12).

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;
use crate::support::registry::MARKER;

async fn session(toold: &Toold, image: &str, mode: &str) -> String {
    toold
        .session_with(&json!({"environment": {"image": image}, "permission_mode": mode}))
        .await
}

async fn bash(toold: &Toold, session: &str, command: &str) -> Value {
    toold
        .call_one(session, "bash", json!({"command": command}))
        .await
}

async fn read(toold: &Toold, session: &str, path: &str) -> Value {
    toold
        .call_one(session, "read_file", json!({"file_path": path}))
        .await
}

fn text(result: &Value) -> &str {
    result["output"].as_str().unwrap_or_default()
}

#[tokio::test]
async fn bash_and_read_file_see_the_image_and_not_the_host() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(&toold, &image, "workspace_write").await;
    let shown = toold.get(&format!("/v1/sessions/{id}")).await;
    assert_eq!(
        shown.body["environment"]["isolation"], "bwrap",
        "{}",
        shown.body
    );

    let out = bash(
        &toold,
        &id,
        "cat /etc/marker; pwd; echo \"mark=$TOOLD_IMAGE_MARK\"; \
         if test -e /usr/bin/python3; then echo host-python; else echo no-python; fi",
    )
    .await;
    assert_eq!(out["is_error"], false, "{out}");
    let output = text(&out);
    assert!(output.contains(MARKER), "{output}");
    assert!(output.lines().any(|l| l == "/workspace"), "{output}");
    assert!(output.contains("mark=from-the-image"), "{output}");
    assert!(output.contains("no-python"), "{output}");
    assert_eq!(out["metadata"]["shell"], "/bin/sh", "{out}");
    assert_eq!(out["metadata"]["sandbox"], "bwrap", "{out}");
    assert!(std::path::Path::new("/usr/bin/python3").exists() || !crate::support::in_ci());

    // The same bytes through read_file, a read anywhere in the environment being a read.
    let marker = read(&toold, &id, "/etc/marker").await;
    assert_eq!(marker["is_error"], false, "{marker}");
    assert!(text(&marker).contains(MARKER), "{marker}");
    let release = read(&toold, &id, "/etc/os-release").await;
    assert!(text(&release).contains("toold-busybox"), "{release}");
    let python = read(&toold, &id, "/usr/bin/python3").await;
    assert_eq!(python["is_error"], true, "{python}");
    let escape = read(&toold, &id, "/../../../etc/passwd").await;
    assert_eq!(escape["is_error"], true, "{escape}");
    assert!(
        text(&escape).contains("leaves the session's environment"),
        "{escape}"
    );

    // A file bash writes in the workspace is the file read_file reads, and back.
    bash(&toold, &id, "echo from-bash > made.txt").await;
    assert!(text(&read(&toold, &id, "made.txt").await).contains("from-bash"));
    assert!(text(&read(&toold, &id, "/workspace/made.txt").await).contains("from-bash"));
    let written = toold
        .call_one(
            &id,
            "write_file",
            json!({"file_path": "/workspace/tool.txt", "content": "from-tool\n"}),
        )
        .await;
    assert_eq!(written["is_error"], false, "{written}");
    assert!(text(&bash(&toold, &id, "cat /workspace/tool.txt").await).contains("from-tool"));

    // Writes outside the workspace need danger_full_access: refused for this session.
    let outside = bash(&toold, &id, "echo x > /etc/nope").await;
    assert!(
        text(&outside).contains("Read-only file system"),
        "{outside}"
    );
    let outside = toold
        .call_one(
            &id,
            "write_file",
            json!({"file_path": "/etc/nope", "content": "x"}),
        )
        .await;
    assert_eq!(outside["is_error"], true, "{outside}");
    assert!(text(&outside).contains("danger_full_access"), "{outside}");
}

#[tokio::test]
async fn a_write_outside_the_workspace_stays_in_its_session() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let first = session(&toold, &image, "danger_full_access").await;
    let out = bash(
        &toold,
        &first,
        "echo private > /etc/written && cat /etc/written",
    )
    .await;
    assert!(text(&out).contains("private"), "{out}");
    let tool = toold
        .call_one(
            &first,
            "write_file",
            json!({"file_path": "/etc/by-tool", "content": "t"}),
        )
        .await;
    assert_eq!(tool["is_error"], false, "{tool}");
    assert!(text(&read(&toold, &first, "/etc/written").await).contains("private"));

    let second = session(&toold, &image, "danger_full_access").await;
    let out = bash(
        &toold,
        &second,
        "cat /etc/written /etc/by-tool; echo status=$?",
    )
    .await;
    assert!(text(&out).contains("No such file"), "{out}");
    assert!(!text(&out).contains("private"), "{out}");
    let seen = read(&toold, &second, "/etc/written").await;
    assert_eq!(seen["is_error"], true, "{seen}");

    let images = toold.get("/v1/images").await;
    let digest = images.body["images"][0]["digest"]
        .as_str()
        .unwrap()
        .to_owned();
    let rootfs = toold
        .dir
        .path()
        .join("data/images")
        .join(digest.trim_start_matches("sha256:"))
        .join("rootfs");
    assert!(rootfs.join("etc/marker").is_file());
    assert!(!rootfs.join("etc/written").exists());
    assert!(!rootfs.join("etc/by-tool").exists());

    // Closing takes the session's view down; the image is free to delete once both are.
    for id in [&first, &second] {
        let closed = toold.delete(&format!("/v1/sessions/{id}")).await;
        assert_eq!(closed.status, StatusCode::OK, "{}", closed.body);
    }
    let deleted = toold.delete(&format!("/v1/images/{digest}")).await;
    assert_eq!(deleted.status, StatusCode::OK, "{}", deleted.body);
}

/// The host's path of anything under the daemon's data directory (where every environment's
/// root lives) must never be in an answer.
/// `name` called with `input` in session `id`; its answer, checked to hold no host path.
async fn answer(toold: &Toold, id: &str, name: &str, input: Value) -> Value {
    let result = toold.call_one(id, name, input).await;
    assert_no_host_path(toold, &result);
    result
}

fn assert_no_host_path(toold: &Toold, result: &Value) {
    let dir = toold.dir.path().canonicalize().unwrap();
    for host in [dir.as_path(), toold.dir.path()] {
        let host = host.to_string_lossy();
        assert!(
            !result.to_string().contains(&*host),
            "a host path in {result}"
        );
    }
}

#[tokio::test]
async fn searches_notebooks_and_answers_speak_the_environments_paths() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = session(&toold, &image, "workspace_write").await;
    bash(
        &toold,
        &id,
        "mkdir -p src && echo needle-in-src > src/a.txt",
    )
    .await;

    // A search outside the workspace is a read anywhere inside the environment: the image's
    // /etc, shown as the environment's paths.
    let found = answer(
        &toold,
        &id,
        "grep_search",
        json!({"pattern": "toold-busybox", "path": "/etc", "output_mode": "files_with_matches"}),
    )
    .await;
    assert_eq!(found["is_error"], false, "{found}");
    assert!(text(&found).contains("/etc/os-release"), "{found}");
    let globbed = answer(
        &toold,
        &id,
        "glob_search",
        json!({"pattern": "marker", "path": "/etc"}),
    )
    .await;
    assert_eq!(globbed["is_error"], false, "{globbed}");
    assert!(text(&globbed).contains("/etc/marker"), "{globbed}");
    // In the workspace, with no path and with one below it.
    for input in [
        json!({"pattern": "needle-in-src"}),
        json!({"pattern": "needle", "path": "src"}),
    ] {
        let found = answer(&toold, &id, "grep_search", input.clone()).await;
        assert_eq!(found["is_error"], false, "{input}: {found}");
        assert!(
            text(&found).contains("/workspace/src/a.txt"),
            "{input}: {found}"
        );
    }
    let globbed = answer(&toold, &id, "glob_search", json!({"pattern": "**/*.txt"})).await;
    assert!(text(&globbed).contains("/workspace/src/a.txt"), "{globbed}");
    // Nothing of the host: its root, and a link made inside that points at a host path.
    bash(&toold, &id, "ln -s /etc src/etc-link").await;
    let escape = answer(
        &toold,
        &id,
        "grep_search",
        json!({"pattern": "root", "path": "/../../../../etc"}),
    )
    .await;
    assert_eq!(escape["is_error"], true, "{escape}");
    let linked = answer(
        &toold,
        &id,
        "grep_search",
        json!({"pattern": "toold-busybox", "path": "src/etc-link"}),
    )
    .await;
    // The link is the environment's /etc (resolved inside it), never the host's.
    assert!(!text(&linked).contains("Debian"), "{linked}");

    // The file tools' answers name the environment's paths.
    let created = answer(
        &toold,
        &id,
        "write_file",
        json!({"file_path": "notes.txt", "content": "one\n"}),
    )
    .await;
    assert_eq!(created["is_error"], false, "{created}");
    assert!(text(&created).contains("/workspace/notes.txt"), "{created}");
    let edited = answer(
        &toold,
        &id,
        "edit_file",
        json!({"file_path": "/workspace/notes.txt", "old_string": "one", "new_string": "two"}),
    )
    .await;
    assert_eq!(edited["is_error"], false, "{edited}");
    let missing = read(&toold, &id, "/etc/none").await;
    assert_eq!(missing["is_error"], true, "{missing}");
    assert_no_host_path(&toold, &missing);

    // A notebook by its absolute environment path, seen by bash.
    let notebook = json!({"cells": [{"cell_type": "code", "id": "c1", "metadata": {}, "source": ["print(1)"], "outputs": [], "execution_count": null}],
        "metadata": {}, "nbformat": 4, "nbformat_minor": 5});
    answer(
        &toold,
        &id,
        "write_file",
        json!({"file_path": "/workspace/n.ipynb", "content": notebook.to_string()}),
    )
    .await;
    let cell = answer(
        &toold,
        &id,
        "notebook_edit",
        json!({"notebook_path": "/workspace/n.ipynb", "cell_id": "c1", "new_source": "print(2)"}),
    )
    .await;
    assert_eq!(cell["is_error"], false, "{cell}");
    assert!(text(&bash(&toold, &id, "cat /workspace/n.ipynb").await).contains("print(2)"));
}
