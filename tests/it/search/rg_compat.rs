//! `grep_search` against the real `rg` binary on the fixture tree: for each option
//! combination, the tool's output must equal `rg --sort path --no-heading --with-filename`
//! run with the equivalent flags from the workspace (paged the same way when the case pages).

use serde_json::{Value, json};
use toold::permission::PermissionLevel;

use crate::search::fixture;
use crate::search::harness::{Workspace, ripgrep, run_rg};

/// The tool's default `head_limit`.
const DEFAULT_HEAD_LIMIT: usize = 250;

struct Case {
    name: &'static str,
    input: Value,
    /// rg flags equivalent to `input` (pattern and path are added from `input`).
    flags: &'static [&'static str],
    /// `(offset, head_limit)` when the case pages through the output.
    page: Option<(usize, usize)>,
}

fn case(name: &'static str, input: Value, flags: &'static [&'static str]) -> Case {
    Case {
        name,
        input,
        flags,
        page: None,
    }
}

fn paged(
    name: &'static str,
    input: Value,
    flags: &'static [&'static str],
    page: (usize, usize),
) -> Case {
    Case {
        name,
        input,
        flags,
        page: Some(page),
    }
}

fn cases() -> Vec<Case> {
    let content = |pattern: &str| json!({"pattern": pattern, "output_mode": "content"});
    let with = |mut base: Value, extra: Value| {
        for (key, value) in extra.as_object().unwrap() {
            base[key] = value.clone();
        }
        base
    };
    vec![
        case(
            "files, default",
            json!({"pattern": "needle"}),
            &["--files-with-matches"],
        ),
        case(
            "files, -i",
            json!({"pattern": "needle", "-i": true}),
            &["-l", "-i"],
        ),
        case("content, -n", content("needle"), &["-n"]),
        case(
            "content, no line numbers",
            with(content("needle"), json!({"-n": false})),
            &["--no-line-number"],
        ),
        case(
            "content, -C 2",
            with(content("needle"), json!({"-C": 2})),
            &["-n", "-C", "2"],
        ),
        case(
            "content, -A 1 -B 3",
            with(content("needle"), json!({"-A": 1, "-B": 3})),
            &["-n", "-A", "1", "-B", "3"],
        ),
        // -A/-B take precedence over -C whatever their order (rg 14). rg 13's -C and -A
        // override each other by position instead, so the equivalent flags are spelled out.
        case(
            "content, -C 1 -A 0",
            with(content("needle"), json!({"-C": 1, "-A": 0})),
            &["-n", "-B", "1", "-A", "0"],
        ),
        case(
            "content, -B 2 without numbers",
            with(content("needle at"), json!({"-B": 2, "-n": false})),
            &["--no-line-number", "-B", "2"],
        ),
        case(
            "glob *.rs",
            with(content("needle"), json!({"glob": "*.rs"})),
            &["-n", "--glob", "*.rs"],
        ),
        case(
            "glob with braces and a negation",
            json!({"pattern": "needle", "glob": "*.{md,txt} !docs/**"}),
            &["-l", "--glob", "*.{md,txt}", "--glob", "!docs/**"],
        ),
        case(
            "globs split on commas",
            json!({"pattern": "needle", "glob": "*.ts,*.js", "-i": true}),
            &["-l", "-i", "--glob", "*.ts", "--glob", "*.js"],
        ),
        case(
            "glob whitelists a hidden file",
            json!({"pattern": "needle", "glob": "*.txt"}),
            &["-l", "--glob", "*.txt"],
        ),
        case(
            "glob with a slash",
            json!({"pattern": "needle", "glob": "src/**/*.rs"}),
            &["-l", "--glob", "src/**/*.rs"],
        ),
        case(
            "type rust",
            with(content("needle"), json!({"type": "rust"})),
            &["-n", "--type", "rust"],
        ),
        case(
            "type py, count",
            json!({"pattern": "needle", "type": "py", "output_mode": "count"}),
            &["--count", "--type", "py"],
        ),
        case(
            "type md, -C 1",
            with(content("needle"), json!({"type": "md", "-C": 1})),
            &["-n", "--type", "md", "-C", "1"],
        ),
        case(
            "count",
            json!({"pattern": "needle", "output_mode": "count"}),
            &["--count"],
        ),
        case(
            "count, -i",
            json!({"pattern": "needle", "output_mode": "count", "-i": true}),
            &["--count", "-i"],
        ),
        case(
            "multiline content",
            with(
                content("struct Needle \\{.*?\\}"),
                json!({"multiline": true}),
            ),
            &["-n", "-U", "--multiline-dotall"],
        ),
        case(
            "multiline count",
            json!({"pattern": "needle\\s+needle", "output_mode": "count", "multiline": true}),
            &["--count", "-U", "--multiline-dotall"],
        ),
        case(
            "multiline files",
            json!({"pattern": "fn main\\(\\) \\{.*?needle", "multiline": true}),
            &["-l", "-U", "--multiline-dotall"],
        ),
        case(
            "multiline with context",
            with(
                content("needle at ten.needle"),
                json!({"multiline": true, "-C": 1}),
            ),
            &["-n", "-U", "--multiline-dotall", "-C", "1"],
        ),
        paged(
            "head_limit 3",
            with(content("needle"), json!({"head_limit": 3})),
            &["-n"],
            (0, 3),
        ),
        paged(
            "offset 2, head_limit 3",
            json!({"pattern": "needle", "offset": 2, "head_limit": 3}),
            &["-l"],
            (2, 3),
        ),
        paged(
            "offset 4, -C 1",
            with(content("needle"), json!({"offset": 4, "-C": 1})),
            &["-n", "-C", "1"],
            (4, DEFAULT_HEAD_LIMIT),
        ),
        paged(
            "count, head_limit 2",
            json!({"pattern": "needle", "output_mode": "count", "head_limit": 2}),
            &["--count"],
            (0, 2),
        ),
        case(
            "word boundary and classes",
            content("\\bneedle\\b\\s+\\w+"),
            &["-n"],
        ),
        case(
            "posix class with repetition",
            content("[[:upper:]]{6}"),
            &["-n"],
        ),
        case(
            "unicode class, -i",
            with(content("\\p{Greek}+"), json!({"-i": true})),
            &["-n", "-i"],
        ),
        case(
            "unicode case folding",
            with(content("café"), json!({"-i": true})),
            &["-n", "-i"],
        ),
        case("line anchors on CRLF", content("(?i)needle\\r?$"), &["-n"]),
        case(
            "sub-directory path",
            with(content("needle"), json!({"path": "src"})),
            &["-n"],
        ),
        case(
            "sub-directory path, parent's anchored ignore rule",
            with(content("needle"), json!({"path": "src/nested"})),
            &["-n"],
        ),
        case(
            "sub-directory path, glob with a slash",
            json!({"pattern": "needle", "path": "src", "glob": "src/nested/**"}),
            &["-l", "--glob", "src/nested/**"],
        ),
        case(
            "explicit binary file, content",
            with(content("needle"), json!({"path": "bin.dat"})),
            &["-n"],
        ),
        case(
            "explicit binary file, count",
            json!({"pattern": "needle", "path": "bin.dat", "output_mode": "count"}),
            &["--count"],
        ),
        case(
            "explicit ignored file",
            with(content("needle"), json!({"path": "ignored/skip.txt"})),
            &["-n"],
        ),
        case(
            "explicit CRLF file, -i",
            with(content("needle"), json!({"path": "crlf.txt", "-i": true})),
            &["-n", "-i"],
        ),
        case("no match", json!({"pattern": "zzzz_not_here"}), &["-l"]),
    ]
}

/// What the tool shows for rg's `stdout` paged at `offset`/`limit`.
fn expected(stdout: &str, page: Option<(usize, usize)>) -> String {
    if stdout.is_empty() {
        return "No matches found".into();
    }
    let lines: Vec<&str> = stdout.split_terminator('\n').collect();
    let Some((offset, limit)) = page else {
        assert!(
            lines.len() <= DEFAULT_HEAD_LIMIT,
            "an unpaged case must fit the default limit"
        );
        return stdout.to_owned();
    };
    let end = (offset + limit).min(lines.len());
    let mut text: String = lines[offset..end]
        .iter()
        .map(|line| format!("{line}\n"))
        .collect();
    if end < lines.len() {
        text.push_str(&format!(
            "\n[Showing lines {}-{end} of {}; pass offset {end} to see more]",
            offset + 1,
            lines.len()
        ));
    }
    text
}

#[tokio::test]
async fn grep_search_output_equals_ripgrep() {
    let Some(rg) = ripgrep() else { return };
    let ws = Workspace::new(PermissionLevel::WorkspaceWrite);
    fixture::build(&ws);
    let cases = cases();
    assert!(cases.len() >= 12);
    let mut failures = Vec::new();
    for case in &cases {
        let target = match case.input.get("path").and_then(Value::as_str) {
            Some(path) => ws.root.join(path),
            None => ws.root.clone(),
        };
        let mut args: Vec<String> = [
            "--sort",
            "path",
            "--no-heading",
            "--with-filename",
            "--color",
            "never",
        ]
        .iter()
        .chain(case.flags)
        .map(|arg| arg.to_string())
        .collect();
        args.extend([
            "-e".to_owned(),
            case.input["pattern"].as_str().unwrap().to_owned(),
            "--".to_owned(),
            target.to_string_lossy().into_owned(),
        ]);
        let want = expected(&run_rg(&rg, &ws.root, &args), case.page);
        let got = ws.ok("grep_search", case.input.clone()).await;
        if got != want {
            failures.push(format!(
                "case \"{}\" ({})\n  rg {}\n--- rg ---\n{want}\n--- grep_search ---\n{got}\n",
                case.name,
                case.input,
                args.join(" ")
            ));
        }
    }
    assert!(
        failures.is_empty(),
        "{} of {} cases differ:\n{}",
        failures.len(),
        cases.len(),
        failures.join("\n")
    );
}

#[tokio::test]
async fn the_fixture_exercises_what_it_claims() {
    // Guards against a fixture that hides differences: the default search must see the
    // regular files and skip the ignored, hidden, binary and linked ones.
    let ws = Workspace::new(PermissionLevel::WorkspaceWrite);
    fixture::build(&ws);
    let files = ws
        .ok("grep_search", json!({"pattern": "needle", "-i": true}))
        .await;
    let root = ws.root.display().to_string();
    for present in [
        "crlf.txt",
        "unicode.md",
        "noeol.txt",
        "src/nested/deep/mod.rs",
        "web/app.ts",
        "late_binary.dat",
    ] {
        assert!(
            files.contains(&format!("{root}/{present}\n")),
            "{present} missing:\n{files}"
        );
    }
    for absent in [
        ".hidden.txt",
        ".config",
        "ignored/",
        "build.log",
        "rgignored.txt",
        "skipped.rs",
        "bin.dat",
        "link.rs",
        ".git/",
    ] {
        assert!(!files.contains(absent), "{absent} listed:\n{files}");
    }
}
