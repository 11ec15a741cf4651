//! Creating, listing, closing and restoring sessions, and what the service refuses.

use super::harness::admin;
use serde_json::json;
use toold::service::{Closed, CreateSessionRequest, ErrorCode};

use crate::service::harness::*;

#[tokio::test]
async fn a_session_gets_a_fresh_workspace_or_one_under_an_allowed_root() {
    let daemon = Daemon::start().await;
    let fresh = daemon.session(json!({})).await;
    assert!(
        fresh
            .working_directory
            .starts_with(daemon.data.join("workspaces").canonicalize().unwrap())
    );
    assert!(fresh.working_directory.is_dir());
    assert_eq!(fresh.permission_mode.as_str(), "workspace_write");
    assert!(!fresh.interactive);
    assert_eq!(fresh.owner, "node-a");

    let project = daemon.allowed.join("app");
    std::fs::create_dir(&project).unwrap();
    let chosen = daemon
        .session(
            json!({"working_directory": project, "permission_mode": "read_only",
            "interactive": true, "metadata": {"agent": "test"}}),
        )
        .await;
    assert_eq!(chosen.working_directory, project.canonicalize().unwrap());
    assert_eq!(chosen.permission_mode.as_str(), "read_only");
    assert_eq!(chosen.metadata, json!({"agent": "test"}));
    let listed: Vec<String> = daemon
        .service
        .list_sessions(&admin())
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, [fresh.id.clone(), chosen.id.clone()]);
    assert_eq!(
        daemon.service.get_session(&admin(), &chosen.id).unwrap(),
        chosen
    );
}

#[tokio::test]
async fn bad_session_requests_are_clear_errors() {
    let daemon = Daemon::start().await;
    let outside = tempfile::tempdir().unwrap();
    let link = daemon.allowed.join("escape");
    std::os::unix::fs::symlink(outside.path(), &link).unwrap();
    let file = daemon.allowed.join("file.txt");
    write(&file, "x");
    // Each answer says which is wrong: outside the roots is forbidden, a path that is not
    // there (or not a directory) not found, the rest invalid.
    let cases = [
        (
            json!({"working_directory": outside.path()}),
            ErrorCode::Forbidden,
            "not under an allowed root",
        ),
        (
            json!({"working_directory": link}),
            ErrorCode::Forbidden,
            "not under an allowed root",
        ),
        (
            json!({"working_directory": "relative/dir"}),
            ErrorCode::InvalidRequest,
            "must be an absolute path",
        ),
        (
            json!({"working_directory": daemon.allowed.join("missing")}),
            ErrorCode::NotFound,
            "No such file",
        ),
        (
            json!({"working_directory": file}),
            ErrorCode::NotFound,
            "not a directory",
        ),
        (
            json!({"mcp_servers": ["github"]}),
            ErrorCode::InvalidRequest,
            "unknown MCP server \"github\"",
        ),
        (
            json!({"output_schema": {"type": 12}}),
            ErrorCode::InvalidRequest,
            "not a valid JSON schema",
        ),
        (
            json!({"output_schema": true}),
            ErrorCode::InvalidRequest,
            "output_schema must be a JSON object",
        ),
        (
            json!({"metadata": [1, 2]}),
            ErrorCode::InvalidRequest,
            "metadata must be a JSON object",
        ),
    ];
    for (body, code, expected) in cases {
        let request: CreateSessionRequest = serde_json::from_value(body.clone()).unwrap();
        let err = daemon
            .service
            .create_session(&admin(), request)
            .await
            .unwrap_err();
        assert_eq!(err.code, code, "{body}");
        assert!(err.message.contains(expected), "{body}: {}", err.message);
    }
    // Unknown fields and bad modes are refused when the request is parsed.
    assert!(
        serde_json::from_value::<CreateSessionRequest>(json!({"permission_mode": "root"})).is_err()
    );
    assert!(serde_json::from_value::<CreateSessionRequest>(json!({"workdir": "/x"})).is_err());
    assert!(
        daemon.service.list_sessions(&admin()).is_empty(),
        "nothing half-created"
    );
    let unknown = daemon
        .service
        .get_session(&admin(), "sess_nope")
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn tools_come_in_every_format_filtered_by_the_session() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "read_only", "tools": {"deny": ["Grep"]}}))
        .await;
    for format in ["anthropic", "openai", "openai_chat", "mcp", "toold"] {
        let tools = daemon
            .service
            .list_tools(&admin(), &session.id, format)
            .unwrap();
        let names: Vec<&str> = tools
            .iter()
            .map(|t| {
                t["name"]
                    .as_str()
                    .or(t["function"]["name"].as_str())
                    .unwrap()
            })
            .collect();
        assert!(names.contains(&"read_file"), "{format}: {names:?}");
        assert!(
            !names.contains(&"write_file"),
            "read_only hides writers: {names:?}"
        );
        assert!(
            !names.contains(&"grep_search"),
            "denied by alias: {names:?}"
        );
    }
    let err = daemon
        .service
        .list_tools(&admin(), &session.id, "gemini")
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::InvalidRequest);
    assert!(err.message.contains("\"gemini\""));
    assert_eq!(
        daemon
            .service
            .list_tools(&admin(), "sess_nope", "anthropic")
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert!(daemon.service.catalogue().len() >= 19);
}

#[tokio::test]
async fn a_tool_loaded_with_tool_search_is_offered_from_the_next_batch() {
    let daemon =
        Daemon::start_with_tools(vec![DeferredEcho::tool("echo_later", "echoes its text")]).await;
    let session = daemon.session(json!({})).await;
    let offered = |daemon: &Daemon| {
        let tools = daemon
            .service
            .list_tools(&admin(), &session.id, "toold")
            .unwrap();
        tools.iter().any(|tool| tool["name"] == "echo_later")
    };
    assert!(!offered(&daemon), "deferred until loaded");
    let echo = json!({"id": "2", "name": "echo_later", "input": {"text": "hi"}});
    let first = daemon
        .batch(
            &session.id,
            calls(json!([
                {"id": "1", "name": "tool_search", "input": {"query": "select:echo_later"}},
                echo.clone()])),
        )
        .await;
    assert_eq!(first["results"][0]["is_error"], false, "{first}");
    // The pool is frozen for a batch: the load shows from the next one.
    assert_eq!(first["results"][1]["error_kind"], "unknown_tool", "{first}");
    assert!(offered(&daemon));
    let second = daemon.batch(&session.id, calls(json!([echo]))).await;
    assert_eq!(second["results"][0]["is_error"], false, "{second}");
    assert_eq!(second["results"][0]["output"], "hi");
}

#[tokio::test]
async fn a_restart_keeps_sessions_and_their_state() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    let dir = session.working_directory.clone();
    std::fs::create_dir(dir.join("sub")).unwrap();
    write(&dir.join("sub/notes.txt"), "one\n");
    let first = daemon
        .batch(
            &session.id,
            calls(json!([
                {"id": "c1", "name": "bash", "input": {"command": "cd sub"}},
                {"id": "c2", "name": "read_file", "input": {"file_path": "sub/notes.txt"}},
                {"id": "c3", "name": "todo_write", "input": {"todos": [
                    {"content": "ship", "status": "in_progress", "activeForm": "Shipping"}]}}
            ])),
        )
        .await;
    assert!(
        first["results"]
            .as_array()
            .unwrap()
            .iter()
            .all(|r| r["is_error"] == false),
        "{first}"
    );
    let closed = daemon.session(json!({})).await;
    daemon
        .service
        .close_session(&admin(), &closed.id)
        .await
        .unwrap();
    drop(daemon.service.clone());

    let restarted = daemon.restart().await;
    let ids: Vec<String> = restarted
        .service
        .list_sessions(&admin())
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(
        ids,
        std::slice::from_ref(&session.id),
        "open sessions come back, closed ones do not"
    );
    let after = restarted
        .batch(
            &session.id,
            calls(json!([
                {"id": "d1", "name": "bash", "input": {"command": "pwd"}},
                // Edit without reading again: the file-state cache survived the restart.
                {"id": "d2", "name": "edit_file", "input": {"file_path": "sub/notes.txt",
                    "old_string": "one", "new_string": "two"}}
            ])),
        )
        .await;
    let results = after["results"].as_array().unwrap();
    assert!(
        results[0]["output"]
            .as_str()
            .unwrap()
            .trim_end()
            .ends_with("/sub"),
        "{after}"
    );
    assert_eq!(results[1]["is_error"], false, "{after}");
    assert_eq!(
        std::fs::read_to_string(dir.join("sub/notes.txt")).unwrap(),
        "two\n"
    );
    let calls = restarted
        .service
        .list_calls(&admin(), &session.id, None, 100, Closed::Readable)
        .await
        .unwrap();
    assert_eq!(calls.rows.len(), 5, "the audit log spans the restart");
}

#[tokio::test]
async fn closing_cancels_running_calls_and_forgets_the_session() {
    let daemon = Daemon::start().await;
    let session = daemon.session(json!({})).await;
    let service = daemon.service.clone();
    let id = session.id.clone();
    let running = tokio::spawn(async move {
        service
            .execute_body(
                &id,
                &calls(json!([
                    {"id": "s", "name": "sleep", "input": {"duration_ms": 60000}},
                    {"id": "q", "name": "todo_write", "input": {"todos": []}}
                ])),
            )
            .await
    });
    let mut events = daemon.service.events().subscribe();
    loop {
        let event = crate::support::deadline::within(
            crate::support::deadline::STEP,
            "tool:pre",
            events.recv(),
        )
        .await
        .unwrap();
        if event.event_type == toold::event::EventType::ToolPre {
            break;
        }
    }
    let closed = daemon
        .service
        .close_session(&admin(), &session.id)
        .await
        .unwrap();
    assert!(closed.closed);
    let response = running.await.unwrap().unwrap().json();
    assert_eq!(
        response["results"][0]["error_kind"], "cancelled",
        "{response}"
    );
    assert!(
        response["results"][0]["output"]
            .as_str()
            .unwrap()
            .contains("closed"),
        "{response}"
    );
    assert_eq!(
        response["results"][1]["error_kind"], "cancelled",
        "{response}"
    );
    let err = daemon
        .service
        .get_session(&admin(), &session.id)
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    let again = daemon
        .service
        .close_session(&admin(), &session.id)
        .await
        .unwrap_err();
    assert_eq!(again.code, ErrorCode::NotFound);
}
