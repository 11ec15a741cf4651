//! Bridged tools' names in the session's pool: `mcp__{server}__{tool}` in all five definition
//! formats for server-filesystem and server-everything over stdio and server-everything over
//! Streamable HTTP; deferred tools offered only once `tool_search` loads them; the listing
//! of `GET /v1/mcp/servers`; a session naming an unknown server refused.

use reqwest::StatusCode;
use serde_json::json;

use super::{call, eager, listing, ok_output, ready_pid, servers, session, start, tool_names};
use crate::support::mcp_servers::ServerEntry;

const FORMATS: [&str; 5] = ["toold", "anthropic", "openai", "openai_chat", "mcp"];

#[tokio::test]
async fn bridged_names_show_in_all_five_formats_for_stdio_and_http_servers() {
    let Some(servers) = servers("bridged names in every format") else {
        return;
    };
    let http = servers.start_everything_http();
    let toold = start(
        "",
        &[
            eager(servers.filesystem("fs", ".")),
            eager(servers.everything("every")),
            eager(ServerEntry::http("web", &http.url).set("scope", "daemon")),
        ],
    );
    let id = session(&toold, &["fs", "every"]).await;
    for format in FORMATS {
        let names = tool_names(&toold, &id, format).await;
        for expected in [
            "mcp__fs__read_text_file",
            "mcp__fs__write_file",
            "mcp__every__echo",
            "mcp__every__trigger-long-running-operation",
            "mcp__web__echo",
            "mcp__web__get-sum",
            "read_file",
            "bash",
        ] {
            assert!(
                names.iter().any(|name| name == expected),
                "{format}: no {expected} in {names:?}"
            );
        }
        for name in &names {
            assert!(
                name.len() <= 64
                    && name
                        .chars()
                        .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-'),
                "{format}: {name} is not a valid tool name"
            );
        }
    }
}

#[tokio::test]
async fn a_deferred_server_s_tools_are_offered_once_tool_search_loads_them() {
    let Some(servers) = servers("deferred bridged tools") else {
        return;
    };
    let toold = start("", &[servers.everything("every")]);
    let id = session(&toold, &["every"]).await;
    ready_pid(&toold, "every", Some(&id)).await;
    let before = tool_names(&toold, &id, "toold").await;
    assert!(
        !before.iter().any(|name| name.starts_with("mcp__every__")),
        "deferred tools offered before tool_search: {before:?}"
    );
    let found = call(&toold, &id, "tool_search", json!({"query": "echo"})).await;
    assert!(
        ok_output(&found).contains("mcp__every__echo"),
        "a keyword search finds the deferred tool: {found}"
    );
    let loaded = call(
        &toold,
        &id,
        "tool_search",
        json!({"query": "select:mcp__every__echo"}),
    )
    .await;
    ok_output(&loaded);
    let after = tool_names(&toold, &id, "anthropic").await;
    assert!(
        after.iter().any(|name| name == "mcp__every__echo"),
        "loaded, yet not offered: {after:?}"
    );
    let echoed = call(&toold, &id, "mcp__every__echo", json!({"message": "hi"})).await;
    assert_eq!(ok_output(&echoed), "Echo: hi");
}

#[tokio::test]
async fn the_listing_shows_a_daemon_server_once_and_a_session_server_per_session() {
    let Some(servers) = servers("GET /v1/mcp/servers") else {
        return;
    };
    let http = servers.start_everything_http();
    let toold = start(
        "",
        &[
            eager(servers.filesystem("fs", ".")),
            eager(ServerEntry::http("web", &http.url).set("scope", "daemon")),
        ],
    );
    let first = session(&toold, &["fs"]).await;
    let second = session(&toold, &["fs", "web"]).await;
    let third = session(&toold, &[]).await;
    for id in [&first, &second] {
        ready_pid(&toold, "fs", Some(id)).await;
    }
    let servers = listing(&toold).await;
    let described: Vec<_> = servers
        .iter()
        .map(|s| {
            (
                s["name"].clone(),
                s["scope"].clone(),
                s["session_id"].clone(),
            )
        })
        .collect();
    let mut sessions = [first.clone(), second.clone()];
    sessions.sort();
    assert_eq!(
        described,
        vec![
            (json!("fs"), json!("session"), json!(sessions[0])),
            (json!("fs"), json!("session"), json!(sessions[1])),
            (json!("web"), json!("daemon"), json!(null)),
        ],
        "{servers:?}"
    );
    for server in &servers {
        assert_eq!(server["state"], "ready", "{server}");
        assert_eq!(server["restarts"], 0, "{server}");
        assert_eq!(server["last_error"], json!(null), "{server}");
    }
    let (fs, web) = (&servers[0], &servers[2]);
    assert_eq!(fs["transport"], "stdio");
    assert!(fs["pid"].as_u64().is_some_and(|pid| pid > 1), "{fs}");
    assert!(
        fs["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__fs__read_text_file")),
        "{fs}"
    );
    assert_eq!(web["transport"], "http");
    assert_eq!(web["pid"], json!(null));
    assert!(
        web["tools"]
            .as_array()
            .unwrap()
            .contains(&json!("mcp__web__echo")),
        "{web}"
    );
    // A daemon-scoped server's tools are in every session's pool, named or not.
    let names = tool_names(&toold, &third, "toold").await;
    assert!(names.iter().any(|n| n == "mcp__web__echo"), "{names:?}");
    assert!(
        !names.iter().any(|n| n.starts_with("mcp__fs__")),
        "{names:?}"
    );
}

#[tokio::test]
async fn a_session_naming_an_unknown_server_is_refused_naming_it() {
    let Some(servers) = servers("an unknown server in a session") else {
        return;
    };
    let toold = start("", &[servers.everything("every")]);
    let reply = toold
        .post("/v1/sessions", &json!({"mcp_servers": ["every", "nope"]}))
        .await;
    assert_eq!(reply.status, StatusCode::BAD_REQUEST, "{}", reply.body);
    assert!(
        reply.body["error"]["message"]
            .as_str()
            .unwrap()
            .contains("nope"),
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn a_name_over_64_characters_is_cut_stably_and_still_calls_the_server_s_tool() {
    let Some(servers) = servers("a bridged name over 64 characters") else {
        return;
    };
    // The longest server name allowed (32 characters).
    let server = "everything-server-with-long-name";
    assert_eq!(server.len(), 32);
    let full = format!("mcp__{server}__trigger-long-running-operation");
    assert!(full.len() > 64);
    let mut seen = Vec::new();
    // Two daemons (a restart): the cut name is the same.
    for _ in 0..2 {
        let toold = start("", &[eager(servers.everything(server))]);
        let id = session(&toold, &[server]).await;
        let names = tool_names(&toold, &id, "toold").await;
        // The cut name: 64 characters, the full name's start, `_`, the hash.
        let cut: Vec<&String> = names
            .iter()
            .filter(|name| {
                name.len() == 64
                    && name
                        .rsplit_once('_')
                        .is_some_and(|(kept, _)| kept.len() > 41 && full.starts_with(kept))
            })
            .collect();
        let [name] = cut[..] else {
            panic!("one cut name for {full}: {names:?}");
        };
        let (kept, hash) = name.rsplit_once('_').unwrap();
        assert!(full.starts_with(kept), "{name} keeps the name's start");
        assert!(
            hash.len() == 8 && hash.chars().all(|c| c.is_ascii_hexdigit()),
            "{name} ends in an 8-digit hash"
        );
        let result = call(&toold, &id, name, json!({"duration": 0, "steps": 1})).await;
        assert!(ok_output(&result).contains("Steps: 1"), "{result}");
        seen.push(name.clone());
    }
    assert_eq!(seen[0], seen[1]);
}

#[tokio::test]
async fn a_configured_session_server_is_listed_before_any_session_starts_it() {
    let Some(servers) = servers("a session server listed before it starts") else {
        return;
    };
    let toold = start("", &[eager(servers.filesystem("fs", "."))]);
    let before = listing(&toold).await;
    assert_eq!(before.len(), 1, "{before:?}");
    let configured = &before[0];
    assert_eq!(configured["name"], "fs", "{configured}");
    assert_eq!(configured["scope"], "session", "{configured}");
    assert_eq!(configured["transport"], "stdio", "{configured}");
    assert_eq!(configured["state"], "not_started", "{configured}");
    assert_eq!(configured["session_id"], json!(null), "{configured}");
    assert_eq!(configured["pid"], json!(null), "{configured}");
    assert_eq!(configured["tools"], json!([]), "{configured}");

    // Once a session runs it, its instance is the entry; once that session closes, the
    // configured entry is back.
    let id = session(&toold, &["fs"]).await;
    ready_pid(&toold, "fs", Some(&id)).await;
    let running = listing(&toold).await;
    assert_eq!(running.len(), 1, "{running:?}");
    assert_eq!(running[0]["session_id"], json!(id), "{running:?}");
    assert_eq!(running[0]["state"], "ready", "{running:?}");
    let closed = toold.delete(&format!("/v1/sessions/{id}")).await;
    assert!(closed.status.is_success(), "{}", closed.body);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    loop {
        let after = listing(&toold).await;
        if after.len() == 1 && after[0]["state"] == "not_started" {
            break;
        }
        assert!(std::time::Instant::now() < deadline, "{after:?}");
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
