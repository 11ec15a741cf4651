//! One session runs a call of each kind — ok, denied by a rule, blocked by a pre-tool hook,
//! approved by a person, offloaded, failed — with an event subscriber connected; `/metrics`
//! is read while the approval waits and after the run, checked by promtool, and every DESIGN
//! §9 series is compared with what the run implies.

use std::sync::Arc;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::exposition::{promtool_check, sample, value};
use crate::http::approvals::{pending, resolve};
use crate::http::harness::Toold;

/// `echo` asks a person, `rm` is denied by a rule; a pre hook blocks writes containing
/// "secret"; a post hook follows every bash call that succeeded.
fn config(hook: &std::path::Path) -> String {
    format!(
        "[permissions]\nask = [\"bash(echo:*)\"]\ndeny = [\"bash(rm:*)\"]\n\n\
         [[hooks.pre_tool_use]]\nmatcher = \"write_file\"\ncommand = \"sh {}\"\n\n\
         [[hooks.post_tool_use]]\nmatcher = \"bash\"\ncommand = \"true\"\n",
        hook.display()
    )
}

async fn call(toold: &Toold, session: &str, id: &str, name: &str, input: Value) -> Value {
    let reply = toold
        .post(
            &format!("/v1/sessions/{session}/batches"),
            &json!({"calls": [{"id": id, "name": name, "input": input}]}),
        )
        .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["results"][0].clone()
}

fn bash(command: &str) -> Value {
    json!({"command": command})
}

async fn metrics(toold: &Toold) -> String {
    let (status, text) = toold.get_text("/metrics").await;
    assert_eq!(status, StatusCode::OK, "{text}");
    text
}

#[tokio::test]
async fn a_varied_run_shows_in_every_series_and_passes_promtool() {
    let scripts = Arc::new(tempfile::tempdir().unwrap());
    let hook = scripts.path().join("no-secrets.sh");
    std::fs::write(
        &hook,
        "#!/bin/sh\ncase \"$(cat)\" in *secret*) echo 'secrets stay out' >&2; exit 2;; esac\n",
    )
    .unwrap();
    let toold = Toold::start_with_config(&config(&hook));
    let id = toold
        .session_with(&json!({"interactive": true, "permission_mode": "workspace_write"}))
        .await;
    let _subscriber = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, None)
        .await;

    let ok = call(&toold, &id, "ok", "bash", bash("printf hi")).await;
    assert_eq!(ok["is_error"], false, "{ok}");
    let denied = call(&toold, &id, "denied", "bash", bash("rm -f nothing")).await;
    assert_eq!(denied["error_kind"], "permission_denied", "{denied}");
    let blocked = call(
        &toold,
        &id,
        "blocked",
        "write_file",
        json!({"file_path": "a.txt", "content": "a secret"}),
    )
    .await;
    assert_eq!(blocked["error_kind"], "hook_blocked", "{blocked}");

    let approved = call(&toold, &id, "approved", "bash", bash("echo approved"));
    let approve = async {
        let approval = pending(&toold, &id).await;
        let waiting = metrics(&toold).await;
        assert_eq!(value(&waiting, "toold_approvals_pending", &[]), 1.0);
        let approval = approval["id"].as_str().unwrap();
        let reply = resolve(&toold, &id, approval, json!({"decision": "allow"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    };
    let (approved, ()) = tokio::join!(approved, approve);
    assert_eq!(approved["is_error"], false, "{approved}");

    let offloaded = call(&toold, &id, "offloaded", "bash", bash("seq 1 400000")).await;
    let offloaded_chars = offloaded["offloaded"]["total_chars"]
        .as_u64()
        .unwrap_or_else(|| panic!("not offloaded: {offloaded}"));
    let failed = call(&toold, &id, "failed", "bash", bash("exit 3")).await;
    assert_eq!(failed["is_error"], true, "{failed}");

    let text = metrics(&toold).await;
    promtool_check(&text);

    // Calls by tool and outcome: three bash calls ran fine; the others by their error kind.
    assert_eq!(
        value(
            &text,
            "toold_tool_calls_total",
            &[("tool", "bash"), ("outcome", "ok")]
        ),
        3.0
    );
    let failed_kind = failed["error_kind"].as_str().unwrap();
    assert_ne!(failed_kind, "permission_denied", "{failed}");
    for (tool, outcome) in [
        ("bash", "permission_denied"),
        ("bash", failed_kind),
        ("write_file", "hook_blocked"),
    ] {
        let labels = [("tool", tool), ("outcome", outcome)];
        assert_eq!(value(&text, "toold_tool_calls_total", &labels), 1.0);
    }
    let durations = |tool| {
        value(
            &text,
            "toold_tool_call_duration_seconds_count",
            &[("tool", tool)],
        )
    };
    assert_eq!(durations("bash"), 5.0);
    assert_eq!(durations("write_file"), 1.0);

    let decisions = |decision, by| {
        sample(
            &text,
            "toold_permission_decisions_total",
            &[("decision", decision), ("decided_by", by)],
        )
        .unwrap_or(0.0)
    };
    assert_eq!(decisions("allow", "mode"), 3.0, "{text}");
    assert_eq!(decisions("deny", "rule"), 1.0, "{text}");
    assert_eq!(decisions("deny", "hook"), 1.0, "{text}");
    assert_eq!(decisions("allow", "approver"), 1.0, "{text}");

    assert_eq!(value(&text, "toold_approvals_pending", &[]), 0.0);
    assert_eq!(
        value(
            &text,
            "toold_hook_runs_total",
            &[("event", "PreToolUse"), ("outcome", "deny")]
        ),
        1.0
    );
    // Four shells started (ok, approved, offloaded, failed), under the sandbox they report.
    let backend = ok["metadata"]["sandbox"]
        .as_str()
        .unwrap_or_else(|| panic!("{ok}"));
    let spawns = [("backend", backend)];
    assert_eq!(
        value(&text, "toold_sandbox_spawn_seconds_count", &spawns),
        4.0
    );
    // The post hook followed the three bash calls that succeeded.
    let post = [("event", "PostToolUse"), ("outcome", "ok")];
    assert_eq!(value(&text, "toold_hook_runs_total", &post), 3.0);
    assert_eq!(value(&text, "toold_sessions_active", &[]), 1.0);
    assert_eq!(value(&text, "toold_event_subscribers", &[]), 1.0);
    assert_eq!(value(&text, "toold_events_lagged_total", &[]), 0.0);
    assert_eq!(
        value(&text, "toold_offloaded_bytes_total", &[]),
        offloaded_chars as f64
    );
    for state in ["starting", "ready", "restarting", "failed", "stopped"] {
        assert_eq!(
            value(&text, "toold_mcp_servers", &[("state", state)]),
            0.0,
            "{state}"
        );
    }
    assert_eq!(
        value(
            &text,
            "toold_build_info",
            &[("version", env!("CARGO_PKG_VERSION"))]
        ),
        1.0
    );
    assert!(value(&text, "process_resident_memory_bytes", &[]) > 0.0);
    assert!(value(&text, "process_open_fds", &[]) > 0.0);
    assert!(value(&text, "process_start_time_seconds", &[]) > 1.6e9);
    assert!(sample(&text, "process_cpu_seconds_total", &[]).is_some());
    for line in text.lines().filter(|l| l.starts_with("toold_")) {
        let id_label = ["session_id=", "batch_id=", "call_id=", "approval_id="]
            .iter()
            .any(|label| line.contains(label));
        assert!(!line.contains(&id) && !id_label, "an id as a label: {line}");
    }
}
