//! The README's examples, run as written: editing one without fixing it fails here.
//!
//! The `sh` blocks under "### A session with curl" are one script, run by `bash -euo pipefail`
//! against a fresh daemon with `TOOLD_URL` set to its address (the script's first line reads
//! it); it must exit 0, print no error body and print what the README says each step shows.
//! Every `toold call TOOL 'INPUT'` line anywhere in the README is sent to a daemon as written
//! and must reach its tool (no `unknown_tool`, no `input_validation`).

use std::process::Command;
use std::sync::Arc;

use serde_json::Value;

use crate::http::harness::Toold;
use crate::support::deadline::{STEP, output_within};
use crate::support::{skip_unless_ci, tool_on_path};

const README: &str = include_str!(concat!(env!("CARGO_MANIFEST_DIR"), "/README.md"));
const WALKTHROUGH: &str = "### A session with curl";

/// The bodies of the ```` ```sh ```` blocks in the section under `heading` (up to the next
/// heading outside a code block), in order.
fn shell_blocks(markdown: &str, heading: &str) -> Vec<String> {
    let mut blocks = Vec::new();
    let mut in_section = false;
    let mut block: Option<String> = None;
    let mut in_other_fence = false;
    for line in markdown.lines() {
        if let Some(body) = block.as_mut() {
            if line.trim_end() == "```" {
                blocks.push(block.take().unwrap_or_default());
            } else {
                body.push_str(line);
                body.push('\n');
            }
            continue;
        }
        if line.starts_with("```") {
            if in_section && line.trim_end() == "```sh" && !in_other_fence {
                block = Some(String::new());
            } else {
                in_other_fence = !in_other_fence;
            }
            continue;
        }
        if !in_other_fence && line.starts_with('#') {
            in_section = line.trim_end() == heading;
        }
    }
    blocks
}

/// `(tool, input)` of every `toold call TOOL 'INPUT'` in `markdown`.
fn cli_calls(markdown: &str) -> Vec<(String, String)> {
    let call = regex::Regex::new(r"toold call ([A-Za-z0-9_-]+) '([^']*)'").unwrap();
    call.captures_iter(markdown)
        .map(|captures| (captures[1].to_owned(), captures[2].to_owned()))
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn the_curl_walkthrough_runs_as_written() {
    for tool in ["bash", "curl", "jq"] {
        if tool_on_path(tool).is_none() {
            return skip_unless_ci(&format!("{tool} is not installed (the README walkthrough)"));
        }
    }
    let script = shell_blocks(README, WALKTHROUGH).join("\n");
    assert!(
        script.contains("curl"),
        "no ```sh blocks under {WALKTHROUGH:?} in README.md"
    );
    let toold = Toold::start();
    let base = toold.base.clone();
    let output = tokio::task::spawn_blocking(move || {
        let mut command = Command::new("bash");
        command
            .args(["-euo", "pipefail", "-c", &script])
            .env("TOOLD_URL", base);
        output_within(&mut command, STEP, "the README walkthrough").expect("bash starts")
    })
    .await
    .unwrap();
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "the README walkthrough failed ({}):\nstdout:\n{stdout}\nstderr:\n{stderr}",
        output.status
    );
    assert!(
        !stdout.contains("\"error\""),
        "a request of the walkthrough was refused:\n{stdout}"
    );
    // What each step shows: the tool names, the Anthropic answer, the stream's frames, the
    // events, the offloaded output read back, the audit rows, the closed session.
    let expected = [
        "\"bash\"",
        "\"write_file\"",
        "\"role\": \"user\"",
        "\"tool_use_id\": \"t2\"",
        "event: result",
        "event: done",
        "event: session:start",
        "event: tool:post",
        "\"1\\n2\\n3\\n4\\n5\\n6",
        "{\"call_id\":\"t1\",\"tool\":\"write_file\",\"is_error\":false}",
        "{\"call_id\":\"c1\",\"tool\":\"read_file\",\"is_error\":false}",
    ];
    let missing: Vec<_> = expected
        .iter()
        .filter(|fragment| !stdout.contains(*fragment))
        .collect();
    assert!(
        missing.is_empty(),
        "the walkthrough did not print {missing:?}:\n{stdout}"
    );
    assert_eq!(stdout.lines().last(), Some("true"), "the session is closed");
}

#[tokio::test]
async fn every_cli_call_in_the_readme_reaches_its_tool() {
    let calls = cli_calls(README);
    assert!(!calls.is_empty(), "no `toold call` examples found");
    let toold = Toold::start_with(Arc::new(tempfile::tempdir().unwrap()), &[]);
    let session = toold.session().await;
    std::fs::write(toold.workspace(&session).await.join("a.txt"), "a\n").unwrap();
    for (tool, input) in calls {
        let parsed: Value = serde_json::from_str(&input)
            .unwrap_or_else(|err| panic!("README: toold call {tool} '{input}' is not JSON: {err}"));
        let result = toold.call_one(&session, &tool, parsed).await;
        let kind = result["error_kind"].as_str().unwrap_or("");
        assert!(
            !matches!(kind, "unknown_tool" | "input_validation"),
            "README: toold call {tool} '{input}' does not fit the tool: {result}"
        );
    }
}

#[test]
fn shell_blocks_are_the_sections_sh_blocks_only() {
    let markdown = "## A\n```sh\nno\n```\n### B\ntext\n```sh\none\n# a comment\n```\n\
                    ```toml\n# [not a heading]\n```\n```sh\ntwo\n```\n## C\n```sh\nno\n```\n";
    assert_eq!(
        shell_blocks(markdown, "### B"),
        ["one\n# a comment\n", "two\n"]
    );
}
