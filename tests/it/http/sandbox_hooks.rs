//! `[sandbox]` and `[hooks]` from the settings file reach the daemon's shell and pipeline.

use reqwest::StatusCode;
use serde_json::json;

use crate::http::harness::Toold;

#[tokio::test]
async fn the_settings_file_sandboxes_bash_and_runs_its_hooks() {
    let scripts = tempfile::tempdir().unwrap();
    let hook = scripts.path().join("no-secrets.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$(cat)\" in *secret*) echo 'secrets stay out' >&2; exit 2;; esac\n",
    )
    .unwrap();
    let toml = format!(
        "[sandbox]\nmode = \"landlock\"\n\n[[hooks.pre_tool_use]]\nmatcher = \"write_file\"\ncommand = \"sh {}\"\n",
        hook.display()
    );
    let toold = Toold::start_with_config(&toml);
    let asks = toold.post("/v1/sessions", &json!({"network": true})).await;
    assert_eq!(asks.status, StatusCode::CREATED, "{}", asks.body);
    assert_eq!(
        asks.body["network"], true,
        "the request is kept: {}",
        asks.body
    );
    let reply = toold
        .post(
            "/v1/sessions",
            &json!({"permission_mode": "workspace_write"}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    assert_eq!(reply.body["network"], false, "{}", reply.body);
    let session = reply.body["id"].as_str().unwrap().to_owned();
    let workspace = toold.workspace(&session).await;

    // Under the sandbox a write inside needs only workspace_write …
    let made = toold
        .call_one(&session, "bash", json!({"command": "touch made"}))
        .await;
    assert_eq!(made["is_error"], false, "{made}");
    assert!(workspace.join("made").exists());
    // … and what the static check cannot see is stopped by the sandbox.
    std::fs::write(
        workspace.join("s.sh"),
        "echo x > \"$HOME/toold-http-escape\"\n",
    )
    .unwrap();
    let escape = toold
        .call_one(&session, "bash", json!({"command": "bash s.sh"}))
        .await;
    assert_eq!(escape["is_error"], true, "{escape}");
    assert!(
        escape["output"]
            .as_str()
            .unwrap()
            .contains("ermission denied"),
        "{escape}"
    );

    let blocked = toold
        .call_one(
            &session,
            "write_file",
            json!({"file_path": "a.txt", "content": "my secret"}),
        )
        .await;
    assert_eq!(blocked["error_kind"], "hook_blocked", "{blocked}");
    assert!(
        blocked["output"]
            .as_str()
            .unwrap()
            .contains("secrets stay out")
    );
    assert!(!workspace.join("a.txt").exists());
    let allowed = toold
        .call_one(
            &session,
            "write_file",
            json!({"file_path": "b.txt", "content": "fine"}),
        )
        .await;
    assert_eq!(allowed["is_error"], false, "{allowed}");
}
