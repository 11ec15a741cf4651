//! Clients of the revisions before 2025-06-18 (no `resource_link` content) read an offloaded
//! output as text: the TypeScript SDK 1.11 and the Python SDK 1.9.4, the real packages pinned
//! and installed by `.ci/run` (`.ci/mcp_clients.sh`), each running a small script from
//! `clients/` against a real daemon's `/mcp`. Each would throw on a `resource_link` block.
//!
//! Without the variables `.ci/mcp_clients.sh` exports the tests are skipped locally and fail
//! in CI (`CI=true`), as the bridge tests do.

use std::path::{Path, PathBuf};
use std::time::Duration;

use serde_json::Value;

use crate::http::harness::Toold;

/// The value of `var`, set by `.ci/mcp_clients.sh`: `None` (skipped) outside CI without it.
pub(super) fn installed(var: &str, what: &str) -> Option<PathBuf> {
    match std::env::var_os(var).filter(|value| !value.is_empty()) {
        Some(value) => Some(PathBuf::from(value)),
        None if std::env::var("CI").is_ok_and(|ci| ci == "true") => {
            panic!("{var} is not set; run .ci/run (.ci/mcp_clients.sh installs it) for {what}")
        }
        None => {
            eprintln!("skipped: {var} not set ({what})");
            None
        }
    }
}

/// A script of `clients/`, by file name.
pub(super) fn script(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/mcp/clients")
        .join(name)
}

/// Runs `program args`, at most two minutes, and parses the JSON line it printed last.
pub(super) async fn run_client(program: &Path, args: &[&str]) -> Value {
    let run = tokio::process::Command::new(program)
        .args(args)
        .kill_on_drop(true)
        .output();
    let output = tokio::time::timeout(Duration::from_secs(120), run)
        .await
        .unwrap_or_else(|_| panic!("{} did not finish in 2 minutes", program.display()))
        .expect("the client started");
    let stdout = String::from_utf8_lossy(&output.stdout);
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        output.status.success(),
        "{} {args:?} failed ({}):\n{stdout}\n{stderr}",
        program.display(),
        output.status
    );
    let line = stdout.lines().last().unwrap_or_default();
    serde_json::from_str(line).unwrap_or_else(|err| panic!("{err}: {stdout}\n{stderr}"))
}

/// 400 000 lines: far past the offload threshold.
const LARGE: &str = r#"{"command": "seq 1 400000"}"#;

/// What either SDK saw: text blocks only, the preview pointing at `read_result` and the
/// resource, and the resource read back from its start.
fn assert_read_as_text(seen: &Value) {
    let types: Vec<&str> = seen["types"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert_eq!(types, ["text", "text"], "{seen}");
    let preview = seen["texts"][0].as_str().unwrap();
    assert!(preview.starts_with("1\n2\n3\n"), "{seen}");
    assert!(preview.contains("read_result"), "{seen}");
    assert!(
        seen["texts"][1]
            .as_str()
            .unwrap()
            .contains("toold://results/"),
        "{seen}"
    );
    assert_eq!(seen["read"], "1\n2\n3\n4\n5\n6\n", "{seen}");
}

#[tokio::test]
async fn the_typescript_sdk_1_11_reads_an_offloaded_output_as_text() {
    let Some(prefix) = installed("TOOLD_TEST_MCP_TS_SDK_OLD", "the TypeScript SDK 1.11 test")
    else {
        return;
    };
    let Some(node) = installed("TOOLD_TEST_NODE", "the TypeScript SDK 1.11 test") else {
        return;
    };
    let toold = Toold::start();
    let url = format!("{}/mcp", toold.base);
    let seen = run_client(
        &node,
        &[
            script("old_ts_sdk.cjs").to_str().unwrap(),
            prefix.to_str().unwrap(),
            &url,
            toold.token.as_deref().unwrap_or(""),
            "bash",
            LARGE,
        ],
    )
    .await;
    assert_eq!(seen["sdk"], "1.11.0", "{seen}");
    assert_read_as_text(&seen);
}

#[tokio::test]
async fn the_python_sdk_1_9_4_reads_an_offloaded_output_as_text() {
    let Some(python) = installed("TOOLD_TEST_MCP_PY_OLD", "the Python SDK 1.9.4 test") else {
        return;
    };
    let toold = Toold::start();
    let url = format!("{}/mcp", toold.base);
    let seen = run_client(
        &python,
        &[
            script("old_py_sdk.py").to_str().unwrap(),
            &url,
            toold.token.as_deref().unwrap_or(""),
            "bash",
            LARGE,
        ],
    )
    .await;
    assert_eq!(seen["sdk"], "1.9.4", "{seen}");
    assert_eq!(seen["protocol"], "2025-03-26", "{seen}");
    assert_read_as_text(&seen);
}
