//! Rules and hooks see the bridged name: `deny = ["mcp__fs__write_file"]` refuses the call
//! (the file is not written, the audit row says which rule), and a pre-tool-use command hook
//! matching `mcp__fs__.*` receives `mcp__fs__read_text_file` with its input and blocks it;
//! a server's annotations (`readOnlyHint` on server-everything's `echo`) are untrusted
//! unless `trust_annotations = true`, and `permission` is what every tool of it requires.

use serde_json::{Value, json};

use super::{audit_rows, call, eager, ok_output, servers, session, start, workspace_file};
use crate::http::harness::Toold;

#[tokio::test]
async fn a_deny_rule_on_the_bridged_name_refuses_the_call() {
    let Some(servers) = servers("a deny rule on a bridged tool") else {
        return;
    };
    let toold = start(
        "[permissions]\ndeny = [\"mcp__fs__write_file\"]\n",
        &[eager(servers.filesystem("fs", "."))],
    );
    let id = session(&toold, &["fs"]).await;
    let target = toold.workspace(&id).await.join("written.txt");
    let result = call(
        &toold,
        &id,
        "mcp__fs__write_file",
        json!({"path": target, "content": "x"}),
    )
    .await;
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    assert!(!target.exists(), "a denied call reached the server");
    let rows = audit_rows(&toold, &id).await;
    let decision = &rows[0]["decision"];
    assert_eq!(decision["decision"], "deny", "{rows:?}");
    assert_eq!(
        decision["decided_by"]["rule"], "mcp__fs__write_file",
        "{rows:?}"
    );
    // The same server's other tools are not refused.
    let path = workspace_file(&toold, &id, "a.txt", "fine").await;
    let read = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": path}),
    )
    .await;
    assert_eq!(ok_output(&read), "fine");
}

#[tokio::test]
async fn a_hook_sees_the_bridged_name_and_blocks_the_call() {
    let Some(servers) = servers("a hook on a bridged tool") else {
        return;
    };
    let scripts = tempfile::tempdir().unwrap();
    let seen = scripts.path().join("seen.jsonl");
    let hook = scripts.path().join("hook.sh");
    std::fs::write(
        &hook,
        format!(
            "#!/bin/sh\ninput=\"$(cat)\"\nprintf '%s\\n' \"$input\" >> '{}'\n\
             case \"$input\" in *secret*) echo 'no secrets over MCP' >&2; exit 2;; esac\n",
            seen.display()
        ),
    )
    .unwrap();
    let head = format!(
        "[[hooks.pre_tool_use]]\nmatcher = \"mcp__fs__.*\"\ncommand = \"sh {}\"\n",
        hook.display()
    );
    let toold = start(&head, &[eager(servers.filesystem("fs", "."))]);
    let id = session(&toold, &["fs"]).await;
    let secret = workspace_file(&toold, &id, "secret.txt", "hidden").await;
    let blocked = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": secret}),
    )
    .await;
    assert_eq!(blocked["is_error"], true, "{blocked}");
    assert_eq!(blocked["error_kind"], "hook_blocked", "{blocked}");
    assert!(
        blocked["output"]
            .as_str()
            .unwrap()
            .contains("no secrets over MCP"),
        "{blocked}"
    );
    let public = workspace_file(&toold, &id, "public.txt", "open").await;
    let allowed = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": public}),
    )
    .await;
    assert_eq!(ok_output(&allowed), "open");

    let inputs: Vec<Value> = std::fs::read_to_string(&seen)
        .unwrap()
        .lines()
        .map(|line| serde_json::from_str(line).unwrap())
        .collect();
    assert_eq!(inputs.len(), 2, "{inputs:?}");
    assert_eq!(inputs[0]["tool_name"], "mcp__fs__read_text_file");
    assert_eq!(inputs[0]["tool_input"], json!({"path": secret}));
    assert_eq!(inputs[0]["hook_event_name"], "PreToolUse");
    assert_eq!(inputs[0]["session_id"], id.as_str());
}

/// The toold-format definition of `name` in the session's pool.
async fn definition(toold: &Toold, session: &str, name: &str) -> Value {
    let reply = toold
        .get(&format!("/v1/sessions/{session}/tools?format=toold"))
        .await;
    reply.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .find(|tool| tool["name"] == name)
        .unwrap_or_else(|| panic!("no {name}: {}", reply.body))
        .clone()
}

#[tokio::test]
async fn a_read_only_hint_counts_only_when_annotations_are_trusted() {
    let Some(servers) = servers("trust_annotations") else {
        return;
    };
    let toold = start(
        "",
        &[
            eager(servers.everything("every")),
            eager(servers.everything("trusted"))
                .set("trust_annotations", true)
                .set("permission", "read_only"),
        ],
    );
    let id = session(&toold, &["every", "trusted"]).await;
    let untrusted = definition(&toold, &id, "mcp__every__echo").await;
    assert_eq!(untrusted["read_only"], false, "{untrusted}");
    assert_eq!(untrusted["concurrency_safe"], false, "{untrusted}");
    assert_eq!(
        untrusted["required_permission"], "workspace_write",
        "{untrusted}"
    );
    assert_eq!(untrusted["source"], "external", "{untrusted}");
    let trusted = definition(&toold, &id, "mcp__trusted__echo").await;
    assert_eq!(trusted["read_only"], true, "{trusted}");
    assert_eq!(trusted["concurrency_safe"], true, "{trusted}");
    assert_eq!(trusted["required_permission"], "read_only", "{trusted}");
}
