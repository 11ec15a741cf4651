//! The support the bridge tests stand on, checked without the bridge: server-everything over
//! Streamable HTTP answers `initialize` and lists the tools the tests call; server-filesystem
//! over stdio (the entry the settings writer names) lists `read_text_file`; and the `/proc`
//! helpers see a process tree and its process group, and see it gone once killed.

use std::io::{BufReader, Write};
use std::os::unix::process::CommandExt;
use std::process::{Command, Stdio};
use std::time::Duration;

use serde_json::{Value, json};

use super::servers;
use crate::support::deadline::{LineReader, STEP};
use crate::support::mcp_servers::{
    descendants, in_group, parse_settings, settings, wait_until_gone,
};

const INITIALIZE: &str = r#"{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-11-25","capabilities":{},"clientInfo":{"name":"toold-tests","version":"1"}}}"#;

/// The JSON-RPC message of a Streamable HTTP answer (JSON, or the SSE event holding it; a
/// priming event has empty data).
fn message(body: &str) -> Value {
    serde_json::from_str(body).unwrap_or_else(|_| {
        let data = body
            .lines()
            .filter_map(|line| line.strip_prefix("data:"))
            .find(|data| !data.trim().is_empty())
            .unwrap_or_else(|| panic!("no message in {body:?}"));
        serde_json::from_str(data.trim()).unwrap()
    })
}

fn names(tools_list: &Value) -> Vec<String> {
    tools_list["result"]["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("{tools_list}"))
        .iter()
        .map(|tool| tool["name"].as_str().unwrap().to_owned())
        .collect()
}

#[tokio::test]
async fn server_everything_over_http_lists_the_tools_the_tests_call() {
    let Some(servers) = servers("server-everything over HTTP") else {
        return;
    };
    let server = servers.start_everything_http();
    let client = reqwest::Client::new();
    let post = |body: String, session: Option<&str>| {
        let mut request = client
            .post(&server.url)
            .header("content-type", "application/json")
            .header("accept", "application/json, text/event-stream")
            .body(body);
        if let Some(session) = session {
            request = request
                .header("mcp-session-id", session)
                .header("mcp-protocol-version", "2025-11-25");
        }
        request.send()
    };
    let initialized = post(INITIALIZE.into(), None).await.unwrap();
    let session = initialized.headers()["mcp-session-id"]
        .to_str()
        .unwrap()
        .to_owned();
    let answer = message(&initialized.text().await.unwrap());
    assert!(answer["result"]["serverInfo"].is_object(), "{answer}");
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    post(note.to_string(), Some(&session)).await.unwrap();
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let listed = post(list.to_string(), Some(&session)).await.unwrap();
    let names = names(&message(&listed.text().await.unwrap()));
    for tool in [
        "echo",
        "get-sum",
        "get-tiny-image",
        "trigger-long-running-operation",
    ] {
        assert!(
            names.iter().any(|name| name == tool),
            "no {tool} in {names:?}"
        );
    }
    let url = server.url.clone();
    drop(server);
    assert!(
        client.get(&url).send().await.is_err(),
        "the guard stopped the server"
    );
}

#[test]
fn server_filesystem_over_stdio_lists_read_text_file() {
    let Some(servers) = servers("server-filesystem over stdio") else {
        return;
    };
    let dir = tempfile::tempdir().unwrap();
    let entry = servers.filesystem("fs", ".");
    // The command and arguments the settings name, run as the bridge would.
    let parsed = parse_settings(&settings("", &[entry]));
    let server = &parsed["mcp_servers"][0];
    let args: Vec<&str> = server["args"]
        .as_array()
        .unwrap()
        .iter()
        .map(|arg| arg.as_str().unwrap())
        .collect();
    let mut child = Command::new(server["command"].as_str().unwrap())
        .args(args)
        .current_dir(dir.path())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    let stdout = LineReader::new(BufReader::new(child.stdout.take().unwrap()));
    let list = json!({"jsonrpc": "2.0", "id": 1, "method": "tools/list"});
    let note = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
    writeln!(stdin, "{INITIALIZE}\n{note}\n{list}").unwrap();
    let mut listed = Value::Null;
    while listed["id"] != 1 {
        let line = stdout
            .next_within(STEP, "the server's tools/list answer")
            .expect("the server keeps stdout open");
        listed = serde_json::from_str(&line).unwrap();
    }
    let names = names(&listed);
    for tool in ["read_text_file", "write_file"] {
        assert!(
            names.iter().any(|name| name == tool),
            "no {tool} in {names:?}"
        );
    }
    child.kill().unwrap();
    child.wait().unwrap();
}

#[tokio::test]
async fn the_proc_helpers_see_a_process_tree_and_its_group_until_it_is_killed() {
    let mut child = Command::new("sh")
        .args(["-c", "sleep 60 & sleep 60 & wait"])
        .process_group(0)
        .spawn()
        .unwrap();
    let leader = child.id();
    let mut tree = Vec::new();
    for _ in 0..100 {
        tree = descendants(leader);
        if tree.len() == 2 {
            break;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    assert!(
        tree.len() == 2 && tree.iter().all(|p| p.name == "sleep" && p.parent == leader),
        "{tree:?}"
    );
    assert!(
        descendants(std::process::id())
            .iter()
            .any(|p| p.pid == leader)
    );
    let group = in_group(leader);
    assert_eq!(group.len(), 3, "{group:?}");
    // SAFETY: kill(2) on the process group this test created; no memory is involved.
    assert_eq!(unsafe { libc::kill(-(leader as i32), libc::SIGKILL) }, 0);
    // The sleeps are orphaned to init, which reaps them; the shell is our child: reaped here.
    child.wait().unwrap();
    wait_until_gone("the killed group", Duration::from_secs(5), || {
        in_group(leader)
    })
    .await;
    assert!(
        descendants(std::process::id())
            .iter()
            .all(|p| p.pid != leader)
    );
}
