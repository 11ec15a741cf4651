//! Table-driven behaviour and bad-input tests of `glob_search` and `grep_search`, through
//! the dispatcher (schema, validation, permission, execution, offload).

use std::fs::File;
use std::sync::Arc;
use std::time::{Duration, SystemTime};

use serde_json::{Value, json};
use toold::permission::PermissionLevel;
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ErrorKind, Tool, ToolContext};
use toold::tools::GrepSearch;

use crate::search::fixture;
use crate::search::harness::Workspace;

fn fixture_workspace() -> Workspace {
    let ws = Workspace::new(PermissionLevel::WorkspaceWrite);
    fixture::build(&ws);
    ws
}

/// The output's lines made relative to the workspace, sorted (order is checked separately).
fn relative_sorted(ws: &Workspace, output: &str) -> Vec<String> {
    let prefix = format!("{}/", ws.root.display());
    let mut lines: Vec<String> = output
        .lines()
        .map(|line| line.strip_prefix(&prefix).unwrap_or(line).to_owned())
        .collect();
    lines.sort();
    lines
}

#[tokio::test]
async fn glob_search_matches_like_a_shell_and_skips_what_rg_skips() {
    let ws = fixture_workspace();
    for (input, expected) in [
        (json!({"pattern": "*.md"}), vec!["README.md", "unicode.md"]),
        (
            json!({"pattern": "**/*.rs"}),
            vec!["src/lib.rs", "src/main.rs", "src/nested/deep/mod.rs"],
        ),
        (
            json!({"pattern": "src/**/*.{rs,py}"}),
            vec![
                "src/lib.rs",
                "src/main.rs",
                "src/nested/deep/mod.rs",
                "src/nested/util.py",
            ],
        ),
        (json!({"pattern": "src/*/*.py"}), vec!["src/nested/util.py"]),
        (
            json!({"pattern": "web/app.?s"}),
            vec!["web/app.js", "web/app.ts"],
        ),
        (
            json!({"pattern": "*.rs", "path": "src"}),
            vec!["src/lib.rs", "src/main.rs"],
        ),
        (
            json!({"pattern": "*.py", "path": "src/nested"}),
            vec!["src/nested/util.py"],
        ),
        // The root's `.gitignore` anchors `/src/nested/skipped.rs`; it still applies here.
        (
            json!({"pattern": "**/*.rs", "path": "src/nested"}),
            vec!["src/nested/deep/mod.rs"],
        ),
        (
            json!({"pattern": ".config/*"}),
            vec![".config/settings.toml"],
        ),
        (json!({"pattern": "**/.hidden.txt"}), vec![".hidden.txt"]),
        (json!({"pattern": ".git/HEAD"}), vec![".git/HEAD"]),
        // Ignored by .gitignore / .rgignore, hidden, a symlink: not listed.
        (json!({"pattern": "*.log"}), vec!["No files found"]),
        (json!({"pattern": "ignored/*"}), vec!["No files found"]),
        (json!({"pattern": "rgignored.txt"}), vec!["No files found"]),
        (json!({"pattern": "**/*.toml"}), vec!["No files found"]),
        (json!({"pattern": "link.rs"}), vec!["No files found"]),
    ] {
        let output = ws.ok("Glob", input.clone()).await;
        assert_eq!(relative_sorted(&ws, &output), expected, "{input}");
        if output != "No files found" {
            assert!(output.lines().all(|line| line.starts_with('/')), "{output}");
        }
    }
}

#[tokio::test]
async fn glob_search_sorts_newest_first_before_cutting_at_100() {
    let ws = Workspace::new(PermissionLevel::WorkspaceWrite);
    let base = SystemTime::UNIX_EPOCH + Duration::from_secs(1_700_000_000);
    // Written in name order, dated in a shuffled order: the result order must follow mtimes.
    for i in 0..150u64 {
        let path = ws.write(&format!("many/f{i:03}.txt"), "x");
        let age = (i * 37) % 150;
        let file = File::options().write(true).open(&path).unwrap();
        file.set_modified(base + Duration::from_secs(age * 60))
            .unwrap();
    }
    let output = ws.ok("glob_search", json!({"pattern": "many/*.txt"})).await;
    let lines: Vec<&str> = output.lines().collect();
    assert_eq!(lines.len(), 101, "{output}");
    assert!(lines[100].contains("showing the 100 most recently modified of 150 files"));
    let ages: Vec<u64> = lines[..100]
        .iter()
        .map(|line| {
            let i: u64 = line.rsplit('f').next().unwrap()[..3].parse().unwrap();
            (i * 37) % 150
        })
        .collect();
    // The newest 100 of all 150 (ages 149 down to 50), newest first.
    assert_eq!(ages, (50..150).rev().collect::<Vec<_>>());
}

#[tokio::test]
async fn glob_search_refuses_bad_input_clearly() {
    let ws = fixture_workspace();
    for (input, kind, needle) in [
        (json!({}), ErrorKind::InputValidation, "pattern"),
        (json!({"pattern": 5}), ErrorKind::InputValidation, "5"),
        (
            json!({"pattern": ""}),
            ErrorKind::InputValidation,
            "pattern",
        ),
        (
            json!({"pattern": "*", "extra": 1}),
            ErrorKind::InputValidation,
            "extra",
        ),
        (
            json!({"pattern": "*", "path": 3}),
            ErrorKind::InputValidation,
            "path",
        ),
        (
            json!({"pattern": "a["}),
            ErrorKind::Validation,
            "invalid glob pattern \"a[\"",
        ),
        (
            json!({"pattern": "{a,b"}),
            ErrorKind::Validation,
            "invalid glob pattern \"{a,b\"",
        ),
        (
            json!({"pattern": "../*.rs"}),
            ErrorKind::Validation,
            "contains \"..\"",
        ),
        (
            json!({"pattern": "/etc/*"}),
            ErrorKind::Validation,
            "is absolute",
        ),
        (
            json!({"pattern": "*", "path": ""}),
            ErrorKind::Validation,
            "path is empty",
        ),
        (
            json!({"pattern": "*", "path": "a\u{0}b"}),
            ErrorKind::Validation,
            "NUL",
        ),
        (
            json!({"pattern": "*", "path": "missing"}),
            ErrorKind::Validation,
            "path \"missing\" does not exist",
        ),
        (
            json!({"pattern": "*", "path": "README.md"}),
            ErrorKind::Validation,
            "is not a directory",
        ),
        (
            json!({"pattern": "*", "path": "../outside"}),
            ErrorKind::PermissionDenied,
            "",
        ),
    ] {
        let result = ws.call("glob_search", input.clone()).await;
        assert!(result.is_error, "{input}: {}", result.output);
        assert_eq!(result.error_kind, Some(kind), "{input}: {}", result.output);
        assert!(
            result.output.starts_with(kind.prefix()),
            "{input}: {}",
            result.output
        );
        assert!(result.output.contains(needle), "{input}: {}", result.output);
    }
}

#[tokio::test]
async fn grep_search_refuses_bad_input_clearly() {
    let ws = fixture_workspace();
    for (input, kind, needle) in [
        (json!({}), ErrorKind::InputValidation, "pattern"),
        (
            json!({"pattern": ["x"]}),
            ErrorKind::InputValidation,
            "pattern",
        ),
        (
            json!({"pattern": "x", "head_limit": -1}),
            ErrorKind::InputValidation,
            "head_limit",
        ),
        (
            json!({"pattern": "x", "head_limit": "10"}),
            ErrorKind::InputValidation,
            "head_limit",
        ),
        (
            json!({"pattern": "x", "offset": -3}),
            ErrorKind::InputValidation,
            "offset",
        ),
        (
            json!({"pattern": "x", "-A": -1}),
            ErrorKind::InputValidation,
            "-A",
        ),
        (
            json!({"pattern": "x", "-C": 100_000}),
            ErrorKind::InputValidation,
            "-C",
        ),
        (
            json!({"pattern": "x", "-i": "yes"}),
            ErrorKind::InputValidation,
            "-i",
        ),
        (
            json!({"pattern": "x", "output_mode": "lines"}),
            ErrorKind::InputValidation,
            "output_mode",
        ),
        (
            json!({"pattern": "x", "context": 2}),
            ErrorKind::InputValidation,
            "context",
        ),
        (
            json!({"pattern": "foo(bar"}),
            ErrorKind::Validation,
            "invalid regex pattern \"foo(bar\"",
        ),
        (
            json!({"pattern": "a{2,1}"}),
            ErrorKind::Validation,
            "invalid regex pattern \"a{2,1}\"",
        ),
        (
            json!({"pattern": "one\\ntwo"}),
            ErrorKind::Validation,
            "set multiline to true",
        ),
        (
            json!({"pattern": "x", "type": "rustt"}),
            ErrorKind::Validation,
            "unknown file type \"rustt\"; did you mean \"rust\"",
        ),
        (
            json!({"pattern": "x", "glob": "[z"}),
            ErrorKind::Validation,
            "invalid glob \"[z\"",
        ),
        (
            json!({"pattern": "x", "path": ""}),
            ErrorKind::Validation,
            "path is empty",
        ),
        (
            json!({"pattern": "x", "path": "nope/missing.rs"}),
            ErrorKind::Validation,
            "path \"nope/missing.rs\" does not exist",
        ),
        (
            json!({"pattern": "x", "path": "../outside"}),
            ErrorKind::PermissionDenied,
            "",
        ),
        (
            json!({"pattern": "x", "path": "/etc"}),
            ErrorKind::PermissionDenied,
            "",
        ),
    ] {
        let result = ws.call("Grep", input.clone()).await;
        assert!(result.is_error, "{input}: {}", result.output);
        assert_eq!(result.error_kind, Some(kind), "{input}: {}", result.output);
        assert!(result.output.contains(needle), "{input}: {}", result.output);
    }
}

#[tokio::test]
async fn grep_search_behaviour() {
    let ws = fixture_workspace();
    let root = ws.root.display().to_string();
    for (input, expected) in [
        // A huge head_limit means no limit, never an error.
        (
            json!({"pattern": "needle at", "path": "docs", "head_limit": 1e18}),
            format!("{root}/docs/guide.txt\n"),
        ),
        (
            json!({"pattern": "needle at", "path": "docs", "output_mode": "count", "head_limit": 0}),
            format!("{root}/docs/guide.txt:3\n"),
        ),
        // A file named directly is searched and shown with its absolute path.
        (
            json!({"pattern": "42", "path": "src/lib.rs", "output_mode": "content"}),
            format!("{root}/src/lib.rs:4:    42\n"),
        ),
        (
            json!({"pattern": "eleven", "path": "docs/guide.txt", "output_mode": "content", "-n": false}),
            format!("{root}/docs/guide.txt:needle at eleven\n"),
        ),
        (
            json!({"pattern": "without newline", "output_mode": "content"}),
            format!("{root}/noeol.txt:1:last line needle without newline\n"),
        ),
        // Context only applies to content; -n only to content.
        (
            json!({"pattern": "needle at ten", "-C": 3, "-n": true}),
            format!("{root}/docs/guide.txt\n"),
        ),
        (
            json!({"pattern": "nothing matches this"}),
            "No matches found".to_owned(),
        ),
    ] {
        assert_eq!(
            ws.ok("grep_search", input.clone()).await,
            expected,
            "{input}"
        );
    }
}

#[tokio::test]
async fn large_output_is_offloaded_with_a_preview() {
    let ws = Workspace::new(PermissionLevel::WorkspaceWrite);
    let line = format!("needle {}\n", "x".repeat(200));
    ws.write("big.txt", line.repeat(400));
    let result = ws
        .call(
            "grep_search",
            json!({"pattern": "needle", "output_mode": "content", "head_limit": 0}),
        )
        .await;
    assert!(!result.is_error, "{}", result.output);
    let offloaded = result.offloaded.expect("offloaded");
    assert!(offloaded.total_chars > 80_000, "{offloaded:?}");
    assert!(result.output.len() < 20_000);
}

#[tokio::test]
async fn a_cancelled_search_says_it_is_incomplete() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(dir.path().join("a.txt"), "needle\n").unwrap();
    let session = Arc::new(SessionState::new(SessionConfig::new("s", dir.path())));
    let ctx = ToolContext::detached(session);
    ctx.cancellation.cancel();
    let output = GrepSearch::new()
        .unwrap()
        .execute(json!({"pattern": "needle"}), &ctx)
        .await
        .unwrap();
    assert!(output.text.contains("cancelled"), "{}", output.text);
    assert_eq!(output.metadata["truncated"], Value::Bool(true));
}

#[tokio::test]
async fn read_only_mode_can_search_the_workspace() {
    let ws = Workspace::new(PermissionLevel::ReadOnly);
    ws.write("a.txt", "needle\n");
    let root = ws.root.display().to_string();
    assert_eq!(
        ws.ok("Grep", json!({"pattern": "needle"})).await,
        format!("{root}/a.txt\n")
    );
    assert_eq!(
        ws.ok("Glob", json!({"pattern": "*.txt", "path": "."}))
            .await,
        format!("{root}/a.txt")
    );
}
