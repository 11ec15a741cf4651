//! Approvals over HTTP against the real daemon: an `ask` rule in an interactive session waits
//! for a person (listed by `GET …/approvals`, announced by `permission:ask`), who allows,
//! denies (optionally for the rest of the session) or lets it time out; two concurrent
//! resolutions have one winner; a non-interactive session is refused at once. The audit row
//! records who decided. Waiting is judged by what the daemon reports, never by sleeping.

use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::harness::{Reply, Toold};
use crate::support::deadline::{OutputWithin, STEP};

const ASK_ECHO: &str = "[permissions]\nask = [\"bash(echo:*)\"]\ndeny = [\"bash(rm:*)\"]\n";

fn start(config: &str, token: Option<&str>) -> Toold {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, config).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let mut flags = vec!["--config", file.as_str()];
    if let Some(token) = token {
        flags.extend(["--auth-token", token]);
    }
    Toold::start_with(dir, &flags)
}

async fn session(toold: &Toold, body: Value) -> String {
    let reply = toold.post("/v1/sessions", &body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

fn echo_batch(call: &str, text: &str) -> Value {
    json!({"calls": [{"id": call, "name": "bash", "input": {"command": format!("echo {text}")}}]})
}

/// Runs `echo TEXT` as call `call` in a batch of its own.
async fn run_echo(toold: &Toold, session: &str, call: &str, text: &str) -> Reply {
    toold
        .post(
            &format!("/v1/sessions/{session}/batches"),
            &echo_batch(call, text),
        )
        .await
}

/// The first pending approval of the session, once there is one (30 s guard).
pub(crate) async fn pending(toold: &Toold, session: &str) -> Value {
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let reply = toold
            .get(&format!("/v1/sessions/{session}/approvals"))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        if let Some(first) = reply.body["approvals"].as_array().and_then(|a| a.first()) {
            return first.clone();
        }
        assert!(
            tokio::time::Instant::now() < deadline,
            "no approval appeared"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// Answers approval `approval` of `session` with `body` (`{"decision": "allow"}`, ...).
pub(crate) async fn resolve(toold: &Toold, session: &str, approval: &str, body: Value) -> Reply {
    toold
        .post(
            &format!("/v1/sessions/{session}/approvals/{approval}"),
            &body,
        )
        .await
}

/// The audit row of `call`.
async fn audit(toold: &Toold, session: &str, call: &str) -> Value {
    let calls = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    calls.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .find(|row| row["call_id"] == call)
        .cloned()
        .unwrap_or_else(|| panic!("no audit row for {call}: {}", calls.body))
}

#[tokio::test]
async fn an_allowed_approval_runs_the_call_and_the_audit_row_names_the_approver() {
    let toold = start(ASK_ECHO, Some("secret-token"));
    let id = session(&toold, json!({"interactive": true})).await;
    let mut events = toold
        .sse(&format!("/v1/sessions/{id}/events"), None, Some(0))
        .await;
    let batch = run_echo(&toold, &id, "c1", "approved");
    let approve = async {
        let approval = pending(&toold, &id).await;
        assert_eq!(approval["call_id"], "c1");
        assert_eq!(approval["tool"], "bash");
        assert_eq!(approval["input"]["command"], "echo approved");
        assert!(
            approval["reason"]
                .as_str()
                .unwrap()
                .contains("bash(echo:*)"),
            "{approval}"
        );
        let approval_id = approval["id"].as_str().unwrap().to_owned();
        let reply = resolve(&toold, &id, &approval_id, json!({"decision": "allow"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        approval_id
    };
    let (reply, approval_id) = tokio::join!(batch, approve);
    let result = &reply.body["results"][0];
    assert_eq!(result["is_error"], false, "{result}");
    assert!(result["output"].as_str().unwrap().contains("approved"));

    let ask = loop {
        let frame = events.next().await.expect("the event stream stays open");
        if frame.event == "permission:ask" {
            break frame;
        }
    };
    assert_eq!(ask.data["data"]["approval_id"], approval_id.as_str());
    assert_eq!(ask.data["call_id"], "c1");

    let row = audit(&toold, &id, "c1").await;
    let decided_by = &row["decision"]["decided_by"];
    assert_eq!(row["decision"]["decision"], "allow", "{row}");
    assert_eq!(decided_by["by"], "approver", "{row}");
    assert_eq!(decided_by["approver"], "http");
    assert_eq!(decided_by["approval_id"], approval_id.as_str());
    let token = decided_by["token"].as_str().unwrap();
    assert!(
        token.starts_with("sha256:") && !token.contains("secret"),
        "{token}"
    );
    assert_eq!(decided_by["asked_by"]["by"], "rule");
    assert_eq!(decided_by["asked_by"]["rule"], "bash(echo:*)");
    assert_eq!(decided_by["asked_by"]["source"], "server");
    let after = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(after.body, json!({"approvals": []}));
}

#[tokio::test]
async fn a_denied_approval_refuses_the_call_with_the_reason() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": true})).await;
    let batch = run_echo(&toold, &id, "c1", "no");
    let deny = async {
        let approval = pending(&toold, &id).await;
        let body = json!({"decision": "deny", "reason": "not on a Friday"});
        let reply = resolve(&toold, &id, approval["id"].as_str().unwrap(), body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    };
    let (reply, ()) = tokio::join!(batch, deny);
    let result = &reply.body["results"][0];
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.starts_with("PermissionDeniedError: ") && output.contains("not on a Friday"),
        "{output}"
    );
    let row = audit(&toold, &id, "c1").await;
    assert_eq!(row["decision"]["decision"], "deny");
    assert_eq!(row["decision"]["decided_by"]["by"], "approver");
    assert_eq!(row["decision"]["decided_by"]["token"], Value::Null);
}

#[tokio::test]
async fn an_unanswered_approval_times_out_as_a_denial() {
    let toold = start(&format!("{ASK_ECHO}approval_timeout_ms = 200\n"), None);
    let id = session(&toold, json!({"interactive": true})).await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &echo_batch("c1", "late"),
        )
        .await;
    let result = &reply.body["results"][0];
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("within 200 ms"),
        "{result}"
    );
    let row = audit(&toold, &id, "c1").await;
    assert_eq!(row["decision"]["decided_by"]["by"], "timeout", "{row}");
    assert_eq!(row["decision"]["decided_by"]["timeout_ms"], 200);
    // The timed-out approval is settled: no longer pending, and resolving it is refused.
    let left = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(left.body, json!({"approvals": []}));
    let approval_id = row["decision"]["decided_by"]["approval_id"]
        .as_str()
        .unwrap();
    let late = resolve(&toold, &id, approval_id, json!({"decision": "allow"})).await;
    assert_eq!(late.status, StatusCode::NOT_FOUND, "{}", late.body);
}

#[tokio::test]
async fn a_non_interactive_session_is_refused_at_once_with_a_clear_reason() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": false})).await;
    let reply = toold
        .post(
            &format!("/v1/sessions/{id}/batches"),
            &echo_batch("c1", "hi"),
        )
        .await;
    let result = &reply.body["results"][0];
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    let output = result["output"].as_str().unwrap();
    assert!(
        output.contains("bash(echo:*)") && output.contains("not interactive"),
        "{output}"
    );
    let pending = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(pending.body, json!({"approvals": []}));
    let row = audit(&toold, &id, "c1").await;
    assert_eq!(row["decision"]["decided_by"]["by"], "rule");
}

#[tokio::test]
async fn of_two_concurrent_resolutions_exactly_one_wins() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": true})).await;
    let batch = run_echo(&toold, &id, "c1", "race");
    let race = async {
        let approval = pending(&toold, &id).await;
        let approval_id = approval["id"].as_str().unwrap();
        let (a, b) = tokio::join!(
            resolve(&toold, &id, approval_id, json!({"decision": "allow"})),
            resolve(&toold, &id, approval_id, json!({"decision": "deny"})),
        );
        (a, b)
    };
    let (reply, (a, b)) = tokio::join!(batch, race);
    let statuses = [a.status, b.status];
    let winners = statuses.iter().filter(|s| **s == StatusCode::OK).count();
    assert_eq!(winners, 1, "{statuses:?} {} {}", a.body, b.body);
    let loser = if a.status == StatusCode::OK { &b } else { &a };
    assert!(
        matches!(loser.status, StatusCode::CONFLICT | StatusCode::NOT_FOUND),
        "{}",
        loser.body
    );
    // The call went the winner's way.
    let allowed = a.status == StatusCode::OK;
    assert_eq!(
        reply.body["results"][0]["is_error"], !allowed,
        "{}",
        reply.body
    );
}

#[tokio::test]
async fn remember_answers_the_same_call_for_the_rest_of_the_session() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": true})).await;
    let batch = run_echo(&toold, &id, "c1", "again");
    let approve = async {
        let approval = pending(&toold, &id).await;
        let body = json!({"decision": "allow", "remember": true});
        let reply = resolve(&toold, &id, approval["id"].as_str().unwrap(), body).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    };
    let (first, ()) = tokio::join!(batch, approve);
    assert_eq!(first.body["results"][0]["is_error"], false);
    // The same line again runs without asking (the guard only stops a hang).
    let second = tokio::time::timeout(
        Duration::from_secs(30),
        toold.post(
            &format!("/v1/sessions/{id}/batches"),
            &echo_batch("c2", "again"),
        ),
    )
    .await
    .expect("the remembered call is not asked about again");
    assert_eq!(
        second.body["results"][0]["is_error"], false,
        "{}",
        second.body
    );
    let row = audit(&toold, &id, "c2").await;
    assert_eq!(
        row["decision"]["decided_by"]["source"], "remembered",
        "{row}"
    );
    assert_eq!(row["decision"]["decided_by"]["rule"], "bash(echo again)");
}

#[tokio::test]
async fn session_rules_narrow_the_servers_and_bad_ones_are_refused() {
    let toold = start(ASK_ECHO, None);
    let widen = json!({"rules": {"allow": ["bash(rm:*)", "Bash"]}, "permission_mode": "danger_full_access"});
    let id = session(&toold, widen).await;
    let batch =
        json!({"calls": [{"id": "c1", "name": "bash", "input": {"command": "rm -f nothing"}}]});
    let reply = toold
        .post(&format!("/v1/sessions/{id}/batches"), &batch)
        .await;
    let result = &reply.body["results"][0];
    assert_eq!(result["error_kind"], "permission_denied", "{result}");
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("server rule \"bash(rm:*)\"")
    );

    let narrow = json!({"rules": {"deny": ["Bash(ls:*)"]}});
    let id = session(&toold, narrow).await;
    let batch = json!({"calls": [{"id": "c1", "name": "bash", "input": {"command": "ls"}}]});
    let reply = toold
        .post(&format!("/v1/sessions/{id}/batches"), &batch)
        .await;
    assert_eq!(reply.body["results"][0]["error_kind"], "permission_denied");
    let row = audit(&toold, &id, "c1").await;
    assert_eq!(row["decision"]["decided_by"]["source"], "session", "{row}");

    let bad = toold
        .post(
            "/v1/sessions",
            &json!({"rules": {"deny": ["reed_file(./x)"]}}),
        )
        .await;
    assert_eq!(bad.status, StatusCode::BAD_REQUEST);
    let message = bad.body["error"]["message"].as_str().unwrap();
    assert!(message.contains("did you mean \"read_file\""), "{message}");
}

#[tokio::test]
async fn a_bad_server_rule_stops_the_start() {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, "[permissions]\ndeny = [\"bash(\"]\n").unwrap();
    let output = super::harness::command(dir.path(), &["--config", file.to_str().unwrap()])
        .output_within(STEP, "toold serve")
        .unwrap();
    assert!(!output.status.success());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("bash(") && stderr.contains("permissions"),
        "{stderr}"
    );
}

#[tokio::test]
async fn an_interrupt_ends_the_wait_and_settles_the_approval() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": true})).await;
    let batch = run_echo(&toold, &id, "c1", "stop");
    let interrupt = async {
        pending(&toold, &id).await;
        let reply = toold
            .post(&format!("/v1/sessions/{id}/interrupt"), &json!({}))
            .await;
        assert_eq!(reply.status, StatusCode::OK);
    };
    let (reply, ()) = tokio::join!(batch, interrupt);
    let output = reply.body["results"][0]["output"].as_str().unwrap();
    assert!(output.contains("cancelled while approval"), "{output}");
    let left = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(left.body, json!({"approvals": []}));
}

#[tokio::test]
async fn approvals_left_pending_by_a_crash_are_denied_after_the_restart() {
    let toold = start(ASK_ECHO, None);
    let id = session(&toold, json!({"interactive": true})).await;
    let url = format!("{}/v1/sessions/{id}/batches", toold.base);
    let client = toold.client.clone();
    // The batch's connection dies with the daemon; its answer does not matter.
    let orphan = tokio::spawn(async move {
        let body = serde_json::to_vec(&echo_batch("c1", "orphan")).unwrap();
        let request = client.post(url).header("content-type", "application/json");
        let _ = request.body(body).send().await;
    });
    let approval = pending(&toold, &id).await;
    let toold = toold.kill_and_restart();
    let _ = orphan.await;
    let left = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(
        left.body,
        json!({"approvals": []}),
        "restored with {approval}"
    );
    let late = resolve(
        &toold,
        &id,
        approval["id"].as_str().unwrap(),
        json!({"decision": "allow"}),
    )
    .await;
    assert_eq!(late.status, StatusCode::NOT_FOUND);
}
