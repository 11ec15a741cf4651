//! `read_file`: output format, windows, notes, refusals, bad input, and the read it records.

use serde_json::{Value, json};
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok};

fn numbered(lines: impl IntoIterator<Item = (usize, &'static str)>) -> String {
    lines
        .into_iter()
        .map(|(n, line)| format!("{n:>6}\t{line}\n"))
        .collect()
}

#[tokio::test]
async fn behaviour_table() {
    let env = Env::new();
    env.put("plain.txt", "alpha\nbeta\ngamma\n");
    env.put("crlf.txt", "one\r\ntwo\r\n");
    env.put("unicode.txt", "naïve café\n日本語\n");
    env.put("no_final_newline.txt", "x\ny");
    env.put("empty.txt", "");
    env.put("nested/deep/file.rs", "fn main() {}\n");
    env.put("latin1.txt", b"caf\xe9\n");
    let plain = numbered([(1, "alpha"), (2, "beta"), (3, "gamma")]);
    let cases: Vec<(&str, Value, String)> = vec![
        (
            "whole file",
            json!({"file_path": "plain.txt"}),
            plain.clone(),
        ),
        (
            "absolute path",
            json!({"file_path": env.path("plain.txt")}),
            plain.clone(),
        ),
        (
            "dotted relative path",
            json!({"file_path": "./nested/../plain.txt"}),
            plain,
        ),
        (
            "offset and limit",
            json!({"file_path": "plain.txt", "offset": 2, "limit": 1}),
            format!(
                "{}\n[showing lines 2-2 of 3; 1 more lines remain: call read_file with offset=3 to read on]",
                numbered([(2, "beta")])
            ),
        ),
        (
            "offset to the end",
            json!({"file_path": "plain.txt", "offset": 3}),
            format!("{}\n[showing lines 3-3 of 3]", numbered([(3, "gamma")])),
        ),
        (
            "limit past the end",
            json!({"file_path": "plain.txt", "limit": 99}),
            numbered([(1, "alpha"), (2, "beta"), (3, "gamma")]),
        ),
        (
            "whole numbers as floats",
            json!({"file_path": "plain.txt", "offset": 2.0, "limit": 1.0}),
            format!(
                "{}\n[showing lines 2-2 of 3; 1 more lines remain: call read_file with offset=3 to read on]",
                numbered([(2, "beta")])
            ),
        ),
        (
            "CRLF shown without CR",
            json!({"file_path": "crlf.txt"}),
            numbered([(1, "one"), (2, "two")]),
        ),
        (
            "unicode",
            json!({"file_path": "unicode.txt"}),
            numbered([(1, "naïve café"), (2, "日本語")]),
        ),
        (
            "no final newline",
            json!({"file_path": "no_final_newline.txt"}),
            numbered([(1, "x"), (2, "y")]),
        ),
        (
            "nested",
            json!({"file_path": "nested/deep/file.rs"}),
            numbered([(1, "fn main() {}")]),
        ),
        (
            "empty file",
            json!({"file_path": "empty.txt"}),
            format!(
                "[\"{}\" exists and is empty]",
                env.path("empty.txt").display()
            ),
        ),
        (
            "invalid UTF-8 is shown lossily with a note",
            json!({"file_path": "latin1.txt"}),
            format!(
                "{}\n[the file is not valid UTF-8; invalid bytes are shown as U+FFFD]",
                numbered([(1, "caf\u{fffd}")])
            ),
        ),
    ];
    for (name, input, expected) in cases {
        let result = env.call("read_file", input).await;
        assert_eq!(ok(&result), expected, "{name}");
    }
    let via_alias = env.call("Read", json!({"file_path": "plain.txt"})).await;
    assert!(ok(&via_alias).starts_with("     1\talpha\n"));
}

#[tokio::test]
async fn long_files_and_long_lines() {
    let env = Env::new();
    let long: String = (1..=2500).map(|i| format!("line {i}\n")).collect();
    env.put("long.txt", &long);
    let first = env
        .call("read_file", json!({"file_path": "long.txt"}))
        .await;
    let text = ok(&first);
    assert_eq!(text.lines().filter(|l| l.contains('\t')).count(), 2000);
    assert!(text.contains("  2000\tline 2000\n"));
    assert!(text.ends_with(
        "[showing lines 1-2000 of 2500; 500 more lines remain: call read_file with offset=2001 to read on]"
    ));
    let rest = env
        .call(
            "read_file",
            json!({"file_path": "long.txt", "offset": 2001}),
        )
        .await;
    assert!(ok(&rest).starts_with("  2001\tline 2001\n"));
    assert!(ok(&rest).contains("  2500\tline 2500\n"));

    env.put("wide.txt", format!("{}\nok\n", "w".repeat(5000)));
    let wide = env
        .call("read_file", json!({"file_path": "wide.txt"}))
        .await;
    let text = ok(&wide);
    assert!(text.starts_with(&format!(
        "     1\t{}… [line cut: 5000 characters, 2000 shown]\n",
        "w".repeat(2000)
    )));
    assert!(text.contains("     2\tok\n"));
    assert!(text.ends_with("[1 lines longer than 2000 characters were cut]"));
    let state = env.session.file_state(&env.path("wide.txt")).unwrap();
    assert!(state.partial, "a cut line is a partial read");
}

#[tokio::test]
async fn a_very_large_file_needs_a_range() {
    let env = Env::new();
    let big: String = (0..40_000).map(|i| format!("row {i:08}\n")).collect();
    env.put("big.log", &big);
    let whole = env.call("read_file", json!({"file_path": "big.log"})).await;
    let message = failed(&whole, ErrorKind::Validation);
    assert!(
        message.contains("too large to read at once") && message.contains("offset and limit"),
        "{message}"
    );
    let part = env
        .call(
            "read_file",
            json!({"file_path": "big.log", "offset": 39_999, "limit": 5}),
        )
        .await;
    assert_eq!(
        ok(&part),
        format!(
            "{}\n[showing lines 39999-40000 of 40000]",
            numbered([(39_999, "row 00039998"), (40_000, "row 00039999")])
        )
    );
    let state = env.session.file_state(&env.path("big.log")).unwrap();
    assert!(state.partial);
    assert_eq!(state.size, big.len() as u64);
}

#[tokio::test]
async fn refusals_and_bad_input() {
    let env = Env::new();
    env.put("plain.txt", "alpha\n");
    env.put("image.png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR");
    std::fs::create_dir_all(env.path("folder")).unwrap();
    let fifo = std::ffi::CString::new(env.path("pipe").to_str().unwrap()).unwrap();
    // SAFETY: a valid C string for the duration of the call.
    assert_eq!(unsafe { libc::mkfifo(fifo.as_ptr(), 0o644) }, 0);
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        (
            "missing file_path",
            json!({}),
            ErrorKind::InputValidation,
            "file_path",
        ),
        (
            "file_path not a string",
            json!({"file_path": 7}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "unknown field",
            json!({"file_path": "plain.txt", "lines": 3}),
            ErrorKind::InputValidation,
            "lines",
        ),
        (
            "offset 0",
            json!({"file_path": "plain.txt", "offset": 0}),
            ErrorKind::InputValidation,
            "minimum",
        ),
        (
            "negative limit",
            json!({"file_path": "plain.txt", "limit": -1}),
            ErrorKind::InputValidation,
            "minimum",
        ),
        (
            "offset as text",
            json!({"file_path": "plain.txt", "offset": "2"}),
            ErrorKind::InputValidation,
            "integer",
        ),
        (
            "fractional offset",
            json!({"file_path": "plain.txt", "offset": 1.5}),
            ErrorKind::InputValidation,
            "integer",
        ),
        (
            "empty path",
            json!({"file_path": ""}),
            ErrorKind::Validation,
            "file_path is empty",
        ),
        (
            "NUL in path",
            json!({"file_path": "plain\u{0}.txt"}),
            ErrorKind::Validation,
            "NUL",
        ),
        (
            "missing file",
            json!({"file_path": "nope.txt"}),
            ErrorKind::Validation,
            "does not exist",
        ),
        (
            "a directory",
            json!({"file_path": "folder"}),
            ErrorKind::Validation,
            "is a directory",
        ),
        (
            "a binary file",
            json!({"file_path": "image.png"}),
            ErrorKind::Validation,
            "binary file",
        ),
        (
            "a FIFO",
            json!({"file_path": "pipe"}),
            ErrorKind::Validation,
            "not a regular file",
        ),
        (
            "offset past the end",
            json!({"file_path": "plain.txt", "offset": 5}),
            ErrorKind::Validation,
            "past the end",
        ),
        (
            "huge offset",
            json!({"file_path": "plain.txt", "offset": 1_000_000_000_000u64}),
            ErrorKind::Validation,
            "past the end",
        ),
        (
            "a parent that is a file",
            json!({"file_path": "plain.txt/x"}),
            ErrorKind::Validation,
            "not a directory",
        ),
    ];
    for (name, input, kind, needle) in cases {
        let result = env.call("read_file", input).await;
        let message = failed(&result, kind);
        assert!(message.contains(needle), "{name}: {message}");
    }
    assert!(env.session.file_state(&env.path("image.png")).is_none());
}

#[tokio::test]
async fn a_read_is_recorded_by_content() {
    let env = Env::new();
    let path = env.put("src/lib.rs", "pub fn f() {}\n");
    assert!(env.session.file_state(&path).is_none());
    ok(&env
        .call("read_file", json!({"file_path": "src/lib.rs"}))
        .await);
    let whole = env.session.file_state(&path).unwrap();
    assert_eq!(whole.path, path);
    assert_eq!(whole.size, 14);
    assert_eq!(
        whole.content_hash,
        format!("{:032x}", xxhash_rust::xxh3::xxh3_128(b"pub fn f() {}\n"))
    );
    assert_eq!(
        whole.modified,
        std::fs::metadata(&path).unwrap().modified().ok()
    );
    assert!(!whole.partial);

    env.put("src/lib.rs", "a\nb\nc\n");
    ok(&env
        .call("read_file", json!({"file_path": "src/lib.rs", "limit": 1}))
        .await);
    let part = env.session.file_state(&path).unwrap();
    assert!(part.partial);
    assert_ne!(
        part.content_hash, whole.content_hash,
        "the hash is of the whole file"
    );

    // Through a symlink, the read is recorded for the file it reaches.
    std::os::unix::fs::symlink(&path, env.path("link.rs")).unwrap();
    env.put("src/lib.rs", "changed\n");
    ok(&env.call("read_file", json!({"file_path": "link.rs"})).await);
    assert_eq!(env.session.file_state(&path).unwrap().size, 8);
    assert!(env.session.file_state(&env.path("link.rs")).is_none());
}
