//! No process left behind, read from `/proc`: each stdio server runs in a process group of
//! its own; closing the session (idle or with a call in flight) ends its servers' groups and
//! leaves the daemon without a child, zombies included; stopping the daemon (SIGTERM) ends
//! every server it started, daemon-scoped and session-scoped.

use std::time::Duration;

use serde_json::json;

use super::{call, eager, ready_pid, servers, session, start};
use crate::http::harness::Toold;
use crate::support::mcp_servers::{descendants, in_group, processes, wait_until_gone};

/// SIGTERM, then SIGKILL 2 s later, then reaped: 5 s is ample.
const GONE_WITHIN: Duration = Duration::from_secs(5);

/// Checks `pid` is a child of the daemon leading its own process group; returns it.
fn own_group_under(toold: &Toold, pid: u32) -> u32 {
    let all = processes();
    let server = all
        .iter()
        .find(|proc| proc.pid == pid)
        .unwrap_or_else(|| panic!("server pid {pid} is not in /proc"));
    assert_eq!(
        server.group, pid,
        "a server leads its own process group: {server:?}"
    );
    assert!(
        descendants(toold.pid()).iter().any(|proc| proc.pid == pid),
        "server {pid} is not the daemon's descendant"
    );
    pid
}

async fn session_with_servers(toold: &Toold) -> (String, Vec<u32>) {
    let id = session(toold, &["fs", "every"]).await;
    let mut groups = Vec::new();
    for name in ["fs", "every"] {
        groups.push(own_group_under(
            toold,
            ready_pid(toold, name, Some(&id)).await,
        ));
    }
    (id, groups)
}

async fn assert_all_gone(toold: &Toold, groups: &[u32]) {
    for &group in groups {
        wait_until_gone("the server's process group", GONE_WITHIN, || {
            in_group(group)
        })
        .await;
    }
    let daemon = toold.pid();
    wait_until_gone("the daemon's children", GONE_WITHIN, || descendants(daemon)).await;
}

#[tokio::test]
async fn closing_a_session_leaves_none_of_its_server_processes() {
    let Some(servers) = servers("no process left after a session closes") else {
        return;
    };
    let toold = start(
        "",
        &[
            eager(servers.filesystem("fs", ".")),
            eager(servers.everything("every")),
        ],
    );
    let (id, groups) = session_with_servers(&toold).await;
    let closed = toold.delete(&format!("/v1/sessions/{id}")).await;
    assert!(closed.status.is_success(), "{}", closed.body);
    assert_all_gone(&toold, &groups).await;
    let listed = super::listing(&toold).await;
    assert!(
        listed
            .iter()
            .all(|server| server["session_id"] != id.as_str()),
        "a closed session's servers are no longer listed: {listed:?}"
    );
}

#[tokio::test]
async fn closing_a_session_with_a_bridged_call_in_flight_cancels_it_and_ends_the_servers() {
    let Some(servers) = servers("a session closed mid-call") else {
        return;
    };
    let toold = start(
        "",
        &[
            eager(servers.filesystem("fs", ".")),
            eager(servers.everything("every")),
        ],
    );
    let (id, groups) = session_with_servers(&toold).await;
    let in_flight = call(
        &toold,
        &id,
        "mcp__every__trigger-long-running-operation",
        json!({"duration": 30, "steps": 30}),
    );
    let close = async {
        tokio::time::sleep(Duration::from_millis(1_000)).await;
        toold.delete(&format!("/v1/sessions/{id}")).await
    };
    let (result, closed) = tokio::time::timeout(Duration::from_secs(15), async {
        tokio::join!(in_flight, close)
    })
    .await
    .expect("closing the session ends its running call");
    assert!(closed.status.is_success(), "{}", closed.body);
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["error_kind"], "cancelled", "{result}");
    assert_all_gone(&toold, &groups).await;
}

#[tokio::test]
async fn stopping_the_daemon_leaves_no_server_process() {
    let Some(servers) = servers("no process left after the daemon stops") else {
        return;
    };
    let toold = start(
        "",
        &[
            eager(servers.filesystem("fs", ".")),
            eager(servers.everything("every")),
            eager(servers.everything("shared")).set("scope", "daemon"),
        ],
    );
    let (_id, mut groups) = session_with_servers(&toold).await;
    groups.push(own_group_under(
        &toold,
        ready_pid(&toold, "shared", None).await,
    ));
    let status = toold.terminate();
    assert!(
        status.success(),
        "SIGTERM ends the daemon cleanly: {status}"
    );
    for &group in &groups {
        wait_until_gone("a server's process group", GONE_WITHIN, || in_group(group)).await;
    }
}
