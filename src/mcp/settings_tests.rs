//! `[[mcp_servers]]` read key by key and checked against the environment: every refusal names
//! the server and the key.

use serde_json::{Value, json};

use super::*;

fn parse(entries: Value) -> Result<Vec<McpServerSettings>, String> {
    let entries = entries.as_array().cloned().unwrap_or_default();
    parse_servers(&entries).map_err(|err| err.to_string())
}

fn env_with_path(name: &str) -> Option<String> {
    match name {
        "PATH" => Some("/usr/bin:/bin".into()),
        "HOME" => Some("/root".into()),
        "TOKEN" => Some("secret".into()),
        _ => None,
    }
}

#[test]
fn designs_example_reads_with_its_defaults() {
    let servers = parse(json!([
        {"name": "fs", "command": "sh", "args": ["-c", "true"]},
        {"name": "remote", "url": "http://127.0.0.1:9000/mcp", "scope": "daemon",
         "headers": {"X-Team": "a"}, "bearer_token_env": "TOKEN", "defer": false}
    ]))
    .unwrap();
    let fs = &servers[0];
    assert_eq!(fs.scope, McpScope::Session);
    assert_eq!(fs.startup_timeout_ms, 10_000);
    assert_eq!(fs.tool_timeout_ms, 60_000);
    assert_eq!(fs.permission, PermissionLevel::WorkspaceWrite);
    assert!(fs.defer && !fs.trust_annotations);
    assert_eq!(fs.transport(), "stdio");
    assert_eq!(servers[1].transport(), "http");

    let mut servers = servers;
    check_servers(&mut servers, env_with_path).unwrap();
    assert_eq!(
        servers[0].program.as_deref(),
        Some(Path::new("/usr/bin/sh"))
    );
    assert_eq!(servers[1].bearer_token.as_deref(), Some("secret"));
    assert_eq!(servers[0].base_env["HOME"], "/root");
    assert!(
        !servers[0].base_env.contains_key("TOKEN"),
        "secrets are not passed on"
    );
}

#[test]
fn each_bad_entry_is_refused_naming_the_server_and_the_key() {
    let cases = [
        (
            json!([{"name": "fs", "command": "x", "colour": "red"}]),
            "mcp_servers \"fs\": colour: unknown key",
        ),
        (
            json!([{"name": "fs", "command": "x", "tool_timeout_ms": "soon"}]),
            "mcp_servers \"fs\": tool_timeout_ms: invalid type",
        ),
        (
            json!([{"name": "fs", "command": "x", "scope": "galaxy"}]),
            "mcp_servers \"fs\": scope: unknown variant",
        ),
        (
            json!([{"name": "my__fs", "command": "x"}]),
            "mcp_servers \"my__fs\": name: \"my__fs\" must match",
        ),
        (
            json!([{"name": "f s", "command": "x"}]),
            "mcp_servers \"f s\": name:",
        ),
        (json!([{"command": "x"}]), "mcp_servers[0]: name:"),
        (
            json!([{"name": "fs"}]),
            "mcp_servers \"fs\": command: give command (stdio) or url (HTTP)",
        ),
        (
            json!([{"name": "fs", "command": "x", "url": "http://a/"}]),
            "mcp_servers \"fs\": url: give command or url, not both",
        ),
        (
            json!([{"name": "web", "url": "ftp://a/"}]),
            "mcp_servers \"web\": url: \"ftp://a/\" is not an http or https URL",
        ),
        (
            json!([{"name": "web", "url": "not a url"}]),
            "mcp_servers \"web\": url:",
        ),
        (
            json!([{"name": "web", "url": "http://a/", "args": ["x"]}]),
            "mcp_servers \"web\": args: only a stdio server",
        ),
        (
            json!([{"name": "fs", "command": "x", "headers": {"A": "b"}}]),
            "mcp_servers \"fs\": headers: only an HTTP server",
        ),
        (
            json!([{"name": "web", "url": "http://a/", "headers": {"bad name": "b"}}]),
            "mcp_servers \"web\": headers:",
        ),
        (
            json!([{"name": "fs", "command": "x", "tool_timeout_ms": 0}]),
            "mcp_servers \"fs\": tool_timeout_ms: must be at least 1",
        ),
        (json!(["fs"]), "mcp_servers[0]: an entry must be a table"),
        (
            json!([{"name": "a".repeat(33), "command": "x"}]),
            "mcp_servers \"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa\": name:",
        ),
    ];
    for (entries, expected) in cases {
        let err = parse(entries.clone()).expect_err(&entries.to_string());
        assert!(err.starts_with(expected), "{entries}: {err}");
    }
}

#[test]
fn what_needs_the_environment_is_checked_with_the_whole_list() {
    let mut twice = parse(json!([
        {"name": "fs", "command": "sh"},
        {"name": "fs", "command": "sh"}
    ]))
    .unwrap();
    let err = check_servers(&mut twice, env_with_path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "mcp_servers \"fs\": name: another server has this name"
    );

    let mut missing = parse(json!([{"name": "fs", "command": "no-such-program-toold"}])).unwrap();
    let err = check_servers(&mut missing, env_with_path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "mcp_servers \"fs\": command: \"no-such-program-toold\" is not an executable file or on PATH"
    );

    let mut absent = parse(json!([{"name": "fs", "command": "/no/such/file"}])).unwrap();
    assert!(check_servers(&mut absent, env_with_path).is_err());

    // A relative command is made absolute against the daemon's directory: the server runs in
    // the session's workspace, where the same text would name another file.
    let mut relative = parse(json!([{"name": "fs", "command": "./toold-test-relative"}])).unwrap();
    let dir = std::env::current_dir().unwrap();
    let file = dir.join("toold-test-relative");
    std::fs::write(&file, "#!/bin/sh\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o755)).unwrap();
    let checked = check_servers(&mut relative, env_with_path);
    std::fs::remove_file(&file).unwrap();
    checked.unwrap();
    assert_eq!(relative[0].program.as_deref(), Some(file.as_path()));

    let mut unset = parse(json!([
        {"name": "web", "url": "http://127.0.0.1:1/mcp", "bearer_token_env": "NOT_SET"}
    ]))
    .unwrap();
    let err = check_servers(&mut unset, env_with_path).unwrap_err();
    assert_eq!(
        err.to_string(),
        "mcp_servers \"web\": bearer_token_env: the variable \"NOT_SET\" is not set"
    );

    // The server's own PATH is where its command is looked for.
    let mut own_path = parse(json!([
        {"name": "fs", "command": "sh", "env": {"PATH": "/nowhere"}}
    ]))
    .unwrap();
    assert!(check_servers(&mut own_path, env_with_path).is_err());
}

#[test]
fn server_names_follow_the_bridged_name_rules() {
    assert!(is_valid_server_name("fs"));
    assert!(is_valid_server_name("my-fs_2"));
    assert!(!is_valid_server_name(""));
    assert!(!is_valid_server_name("a__b"));
    assert!(!is_valid_server_name("a.b"));
    assert!(is_valid_server_name(&"a".repeat(MAX_SERVER_NAME)));
    assert!(!is_valid_server_name(&"a".repeat(MAX_SERVER_NAME + 1)));
}
