//! The official Python MCP SDK (2.x), given only toold's `/mcp` URL and a client id and secret
//! registered at the provider: its `ClientCredentialsOAuthProvider` meets the 401, reads
//! toold's protected-resource metadata, then the provider's, and fetches the token itself;
//! both connect modes list and call tools (`sdk_client.py`). The audit rows of those calls name
//! the principal of the token (the provider's `sub` for the client, issuer-qualified, with the
//! role its `roles` claim maps to).

use std::path::PathBuf;
use std::process::Command;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::Value;

use super::{principal_of, setup};
use crate::support::deadline::output_within;

/// The SDK's venv Python (`.ci/run`: `$TARGET/mcp-venv`, mcp 2.3.0), or `None` (skipped).
fn sdk_python() -> Option<PathBuf> {
    match std::env::var_os("TOOLD_TEST_MCP_PY") {
        Some(path) => Some(PathBuf::from(path)),
        None => {
            crate::support::skip_unless_ci("TOOLD_TEST_MCP_PY is not set (the MCP SDK's venv)");
            None
        }
    }
}

#[tokio::test]
async fn the_python_sdk_discovers_the_provider_gets_a_token_and_calls_tools() {
    let Some(python) = sdk_python() else { return };
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let script = concat!(env!("CARGO_MANIFEST_DIR"), "/tests/it/oidc/sdk_client.py");
    let word = format!("word{}", std::process::id());
    let mut command = Command::new(python);
    command.args([
        script,
        &setup.mcp_url,
        "mcp-sdk",
        "secret-of-mcp-sdk",
        &provider.issuer,
        &word,
    ]);
    let output = output_within(&mut command, Duration::from_secs(120), "the Python MCP SDK")
        .expect("the SDK's Python runs");
    let stdout = String::from_utf8_lossy(&output.stdout);
    assert!(
        output.status.success(),
        "the SDK failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&output.stderr)
    );
    let runs: Vec<Value> = stdout
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(runs.len(), 2, "{stdout}");
    for run in &runs {
        let tools: Vec<&str> = run["tools"]
            .as_array()
            .unwrap()
            .iter()
            .filter_map(Value::as_str)
            .collect();
        assert!(
            tools.contains(&"bash") && tools.contains(&"read_file"),
            "{run}"
        );
        assert!(run["echo"].as_str().unwrap().contains(&word), "{run}");
    }

    // The calls ran as the token's principal: an agent (its roles claim), so its sessions
    // are its own; the static admin reads their audit rows.
    let principal = principal_of(provider, "mcp-sdk");
    // The sessions the SDK's calls ran in (the legacy one is closed by now): from the store,
    // their audit rows then through the API.
    let store = rusqlite::Connection::open(toold.dir.path().join("data/toold.db")).unwrap();
    let mut statement = store.prepare("SELECT id FROM sessions").unwrap();
    let sessions: Vec<String> = statement
        .query_map([], |row| row.get(0))
        .unwrap()
        .map(Result::unwrap)
        .collect();
    let mut rows = Vec::new();
    for session in &sessions {
        let audit = toold.get(&format!("/v1/calls?session={session}")).await;
        assert_eq!(audit.status, StatusCode::OK, "{}", audit.body);
        rows.extend(audit.body["calls"].as_array().unwrap().clone());
    }
    let bash_rows: Vec<&Value> = rows.iter().filter(|row| row["tool"] == "bash").collect();
    assert_eq!(bash_rows.len(), 2, "{rows:?}");
    for row in bash_rows {
        assert_eq!(row["principal"], principal.as_str(), "{row}");
    }
}
