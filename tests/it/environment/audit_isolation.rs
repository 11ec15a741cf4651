//! The tier on every audit row (DESIGN §12): an environment session's rows, bash's and the
//! file tools' alike, say its tier; a plain session's bash row says the sandbox its command
//! ran in, and its file tools' rows say none (they run in the daemon).

use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;

/// The session's audit rows, oldest first.
async fn rows(toold: &Toold, session: &str) -> Vec<Value> {
    let log = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    log.body["calls"].as_array().cloned().unwrap_or_default()
}

fn row<'a>(rows: &'a [Value], tool: &str) -> &'a Value {
    rows.iter()
        .find(|row| row["tool"] == tool)
        .unwrap_or_else(|| panic!("no {tool} row in {rows:?}"))
}

#[tokio::test]
async fn every_audit_row_of_an_environment_session_says_its_tier() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");
    let id = toold
        .session_with(&json!({"environment": {"image": image}}))
        .await;
    let bash = toold
        .call_one(&id, "bash", json!({"command": "echo hi > note.txt"}))
        .await;
    assert_eq!(bash["is_error"], false, "{bash}");
    let read = toold
        .call_one(&id, "read_file", json!({"file_path": "note.txt"}))
        .await;
    assert_eq!(read["is_error"], false, "{read}");

    let rows = rows(&toold, &id).await;
    assert_eq!(rows.len(), 2, "{rows:?}");
    assert_eq!(row(&rows, "bash")["isolation"], "bwrap", "{rows:?}");
    assert_eq!(row(&rows, "read_file")["isolation"], "bwrap", "{rows:?}");

    // A plain session beside it: bash's row names the sandbox the command reported, the
    // file tool's row none.
    let plain = toold.session().await;
    let bash = toold
        .call_one(&plain, "bash", json!({"command": "echo hi > note.txt"}))
        .await;
    let sandbox = bash["metadata"]["sandbox"].clone();
    assert!(sandbox.is_string(), "{bash}");
    toold
        .call_one(&plain, "read_file", json!({"file_path": "note.txt"}))
        .await;
    let rows = self::rows(&toold, &plain).await;
    assert_eq!(row(&rows, "bash")["isolation"], sandbox, "{rows:?}");
    assert_eq!(
        row(&rows, "read_file")["isolation"],
        Value::Null,
        "{rows:?}"
    );
    // And the export across sessions carries it as its last CSV column.
    let (status, csv) = toold
        .get_text(&format!("/v1/calls/export?format=csv&session={id}"))
        .await;
    assert_eq!(status.as_u16(), 200, "{csv}");
    let mut lines = csv.lines();
    assert!(lines.next().unwrap().ends_with(",isolation"), "{csv}");
    assert!(lines.all(|line| line.ends_with(",bwrap")), "{csv}");
}
