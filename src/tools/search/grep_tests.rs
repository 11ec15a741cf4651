//! Unit tests of `grep_search`'s input reading and output paging.

use serde_json::json;

use super::*;
use crate::tool::{InterruptBehavior, PermissionLevel};

fn parse(input: Value) -> Result<GrepRequest, ToolError> {
    GrepRequest::parse(&input)
}

fn plan_error(input: Value) -> String {
    let request = parse(input).expect("parses");
    match request.plan(Path::new("/ws")) {
        Ok(_) => panic!("{request:?} compiled"),
        Err(err) => {
            assert!(matches!(err, ToolError::Validation(_)), "{err:?}");
            err.to_string()
        }
    }
}

#[test]
fn defaults_follow_claude_codes_grep() {
    let request = parse(json!({"pattern": "x"})).unwrap();
    assert_eq!(request.mode, OutputMode::FilesWithMatches);
    assert_eq!(request.head_limit, Some(DEFAULT_HEAD_LIMIT));
    assert_eq!(request.offset, 0);
    assert!(request.line_numbers);
    assert!(!request.case_insensitive && !request.multiline);
    assert_eq!((request.before_context, request.after_context), (0, 0));
    assert!(request.globs.is_empty() && request.file_type.is_none());
}

#[test]
fn context_flags_combine_like_rg() {
    for (input, before, after) in [
        (json!({"-C": 2}), 2, 2),
        (json!({"-C": 2, "-A": 5}), 2, 5),
        (json!({"-C": 2, "-B": 0}), 0, 2),
        (json!({"-A": 1, "-B": 3}), 3, 1),
    ] {
        let mut input = input;
        input["pattern"] = json!("x");
        let request = parse(input.clone()).unwrap();
        assert_eq!(
            (request.before_context, request.after_context),
            (before, after),
            "{input}"
        );
    }
}

#[test]
fn limits() {
    for (head_limit, expected) in [
        (json!(0), None),
        (json!(7), Some(7)),
        (json!(1e30), Some(usize::MAX)),
        (json!(u64::MAX), Some(usize::MAX)),
    ] {
        let request = parse(json!({"pattern": "x", "head_limit": head_limit})).unwrap();
        assert_eq!(request.head_limit, expected, "{head_limit}");
    }
    for bad in [
        json!({"pattern": "x", "head_limit": -1}),
        json!({"pattern": "x", "offset": -5}),
        json!({"pattern": "x", "-C": 10_001}),
        json!({"pattern": "x", "-A": 1e12}),
        json!({"pattern": "x", "output_mode": "lines"}),
    ] {
        let err = parse(bad.clone()).unwrap_err();
        assert!(matches!(err, ToolError::Validation(_)), "{bad}: {err:?}");
    }
}

#[test]
fn globs_split_like_claude_code() {
    for (glob, expected) in [
        ("*.rs", vec!["*.rs"]),
        ("*.ts,*.tsx", vec!["*.ts", "*.tsx"]),
        ("*.ts *.tsx", vec!["*.ts", "*.tsx"]),
        ("*.{ts,tsx}", vec!["*.{ts,tsx}"]),
        ("*.{ts,tsx} !dist/**", vec!["*.{ts,tsx}", "!dist/**"]),
        (" , ", vec![]),
    ] {
        assert_eq!(split_globs(glob), expected, "{glob}");
    }
}

#[test]
fn bad_patterns_types_and_globs_are_named() {
    for (input, needles) in [
        (
            json!({"pattern": "foo("}),
            vec!["invalid regex pattern \"foo(\""],
        ),
        (json!({"pattern": "[z-a]"}), vec!["\"[z-a]\""]),
        (
            json!({"pattern": "a\\nb"}),
            vec!["invalid regex pattern", "multiline"],
        ),
        (json!({"pattern": "a\\x00"}), vec!["invalid regex pattern"]),
        (
            json!({"pattern": "x", "type": "pyhton"}),
            vec!["unknown file type \"pyhton\"", "did you mean \"python\""],
        ),
        (
            json!({"pattern": "x", "type": "klingon"}),
            vec!["unknown file type \"klingon\"", "known types include"],
        ),
        (
            json!({"pattern": "x", "glob": "src/[a"}),
            vec!["invalid glob \"src/[a\""],
        ),
        (
            json!({"pattern": "x", "glob": "*.rs {a,b"}),
            vec!["invalid glob \"{a,b\""],
        ),
    ] {
        let message = plan_error(input.clone());
        for needle in needles {
            assert!(message.contains(needle), "{input}: {message}");
        }
    }
}

#[test]
fn a_multiline_pattern_is_fine_in_multiline_mode() {
    let request = parse(json!({"pattern": "a\\nb", "multiline": true})).unwrap();
    assert!(request.plan(Path::new("/ws")).is_ok());
    let all = parse(json!({"pattern": "x", "type": "all"})).unwrap();
    assert!(all.plan(Path::new("/ws")).is_ok());
}

fn result(output: &str) -> SearchResult {
    SearchResult {
        output: output.as_bytes().to_vec(),
        files_matched: 1,
        errors: 0,
        stopped: None,
    }
}

#[test]
fn output_pages_with_a_note() {
    let request = |head_limit: Option<usize>, offset: usize| GrepRequest {
        head_limit,
        offset,
        ..parse(json!({"pattern": "x"})).unwrap()
    };
    let output = "a\r\nb\nc\nd\n";
    for (head_limit, offset, expected) in [
        (None, 0, "a\r\nb\nc\nd\n".to_owned()),
        (Some(4), 0, "a\r\nb\nc\nd\n".to_owned()),
        (
            Some(2),
            0,
            "a\r\nb\n\n[Showing lines 1-2 of 4; pass offset 2 to see more]".to_owned(),
        ),
        (
            Some(1),
            1,
            "b\n\n[Showing lines 2-2 of 4; pass offset 2 to see more]".to_owned(),
        ),
        (Some(9), 3, "d\n".to_owned()),
        (
            Some(1),
            9,
            "No output lines at offset 9; the output has 4 lines".to_owned(),
        ),
    ] {
        let rendered = render(&request(head_limit, offset), result(output));
        assert_eq!(rendered.text, expected, "{head_limit:?} {offset}");
    }
    let empty = render(&request(None, 0), result(""));
    assert_eq!(empty.text, "No matches found");
    let stopped = render(
        &request(None, 0),
        SearchResult {
            stopped: Some(Stopped::Cancelled),
            ..result("a\n")
        },
    );
    assert_eq!(
        stopped.text,
        "a\n\n[The search was cancelled; the results are incomplete]"
    );
    assert_eq!(stopped.metadata["truncated"], json!(true));
}

#[test]
fn the_spec_is_read_only_and_safe() {
    let spec = spec().unwrap();
    assert_eq!(spec.aliases, vec!["Grep".to_owned()]);
    assert_eq!(spec.read_only.fixed(), Some(true));
    assert_eq!(spec.concurrency_safe.fixed(), Some(true));
    assert_eq!(spec.destructive.fixed(), Some(false));
    assert_eq!(spec.required_permission.floor(), PermissionLevel::ReadOnly);
    assert_eq!(spec.interrupt_behavior, InterruptBehavior::Cancel);
}
