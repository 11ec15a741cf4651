//! A server that misbehaves is contained (issue 18, "Safety"): `misbehaving_server.py` (next
//! to this file, plain python3, no npm) lists a tool whose schema is not an object, writes a
//! line that is not JSON, answers with 50 MB and with more than the 64 MiB a message may
//! have (that call fails at once), never answers, and exits mid-call. Each gives a clear result for that call (or a
//! note on that server); the daemon keeps answering, and the other tools keep working.

use std::path::Path;
use std::time::Duration;

use serde_json::json;

use super::{call, eager, listing, ok_output, session, start, wait_for};
use crate::support::mcp_servers::ServerEntry;

fn misbehaving() -> ServerEntry {
    let script =
        Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it/mcp_bridge/misbehaving_server.py");
    eager(ServerEntry::stdio("bad", &script, &[]))
}

#[tokio::test]
async fn a_tool_whose_schema_is_not_an_object_is_left_out_and_named() {
    let toold = start("", &[misbehaving()]);
    let id = session(&toold, &["bad"]).await;
    let server = wait_for(&toold, "bad", Some(&id), Duration::from_secs(20), |s| {
        s["state"] == "ready"
    })
    .await;
    let tools: Vec<&str> = server["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t.as_str().unwrap())
        .collect();
    assert!(tools.contains(&"mcp__bad__fine"), "{server}");
    assert!(!tools.contains(&"mcp__bad__not_an_object"), "{server}");
    let error = server["last_error"].as_str().unwrap_or_default();
    assert!(error.contains("not_an_object"), "{server}");
    let result = call(&toold, &id, "mcp__bad__fine", json!({"text": "still here"})).await;
    assert_eq!(ok_output(&result), "fine: still here");
}

#[tokio::test]
async fn garbage_huge_and_oversized_answers_are_each_one_calls_business() {
    let toold = start("", &[misbehaving().set("tool_timeout_ms", 4000)]);
    let id = session(&toold, &["bad"]).await;
    // A line that is not JSON before the answer: the answer still arrives.
    let garbage = call(&toold, &id, "mcp__bad__garbage", json!({})).await;
    assert_eq!(ok_output(&garbage), "after the garbage");
    // 50 MB: read, and offloaded like any large output.
    let huge = call(&toold, &id, "mcp__bad__huge", json!({"megabytes": 50})).await;
    assert_eq!(huge["is_error"], false, "{}", &huge.to_string()[..300]);
    assert_eq!(huge["offloaded"]["total_chars"], 50 * 1024 * 1024);
    // Over 64 MiB: discarded, and the call fails at once saying why (not at its timeout).
    let over = call(&toold, &id, "mcp__bad__huge", json!({"megabytes": 70})).await;
    assert_eq!(over["error_kind"], "execution", "{over}");
    let text = over["output"].as_str().unwrap();
    assert!(text.contains("over 64 MiB"), "{text}");
    assert!(text.contains("MCP server \"bad\""), "{text}");
    // An answer that never comes: a timeout, and the server is still usable.
    let silent = call(&toold, &id, "mcp__bad__no_answer", json!({})).await;
    assert_eq!(silent["error_kind"], "timeout", "{silent}");
    let after = call(&toold, &id, "mcp__bad__fine", json!({"text": "after"})).await;
    assert_eq!(ok_output(&after), "fine: after");
}

#[tokio::test]
async fn a_server_that_exits_mid_call_fails_that_call_and_is_restarted() {
    let toold = start("", &[misbehaving()]);
    let id = session(&toold, &["bad"]).await;
    let died = call(&toold, &id, "mcp__bad__die", json!({})).await;
    assert_eq!(died["is_error"], true, "{died}");
    assert_eq!(died["error_kind"], "execution", "{died}");
    assert!(
        died["output"]
            .as_str()
            .unwrap()
            .contains("MCP server \"bad\""),
        "{died}"
    );
    // The next call waits for the restart rather than failing on the dead connection.
    let next = call(&toold, &id, "mcp__bad__fine", json!({"text": "again"})).await;
    assert_eq!(ok_output(&next), "fine: again");
    let servers = listing(&toold).await;
    let bad = servers.iter().find(|s| s["name"] == "bad").unwrap();
    // (Its last error is now the listing's note on the tool it leaves out, which is newer
    // than the exit.)
    assert!(bad["restarts"].as_u64().unwrap() >= 1, "{bad}");
}
