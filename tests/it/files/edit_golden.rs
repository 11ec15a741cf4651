//! The golden edit suite: one table (`golden/edit_cases.json`), two adapters (`edit_file` and
//! `str_replace_based_edit_tool`'s `str_replace`). Each case starts from a fresh workspace,
//! runs its setup (reads, outside changes, touches, earlier edits) with the adapter's own
//! tools, then edits and compares the file (and the error) with the case's expectation. A
//! case may give the text editor its own expectation where the tools differ by design
//! (`replace_all`, an empty old string).

use std::path::Path;
use std::time::{Duration, SystemTime};

use serde::Deserialize;
use serde_json::{Value, json};
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok};

#[derive(Debug, Deserialize)]
struct Case {
    name: String,
    /// The file's initial content; absent (with no `file_bytes`): the file does not exist.
    file: Option<String>,
    file_bytes: Option<Vec<u8>>,
    setup: Vec<Step>,
    old: String,
    new: String,
    replace_all: bool,
    expect: Expect,
    text_editor: Option<Expect>,
}

#[derive(Debug, Deserialize)]
#[serde(untagged)]
enum Step {
    /// `read` (whole) or `read_partial` (first line) with the adapter's reading tool, or
    /// `touch` (a new mtime, same content).
    Named(String),
    /// The file rewritten from outside the session.
    Outside { outside: String },
    /// An earlier edit with the adapter, which must succeed.
    Edit { edit: EditStep },
}

#[derive(Debug, Deserialize)]
struct EditStep {
    old: String,
    new: String,
}

#[derive(Debug, Deserialize)]
struct Expect {
    /// The file's content after a successful edit.
    content: Option<String>,
    /// The error kind of a refused edit (the file must then be as the setup left it).
    error: Option<String>,
    #[serde(default)]
    contains: Vec<String>,
}

/// How one tool family reads and edits.
#[derive(Clone, Copy, Debug)]
enum Adapter {
    EditFile,
    TextEditor,
}

const TARGET: &str = "target.txt";

impl Adapter {
    fn read(self, partial: bool) -> (&'static str, Value) {
        match (self, partial) {
            (Adapter::EditFile, false) => ("read_file", json!({"file_path": TARGET})),
            (Adapter::EditFile, true) => ("read_file", json!({"file_path": TARGET, "limit": 1})),
            (Adapter::TextEditor, false) => (
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": TARGET}),
            ),
            (Adapter::TextEditor, true) => (
                "str_replace_based_edit_tool",
                json!({"command": "view", "path": TARGET, "view_range": [1, 1]}),
            ),
        }
    }

    fn edit(self, old: &str, new: &str, replace_all: bool) -> (&'static str, Value) {
        match self {
            Adapter::EditFile => (
                "edit_file",
                json!({"file_path": TARGET, "old_string": old, "new_string": new, "replace_all": replace_all}),
            ),
            Adapter::TextEditor => (
                "str_replace_based_edit_tool",
                json!({"command": "str_replace", "path": TARGET, "old_str": old, "new_str": new}),
            ),
        }
    }

    fn expectation(self, case: &Case) -> &Expect {
        match (self, &case.text_editor) {
            (Adapter::TextEditor, Some(own)) => own,
            _ => &case.expect,
        }
    }
}

fn cases() -> Vec<Case> {
    let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/files/golden/edit_cases.json");
    let text = std::fs::read_to_string(&path).unwrap();
    serde_json::from_str(&text).unwrap()
}

fn current(path: &Path) -> Option<Vec<u8>> {
    std::fs::read(path).ok()
}

/// Runs one case with one adapter; returns a description of what went wrong, if anything.
async fn run(case: &Case, adapter: Adapter) -> Result<(), String> {
    let env = Env::new();
    let path = env.path(TARGET);
    if let Some(bytes) = case
        .file_bytes
        .clone()
        .or(case.file.clone().map(String::into_bytes))
    {
        env.put(TARGET, bytes);
    }
    for step in &case.setup {
        match step {
            Step::Named(name) if name == "read" || name == "read_partial" => {
                let (tool, input) = adapter.read(name == "read_partial");
                let result = env.call(tool, input).await;
                if result.is_error {
                    return Err(format!("setup read failed: {}", result.output));
                }
            }
            Step::Named(name) if name == "touch" => {
                let file = std::fs::File::options().write(true).open(&path).unwrap();
                file.set_modified(SystemTime::now() + Duration::from_secs(7200))
                    .unwrap();
            }
            Step::Named(other) => return Err(format!("unknown setup step {other:?}")),
            Step::Outside { outside } => std::fs::write(&path, outside).unwrap(),
            Step::Edit { edit } => {
                let (tool, input) = adapter.edit(&edit.old, &edit.new, false);
                let result = env.call(tool, input).await;
                if result.is_error {
                    return Err(format!("setup edit failed: {}", result.output));
                }
            }
        }
    }
    let before = current(&path);
    let (tool, input) = adapter.edit(&case.old, &case.new, case.replace_all);
    let result = env.call(tool, input).await;
    let expect = adapter.expectation(case);
    let shown = path.display().to_string();
    match (&expect.content, &expect.error) {
        (Some(content), None) => {
            if result.is_error {
                return Err(format!("expected success, got {}", result.output));
            }
            let after = current(&path).unwrap_or_default();
            if after != content.as_bytes() {
                return Err(format!(
                    "content {:?}, expected {content:?}",
                    String::from_utf8_lossy(&after)
                ));
            }
            // The session's own edit leaves the cache current, so a further edit needs no read.
            let entry = env
                .session
                .file_state(&path)
                .ok_or("no file state after the edit")?;
            let hash = format!("{:032x}", xxhash_rust::xxh3::xxh3_128(&after));
            if entry.content_hash != hash || entry.partial {
                return Err(format!("file state not current: {entry:?}"));
            }
        }
        (None, Some(kind)) => {
            let kind = ErrorKind::parse(kind).ok_or(format!("unknown kind {kind}"))?;
            if result.error_kind != Some(kind) {
                return Err(format!(
                    "expected {kind}, got {:?}: {}",
                    result.error_kind, result.output
                ));
            }
            for needle in &expect.contains {
                let needle = needle.replace("{path}", &shown);
                if !result.output.contains(&needle) {
                    return Err(format!("output lacks {needle:?}: {}", result.output));
                }
            }
            if current(&path) != before {
                return Err("a refused edit changed the file".into());
            }
        }
        _ => return Err("a case expects either content or an error".into()),
    }
    Ok(())
}

async fn run_all(adapter: Adapter) {
    let cases = cases();
    assert!(
        cases.len() >= 30,
        "the golden suite has {} cases",
        cases.len()
    );
    let mut failures = Vec::new();
    for case in &cases {
        if let Err(problem) = run(case, adapter).await {
            failures.push(format!("{}: {problem}", case.name));
        }
    }
    assert!(
        failures.is_empty(),
        "{adapter:?}: {} of {} cases failed:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn golden_edits_with_edit_file() {
    run_all(Adapter::EditFile).await;
}

#[tokio::test]
async fn golden_edits_with_the_text_editor() {
    run_all(Adapter::TextEditor).await;
}

#[tokio::test]
async fn every_case_is_meaningful_for_both_adapters() {
    for case in cases() {
        // A case the tools disagree on must say so explicitly for the text editor.
        if case.replace_all && case.expect.content.is_some() {
            let own = case.text_editor.as_ref();
            let same_single_match = case.name.contains("single match");
            assert!(own.is_some() || same_single_match, "{}", case.name);
        }
    }
}

#[tokio::test]
async fn edit_file_returns_a_short_diff() {
    let env = Env::new();
    let path = env.put("src/lib.rs", "fn a() {}\nfn b() {}\nfn c() {}\n");
    ok(&env
        .call("read_file", json!({"file_path": "src/lib.rs"}))
        .await);
    let result = env
        .call(
            "Edit",
            json!({"file_path": "src/lib.rs", "old_string": "fn b() {}", "new_string": "fn b() -> u8 { 1 }"}),
        )
        .await;
    let label = path.display().to_string();
    let label = label.trim_start_matches('/');
    assert_eq!(
        ok(&result),
        format!(
            "Edited \"{}\" (1 replacement):\n--- a/{label}\n+++ b/{label}\n@@ -1,3 +1,3 @@\n fn a() {{}}\n-fn b() {{}}\n+fn b() -> u8 {{ 1 }}\n fn c() {{}}\n",
            path.display()
        )
    );
    assert_eq!(result.metadata["replacements"], json!(1));
}

#[tokio::test]
async fn edit_file_bad_input() {
    let env = Env::new();
    env.put("f.txt", "x\n");
    ok(&env.call("read_file", json!({"file_path": "f.txt"})).await);
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        (
            "missing old_string",
            json!({"file_path": "f.txt", "new_string": "y"}),
            ErrorKind::InputValidation,
            "old_string",
        ),
        (
            "missing new_string",
            json!({"file_path": "f.txt", "old_string": "x"}),
            ErrorKind::InputValidation,
            "new_string",
        ),
        (
            "missing path",
            json!({"old_string": "x", "new_string": "y"}),
            ErrorKind::InputValidation,
            "file_path",
        ),
        (
            "old_string a number",
            json!({"file_path": "f.txt", "old_string": 1, "new_string": "y"}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "replace_all a string",
            json!({"file_path": "f.txt", "old_string": "x", "new_string": "y", "replace_all": "yes"}),
            ErrorKind::InputValidation,
            "boolean",
        ),
        (
            "unknown field",
            json!({"file_path": "f.txt", "old_string": "x", "new_string": "y", "regex": true}),
            ErrorKind::InputValidation,
            "regex",
        ),
        (
            "input not an object",
            json!(["f.txt", "x", "y"]),
            ErrorKind::InputValidation,
            "object",
        ),
        (
            "empty path",
            json!({"file_path": "", "old_string": "x", "new_string": "y"}),
            ErrorKind::Validation,
            "empty",
        ),
        (
            "a directory",
            json!({"file_path": ".", "old_string": "x", "new_string": "y"}),
            ErrorKind::Validation,
            "is a directory",
        ),
        (
            "same strings",
            json!({"file_path": "f.txt", "old_string": "", "new_string": ""}),
            ErrorKind::Validation,
            "are the same",
        ),
    ];
    for (name, input, kind, needle) in cases {
        let result = env.call("edit_file", input).await;
        let message = failed(&result, kind);
        assert!(message.contains(needle), "{name}: {message}");
    }
    assert_eq!(env.text("f.txt"), "x\n");
}
