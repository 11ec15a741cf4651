//! `write_file`: creating, the read-before-overwrite rule judged by content, permissions,
//! bad input.

use std::os::unix::fs::PermissionsExt;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok};

#[tokio::test]
async fn creating_needs_no_read_and_makes_parents() {
    let env = Env::new();
    let result = env
        .call(
            "write_file",
            json!({"file_path": "a/b/c/new.txt", "content": "one\ntwo\n"}),
        )
        .await;
    let path = env.path("a/b/c/new.txt");
    assert_eq!(
        ok(&result),
        format!("Created \"{}\" (2 lines, 8 bytes)", path.display())
    );
    assert_eq!(result.metadata["created"], json!(true));
    assert_eq!(env.text("a/b/c/new.txt"), "one\ntwo\n");
    let entry = env.session.file_state(&path).unwrap();
    assert!(!entry.partial);
    assert_eq!(entry.size, 8);
    // Content is written as given: CRLF stays, no newline is added.
    ok(&env
        .call(
            "write_file",
            json!({"file_path": "crlf.txt", "content": "a\r\nb"}),
        )
        .await);
    assert_eq!(env.text("crlf.txt"), "a\r\nb");
    let via_alias = env
        .call("Write", json!({"file_path": "alias.txt", "content": ""}))
        .await;
    ok(&via_alias);
    assert_eq!(env.text("alias.txt"), "");
}

#[tokio::test]
async fn overwriting_follows_the_read_rule() {
    let env = Env::new();
    let path = env.put("config.toml", "a = 1\n");
    std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o600)).unwrap();
    let write = |content: &str| json!({"file_path": "config.toml", "content": content});

    let unread = env.call("write_file", write("a = 2\n")).await;
    let message = failed(&unread, ErrorKind::Validation);
    assert!(
        message.contains("has not been read in this session") && message.contains("read_file"),
        "{message}"
    );
    assert_eq!(env.text("config.toml"), "a = 1\n");

    ok(&env
        .call("read_file", json!({"file_path": "config.toml"}))
        .await);
    let replaced = env.call("write_file", write("a = 2\n")).await;
    let text = ok(&replaced);
    assert!(
        text.starts_with(&format!(
            "Replaced \"{}\" (1 lines, 6 bytes); diff:\n",
            path.display()
        )),
        "{text}"
    );
    assert!(text.contains("-a = 1\n+a = 2\n"), "{text}");
    assert_eq!(replaced.metadata["created"], json!(false));
    assert_eq!(
        std::fs::metadata(&path).unwrap().permissions().mode() & 0o777,
        0o600
    );

    // The session's own write keeps the cache current: no read needed to write again.
    ok(&env.call("write_file", write("a = 3\n")).await);
    assert_eq!(env.text("config.toml"), "a = 3\n");

    // A touch changes the mtime, not the content: still current.
    let file = std::fs::File::options().write(true).open(&path).unwrap();
    file.set_modified(SystemTime::now() + Duration::from_secs(3600))
        .unwrap();
    ok(&env.call("write_file", write("a = 4\n")).await);

    // A change from outside, even one that keeps size and mtime, makes it stale.
    let before = std::fs::metadata(&path).unwrap().modified().unwrap();
    std::fs::write(&path, "a = 9\n").unwrap();
    std::fs::File::options()
        .write(true)
        .open(&path)
        .unwrap()
        .set_modified(before)
        .unwrap();
    let stale = env.call("write_file", write("a = 5\n")).await;
    let message = failed(&stale, ErrorKind::Validation);
    assert!(
        message.contains("has changed since this session last read it"),
        "{message}"
    );
    assert_eq!(env.text("config.toml"), "a = 9\n");

    // A partial read counts as a read.
    ok(&env
        .call("read_file", json!({"file_path": "config.toml", "limit": 1}))
        .await);
    ok(&env.call("write_file", write("a = 6\n")).await);
    assert_eq!(env.text("config.toml"), "a = 6\n");
}

#[tokio::test]
async fn bad_input_and_refusals() {
    let env = Env::new();
    env.put("file.txt", "x");
    std::fs::create_dir_all(env.path("folder")).unwrap();
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        (
            "missing content",
            json!({"file_path": "a.txt"}),
            ErrorKind::InputValidation,
            "content",
        ),
        (
            "missing path",
            json!({"content": "x"}),
            ErrorKind::InputValidation,
            "file_path",
        ),
        (
            "content not a string",
            json!({"file_path": "a.txt", "content": 3}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "unknown field",
            json!({"file_path": "a.txt", "content": "", "mode": 1}),
            ErrorKind::InputValidation,
            "mode",
        ),
        (
            "empty path",
            json!({"file_path": "", "content": "x"}),
            ErrorKind::Validation,
            "empty",
        ),
        (
            "NUL",
            json!({"file_path": "a\u{0}", "content": "x"}),
            ErrorKind::Validation,
            "NUL",
        ),
        (
            "a directory",
            json!({"file_path": "folder", "content": "x"}),
            ErrorKind::Validation,
            "is a directory",
        ),
        (
            "under a file",
            json!({"file_path": "file.txt/sub.txt", "content": "x"}),
            ErrorKind::Validation,
            "not a directory",
        ),
        (
            "the workspace itself",
            json!({"file_path": ".", "content": "x"}),
            ErrorKind::Validation,
            "is a directory",
        ),
    ];
    for (name, input, kind, needle) in cases {
        let result = env.call("write_file", input).await;
        let message = failed(&result, kind);
        assert!(message.contains(needle), "{name}: {message}");
    }
    assert_eq!(env.text("file.txt"), "x");
    assert!(!env.path("a.txt").exists());
}

#[tokio::test]
async fn a_large_content_is_written_whole() {
    let env = Env::new();
    let content = "0123456789abcdef".repeat(200_000);
    ok(&env
        .call(
            "write_file",
            json!({"file_path": "big.txt", "content": content}),
        )
        .await);
    assert_eq!(env.text("big.txt").len(), content.len());
    ok(&env
        .call("read_file", json!({"file_path": "big.txt", "limit": 1}))
        .await);
    let replaced = env
        .call(
            "write_file",
            json!({"file_path": "big.txt", "content": "small\n"}),
        )
        .await;
    assert!(ok(&replaced).ends_with("the file is too large to show a diff"));
}
