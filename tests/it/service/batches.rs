//! Batches in every shape, bad envelopes, idempotent retries, streaming, interrupts, the
//! audit log and offloaded results.

use super::harness::admin;
use serde_json::{Value, json};
use toold::registry::calls::BatchRequest;
use toold::service::{BatchItem, Closed, ErrorCode, StreamDetail, StreamRequest};
use toold::store::{BatchClaim, BatchRecord, BatchStatus};

use crate::service::harness::*;

#[tokio::test]
async fn each_shape_is_answered_in_its_own_shape_in_order() {
    let daemon = Daemon::start().await;
    let session = daemon.session(json!({})).await;
    write(&session.working_directory.join("a.txt"), "alpha\n");
    let read = json!({"file_path": "a.txt"});

    let toold = daemon
        .batch(
            &session.id,
            calls(json!([
            {"id": "1", "name": "read_file", "input": read},
            {"id": "2", "name": "Read", "input": read},
            {"id": "3", "name": "nope", "input": {}}])),
        )
        .await;
    let ids: Vec<&str> = toold["results"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, ["1", "2", "3"]);
    assert!(toold["batch_id"].as_str().unwrap().starts_with("batch_"));
    assert_eq!(toold["results"][2]["error_kind"], "unknown_tool");

    let anthropic = daemon
        .batch(
            &session.id,
            json!({"format": "anthropic", "content": [
            {"type": "text", "text": "reading"},
            {"type": "tool_use", "id": "toolu_1", "name": "read_file", "input": read}]}),
        )
        .await;
    assert_eq!(anthropic["role"], "user");
    assert_eq!(anthropic["content"][0]["tool_use_id"], "toolu_1");
    assert!(
        anthropic["content"][0]["content"]
            .as_str()
            .unwrap()
            .contains("alpha")
    );

    let openai = daemon
        .batch(&session.id, json!({"format": "openai", "output": [
            {"type": "function_call", "call_id": "call_1", "name": "read_file",
             "arguments": "{\"file_path\":\"a.txt\"}"},
            {"type": "function_call", "call_id": "call_2", "name": "read_file", "arguments": "{bad"}]}))
        .await;
    assert_eq!(openai["input"][0]["type"], "function_call_output");
    assert!(
        openai["input"][1]["output"]
            .as_str()
            .unwrap()
            .starts_with("InputValidationError: ")
    );

    let chat = daemon
        .batch(
            &session.id,
            json!({"format": "openai_chat", "message": {"role": "assistant",
            "tool_calls": [{"id": "c1", "type": "function",
                "function": {"name": "read_file", "arguments": "{\"file_path\":\"a.txt\"}"}}]}}),
        )
        .await;
    assert_eq!(chat["messages"][0]["role"], "tool");
    assert_eq!(chat["messages"][0]["tool_call_id"], "c1");
}

#[tokio::test]
async fn broken_envelopes_and_unknown_sessions_are_refused_whole() {
    let daemon = Daemon::start().await;
    let session = daemon.session(json!({})).await;
    let cases: [(Value, ErrorCode); 4] = [
        (json!({"calls": "x"}), ErrorCode::InvalidRequest),
        (json!({"format": "gemini"}), ErrorCode::InvalidRequest),
        (json!([1]), ErrorCode::InvalidRequest),
        (
            json!({"calls": [{"id": "a", "name": "sleep"}, {"id": "a", "name": "sleep"}]}),
            ErrorCode::Conflict,
        ),
    ];
    for (body, code) in cases {
        let err = daemon
            .service
            .execute_body(&session.id, &body)
            .await
            .unwrap_err();
        assert_eq!(err.code, code, "{body}: {}", err.message);
    }
    let err = daemon
        .service
        .execute_body("sess_nope", &calls(json!([])))
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::NotFound);
    assert_eq!(
        daemon
            .service
            .list_calls(&admin(), &session.id, None, 10, Closed::Readable)
            .await
            .unwrap()
            .rows
            .len(),
        0
    );
}

#[tokio::test]
async fn an_idempotent_retry_runs_nothing_again() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    let body = json!({"idempotency_key": "k1", "calls": [
        {"id": "w", "name": "bash", "input": {"command": "echo run >> log.txt"}}]});
    let first = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap();
    assert!(!first.replayed);
    let second = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap();
    assert!(second.replayed);
    assert_eq!(second.batch_id, first.batch_id);
    assert_eq!(second.body, first.body);
    let log = std::fs::read_to_string(session.working_directory.join("log.txt")).unwrap();
    assert_eq!(log, "run\n", "the command ran once");

    let different = json!({"idempotency_key": "k1", "calls": [
        {"id": "w", "name": "bash", "input": {"command": "echo other >> log.txt"}}]});
    let err = daemon
        .service
        .execute_body(&session.id, &different)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Conflict);
    assert!(err.message.contains("k1"), "{}", err.message);

    let stored = daemon
        .service
        .get_batch(&admin(), &session.id, &first.batch_id)
        .await
        .map(|view| serde_json::to_value(view).unwrap())
        .unwrap();
    assert_eq!(stored["status"], "completed");
    assert_eq!(stored["results"][0]["id"], "w");
    let missing = daemon
        .service
        .get_batch(&admin(), &session.id, "batch_nope")
        .await
        .unwrap_err();
    assert_eq!(missing.code, ErrorCode::NotFound);
}

#[tokio::test]
async fn a_keyed_batch_whose_completion_fails_is_released_and_a_retry_runs_it() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    // The store's own file, refusing any completion: a real failure of the commit.
    let database = rusqlite::Connection::open(daemon.data.join("toold.db")).unwrap();
    database
        .busy_timeout(std::time::Duration::from_secs(10))
        .unwrap();
    database
        .execute_batch(
            "CREATE TRIGGER refuse_completion BEFORE UPDATE ON batches \
             WHEN NEW.status = 'completed' \
             BEGIN SELECT RAISE(ABORT, 'completion refused by the test'); END;",
        )
        .unwrap();
    let body = json!({"idempotency_key": "k-fail", "calls": [
        {"id": "w", "name": "bash", "input": {"command": "echo run >> log.txt"}}]});
    let err = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap_err();
    assert_eq!(err.code, ErrorCode::Internal);
    assert!(
        err.message.contains("completion refused by the test") && err.message.contains("retry"),
        "{}",
        err.message
    );
    let running: i64 = database
        .query_row(
            "SELECT count(*) FROM batches WHERE status = 'running'",
            [],
            |row| row.get(0),
        )
        .unwrap();
    assert_eq!(running, 0, "no batch is left running");

    database
        .execute_batch("DROP TRIGGER refuse_completion")
        .unwrap();
    let retried = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .expect("a retry with the key runs");
    assert!(!retried.replayed);
    let log = std::fs::read_to_string(session.working_directory.join("log.txt")).unwrap();
    assert_eq!(log, "run\nrun\n", "the retry ran the batch again");
    let replayed = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap();
    assert!(replayed.replayed, "once completed, the key replays");
}

/// What a `kill -9` within ~10 ms of a keyed batch's start leaves (the crash loop,
/// `tests/it/crash/`, found it): the batch claimed, stored `running`, and not one audit row
/// or `tool:queued` event, so the restart marks nothing interrupted.
#[tokio::test]
async fn a_keyed_batch_cut_off_before_any_row_is_settled_by_its_retry_and_never_runs() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    let body = json!({"idempotency_key": "k-cut", "calls": [
        {"id": "a", "name": "bash", "input": {"command": "echo run >> log.txt"}},
        {"id": "b", "name": "read_file", "input": {"file_path": "log.txt"}}]});
    let request = BatchRequest::from_json(&body).unwrap();
    let idempotency = request.idempotency.clone().unwrap();
    let claimed = daemon
        .store
        .claim_batch(&BatchRecord {
            batch_id: "batch_cut".into(),
            session_id: session.id.clone(),
            format: request.format,
            idempotency_key: Some(idempotency.key),
            request_hash: idempotency.request_hash,
            status: BatchStatus::Running,
            call_count: 2,
            results: None,
            created_at: std::time::SystemTime::now(),
            completed_at: None,
        })
        .await
        .unwrap();
    assert!(matches!(claimed, BatchClaim::New));
    let daemon = daemon.restart().await;
    let read = |daemon: &Daemon| {
        let service = daemon.service.clone();
        let id = session.id.clone();
        async move {
            let view = service.get_batch(&admin(), &id, "batch_cut").await.unwrap();
            serde_json::to_value(view).unwrap()
        }
    };
    assert_eq!(
        read(&daemon).await["status"],
        "cut_off",
        "not `running` for ever"
    );

    let retry = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap();
    assert!(retry.replayed);
    assert_eq!(retry.batch_id, "batch_cut");
    for (result, id) in retry.body["results"]
        .as_array()
        .unwrap()
        .iter()
        .zip(["a", "b"])
    {
        assert_eq!(result["id"], id);
        assert_eq!(result["error_kind"], "cancelled", "{result}");
    }
    assert!(
        !session.working_directory.join("log.txt").exists(),
        "a keyed batch runs at most once"
    );
    let rows = daemon
        .service
        .batch_calls(&admin(), &session.id, "batch_cut", Closed::Readable)
        .await
        .unwrap();
    let audited: Vec<(&str, Option<&str>)> = rows
        .iter()
        .map(|row| {
            (
                row.record.call_id.as_str(),
                row.record.cancelled_by.as_deref(),
            )
        })
        .collect();
    assert_eq!(
        audited,
        [("a", Some("daemon_stopped")), ("b", Some("daemon_stopped"))]
    );
    let stored = read(&daemon).await;
    assert_eq!(stored["status"], "completed");
    assert_eq!(stored["results"], retry.body["results"]);
    let again = daemon
        .service
        .execute_body(&session.id, &body)
        .await
        .unwrap();
    assert_eq!(again.body, retry.body, "every later retry replays the same");
}

#[tokio::test]
async fn a_streamed_batch_passes_results_on_in_order() {
    let daemon = Daemon::start().await;
    let session = daemon.session(json!({})).await;
    let body = calls(json!([
        {"id": "a", "name": "sleep", "input": {"duration_ms": 30}},
        {"id": "b", "name": "todo_write", "input": {"todos": []}}]));
    let request = StreamRequest::known(
        BatchRequest::from_json(&body).unwrap(),
        StreamDetail::Progress,
    );
    let mut stream = daemon
        .service
        .execute_stream(&admin(), &session.id, request)
        .await
        .unwrap();
    let mut ids = Vec::new();
    while let Some(item) = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the stream's next item",
        stream.items.recv(),
    )
    .await
    {
        if let BatchItem::Result(result) = item {
            ids.push(result.id);
        }
    }
    assert_eq!(ids, ["a", "b"]);
    // Recorded once the stream is done.
    let mut status = Value::Null;
    for _ in 0..100 {
        status = daemon
            .service
            .get_batch(&admin(), &session.id, &stream.batch_id)
            .await
            .map(|view| serde_json::to_value(view).unwrap())
            .unwrap()["status"]
            .clone();
        if status == "completed" {
            break;
        }
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
    }
    assert_eq!(status, "completed");
}

#[tokio::test]
async fn an_interrupt_cancels_a_running_sleep() {
    let daemon = Daemon::start().await;
    let session = daemon.session(json!({})).await;
    let running = daemon.running_sleep(&session.id).await;
    daemon.service.interrupt(&admin(), &session.id).unwrap();
    let body = running.await.unwrap().unwrap().json();
    assert_eq!(body["results"][0]["error_kind"], "cancelled", "{body}");
    assert_eq!(
        daemon
            .service
            .interrupt(&admin(), "sess_nope")
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
}

#[tokio::test]
async fn offloaded_output_and_the_audit_log_read_back() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    let body = daemon
        .batch(
            &session.id,
            calls(json!([
            {"id": "big", "name": "bash", "input": {"command": "seq 1 20000"}}])),
        )
        .await;
    let offloaded = &body["results"][0]["offloaded"];
    let result_id = offloaded["result_id"].as_str().expect("offloaded");
    let total = offloaded["total_chars"].as_u64().unwrap();
    let mut whole = String::new();
    let mut offset = 0;
    while offset < total {
        let page = daemon
            .service
            .read_result(&admin(), result_id, offset, 10_000)
            .await
            .unwrap();
        offset += page.content.chars().count() as u64;
        whole.push_str(&page.content);
    }
    let expected: String = (1..=20000).map(|n| format!("{n}\n")).collect();
    assert!(
        whole.starts_with(&expected),
        "the stored output is the whole output"
    );
    let unknown = daemon
        .service
        .read_result(&admin(), "res_nope", 0, 10)
        .await
        .unwrap_err();
    assert_eq!(unknown.code, ErrorCode::NotFound);

    for i in 0..5 {
        daemon
            .batch(
                &session.id,
                calls(
                    json!([{"id": format!("t{i}"), "name": "todo_write", "input": {"todos": []}}]),
                ),
            )
            .await;
    }
    let first = daemon
        .service
        .list_calls(&admin(), &session.id, None, 4, Closed::Readable)
        .await
        .unwrap();
    assert_eq!(first.rows.len(), 4);
    let rest = daemon
        .service
        .list_calls(
            &admin(),
            &session.id,
            first.next_cursor,
            4,
            Closed::Readable,
        )
        .await
        .unwrap();
    assert_eq!(rest.rows.len(), 2);
    assert!(rest.next_cursor.is_none());
    let ids: Vec<&str> = first
        .rows
        .iter()
        .chain(&rest.rows)
        .map(|r| r.record.call_id.as_str())
        .collect();
    assert_eq!(ids, ["big", "t0", "t1", "t2", "t3", "t4"]);
}
