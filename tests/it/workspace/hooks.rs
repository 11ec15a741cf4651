//! The hooks see the workspace's way in and out: `upload` and `download` are the tools a
//! `pre_tool_use`/`post_tool_use` matcher names, with the path and kind as their input, and a
//! pre hook's exit 2 refuses an upload before a byte lands.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{get_bytes, post_archive, put_file};
use crate::http::harness::Toold;
use crate::support::deadline::within;

/// Each whole line of a hook's log: one event a run (a line still being written, with no
/// newline yet, is not counted).
fn events(log: &std::path::Path) -> Vec<Value> {
    let text = std::fs::read_to_string(log).unwrap_or_default();
    let whole = text.rfind('\n').map_or("", |end| &text[..end]);
    whole
        .lines()
        .map(|line| serde_json::from_str(line).expect("an event a line"))
        .collect()
}

fn tar_of(files: &[(&str, &[u8])]) -> Vec<u8> {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, data) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(data.len() as u64);
        header.set_mode(0o644);
        builder.append_data(&mut header, path, *data).unwrap();
    }
    builder.into_inner().unwrap()
}

#[tokio::test]
async fn pre_and_post_hooks_see_uploads_and_downloads_and_a_pre_hook_refuses_one() {
    let scripts = tempfile::tempdir().unwrap();
    let pre_log = scripts.path().join("pre.log");
    let post_log = scripts.path().join("post.log");
    let pre = scripts.path().join("pre.sh");
    std::fs::write(
        &pre,
        format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> {}\n\
             case \"$input\" in *blocked*) echo 'no blocked paths' >&2; exit 2;; esac\n",
            pre_log.display()
        ),
    )
    .unwrap();
    let post = scripts.path().join("post.sh");
    std::fs::write(
        &post,
        format!(
            "input=$(cat)\nprintf '%s\\n' \"$input\" >> {}\n",
            post_log.display()
        ),
    )
    .unwrap();
    let toold = Toold::start_with_config(&format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"upload\"\ncommand = \"sh {}\"\n\n\
         [[hooks.post_tool_use]]\nmatcher = \"download\"\ncommand = \"sh {}\"\n",
        pre.display(),
        post.display()
    ));
    let session = toold.session().await;
    let workspace = toold.workspace(&session).await;

    let reply = put_file(&toold, &session, "notes/a.txt", b"hello".to_vec()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let seen = events(&pre_log);
    assert_eq!(seen.len(), 1, "{seen:?}");
    assert_eq!(seen[0]["hook_event_name"], "PreToolUse");
    assert_eq!(seen[0]["tool_name"], "upload");
    assert_eq!(seen[0]["tool_input"]["path"], "notes/a.txt");
    assert_eq!(seen[0]["tool_input"]["kind"], "file");

    // The pre hook's exit 2 refuses the upload: nothing is written.
    let reply = put_file(&toold, &session, "blocked.txt", b"no".to_vec()).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert_eq!(
        reply.body["error"]["code"], "permission_denied",
        "{}",
        reply.body
    );
    assert!(
        reply.body.to_string().contains("no blocked paths"),
        "{}",
        reply.body
    );
    assert!(!workspace.join("blocked.txt").exists());
    let archive = tar_of(&[("x.txt", b"x")]);
    let reply = post_archive(&toold, &session, Some("blocked"), archive.clone()).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert!(!workspace.join("blocked").exists());
    let reply = post_archive(&toold, &session, Some("vendor"), archive).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let seen = events(&pre_log);
    assert_eq!(seen.len(), 4, "{seen:?}");
    assert_eq!(seen[3]["tool_input"]["kind"], "archive");
    assert_eq!(seen[3]["tool_input"]["path"], "vendor");
    // Downloads do not match the pre hook's matcher.
    assert!(events(&post_log).is_empty());

    let path = format!("/v1/sessions/{session}/files/notes/a.txt");
    let (status, _, body) = get_bytes(&toold, &path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(body, b"hello");
    let archive_path = format!("/v1/sessions/{session}/archive?path=vendor&format=tar");
    let (status, _, _) = get_bytes(&toold, &archive_path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    // A download's call ends when its body has been sent, a moment after the client read it.
    let seen = within(
        Duration::from_secs(10),
        "the post hooks of both downloads",
        async {
            loop {
                let seen = events(&post_log);
                if seen.len() >= 2 {
                    return seen;
                }
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        },
    )
    .await;
    assert_eq!(seen.len(), 2, "{seen:?}");
    assert_eq!(seen[0]["hook_event_name"], "PostToolUse");
    assert_eq!(seen[0]["tool_name"], "download");
    assert_eq!(seen[0]["tool_input"]["path"], "notes/a.txt");
    assert_eq!(seen[0]["tool_response"]["is_error"], false);
    assert_eq!(seen[1]["tool_input"]["kind"], "archive");
    assert_eq!(seen[1]["tool_input"]["format"], "tar");
    assert_eq!(events(&pre_log).len(), 4);
}
