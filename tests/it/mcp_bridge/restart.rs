//! A stdio server killed mid-call (`kill -9` on the pid `GET /v1/mcp/servers` shows): the call
//! in flight is answered with an error naming the server, the server is restarted (a new
//! pid, `restarts` counted), and the next call works.

use std::time::Duration;

use serde_json::json;

use super::{call, eager, ok_output, ready_pid, servers, session, start, wait_for};

#[tokio::test]
async fn a_killed_server_is_restarted_and_its_in_flight_call_names_it() {
    let Some(servers) = servers("a killed bridged server restarted") else {
        return;
    };
    let toold = start("", &[eager(servers.everything("every"))]);
    let id = session(&toold, &["every"]).await;
    let pid = ready_pid(&toold, "every", Some(&id)).await;
    let in_flight = call(
        &toold,
        &id,
        "mcp__every__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
    );
    let kill = async {
        // The call is running once the server has reported its first step.
        tokio::time::sleep(Duration::from_millis(1_500)).await;
        // SAFETY: kill(2) on the pid of the server the daemon started; no memory is involved.
        assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGKILL) }, 0);
    };
    let (result, ()) = tokio::join!(in_flight, kill);
    assert_eq!(result["is_error"], true, "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("MCP server \"every\""),
        "the error names the server: {result}"
    );
    let restarted = wait_for(
        &toold,
        "every",
        Some(&id),
        Duration::from_secs(30),
        |server| server["state"] == "ready" && server["restarts"].as_u64() >= Some(1),
    )
    .await;
    assert_ne!(restarted["pid"], json!(pid), "{restarted}");
    let next = call(&toold, &id, "mcp__every__echo", json!({"message": "again"})).await;
    assert_eq!(ok_output(&next), "Echo: again");
}
