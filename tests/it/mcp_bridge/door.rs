//! toold's own MCP door mounted through the bridge: daemon A serves its tools on `/mcp`
//! (its `[mcp]` sessions in A's projects directory); daemon B has `[[mcp_servers]]` with
//! `url = A's /mcp`, and a session of B calls A's `write_file` and `read_file` as
//! `mcp__a__write_file` / `mcp__a__read_file`: the file lands in A's directory, and the
//! calls are in A's audit log as well as B's.

use std::sync::Arc;

use serde_json::{Value, json};

use super::{audit_rows, call, eager, ok_output, session, start};
use crate::http::harness::Toold;
use crate::support::mcp_servers::ServerEntry;

#[tokio::test]
async fn one_daemon_s_tools_are_called_from_another_s_session() {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let projects = dir.path().join("projects");
    std::fs::create_dir_all(&projects).unwrap();
    let projects = projects.canonicalize().unwrap();
    let file = dir.path().join("toold.toml");
    std::fs::write(
        &file,
        format!(
            "[mcp]\nworking_directory = {}\n",
            Value::from(projects.display().to_string())
        ),
    )
    .unwrap();
    let a = Toold::start_with(dir.clone(), &["--config", file.to_str().unwrap()]);
    let b = start(
        "",
        &[eager(ServerEntry::http("a", &format!("{}/mcp", a.base)))],
    );
    let id = session(&b, &["a"]).await;
    let written = call(
        &b,
        &id,
        "mcp__a__write_file",
        json!({"file_path": "from_b.txt", "content": "written by B\n"}),
    )
    .await;
    ok_output(&written);
    assert_eq!(
        std::fs::read_to_string(projects.join("from_b.txt")).unwrap(),
        "written by B\n"
    );
    let read = call(
        &b,
        &id,
        "mcp__a__read_file",
        json!({"file_path": "from_b.txt"}),
    )
    .await;
    assert!(ok_output(&read).contains("written by B"), "{read}");

    let b_tools: Vec<Value> = audit_rows(&b, &id)
        .await
        .iter()
        .map(|row| row["tool"].clone())
        .collect();
    assert_eq!(
        b_tools,
        [json!("mcp__a__write_file"), json!("mcp__a__read_file")]
    );
    let a_sessions = a.get("/v1/sessions").await;
    let mut a_tools = Vec::new();
    for session in a_sessions.body["sessions"].as_array().unwrap() {
        let rows = audit_rows(&a, session["id"].as_str().unwrap()).await;
        a_tools.extend(rows.iter().map(|row| row["tool"].clone()));
    }
    assert_eq!(
        a_tools,
        [json!("write_file"), json!("read_file")],
        "{}",
        a_sessions.body
    );
}
