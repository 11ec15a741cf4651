//! [`StdioTransport`] against a scripted server on in-memory pipes.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use rmcp::model::{
    CallToolRequest, CallToolRequestParams, ClientRequest, CustomResult, JsonRpcMessage,
    NumberOrString, PingRequest, ProgressToken, RequestId, ServerResult,
};
use rmcp::service::{RoleClient, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncWriteExt, BufReader, DuplexStream};

use super::{Routes, StdioTransport, leading_id, trailing_id};
use crate::tool::{ProgressSink, ProgressUpdate};

/// The transport, the server's end of its stdout (written by the test) and of its stdin (read
/// by the test, a line at a time). Small pipes, so long lines arrive in many reads.
fn pipes(
    routes: Arc<Routes>,
) -> (
    StdioTransport<DuplexStream, DuplexStream>,
    DuplexStream,
    BufReader<DuplexStream>,
) {
    let (stdout, server_out) = tokio::io::duplex(512);
    let (stdin, server_in) = tokio::io::duplex(64 * 1024);
    (
        StdioTransport::new(stdout, stdin, routes),
        server_out,
        BufReader::new(server_in),
    )
}

async fn line_from(server_in: &mut BufReader<DuplexStream>) -> Value {
    let mut line = String::new();
    tokio::time::timeout(Duration::from_secs(5), server_in.read_line(&mut line))
        .await
        .expect("a line within 5 s")
        .expect("the pipe reads");
    serde_json::from_str(&line).expect("a JSON line")
}

fn call(id: i64) -> TxJsonRpcMessage<RoleClient> {
    let request = CallToolRequest::new(CallToolRequestParams::new("read".to_owned()));
    JsonRpcMessage::request(
        ClientRequest::CallToolRequest(request),
        RequestId::Number(id),
    )
}

async fn answer(
    transport: &mut StdioTransport<DuplexStream, DuplexStream>,
) -> (RequestId, ServerResult) {
    let message = tokio::time::timeout(Duration::from_secs(5), transport.receive())
        .await
        .expect("a message within 5 s")
        .expect("the stream is open");
    message
        .into_response()
        .map(|(result, id)| (id, result))
        .expect("an answer")
}

#[tokio::test]
async fn a_request_is_written_before_its_future_is_polled() {
    let (mut transport, _server_out, mut server_in) = pipes(Arc::default());
    let sending = transport.send(call(1));
    let written = line_from(&mut server_in).await;
    assert_eq!(written["method"], "tools/call");
    assert_eq!(written["id"], 1);
    sending.await.expect("the write succeeded");
}

#[tokio::test]
async fn a_calls_answer_is_its_result_json_and_any_other_answer_is_rmcps() {
    let (mut transport, mut server_out, _server_in) = pipes(Arc::default());
    transport.send(call(1)).await.unwrap();
    let result = json!({
        "content": [{"type": "mystery"}, {"type": "text", "text": "x".repeat(3000)}],
        "structuredContent": {"a": 1}
    });
    // The TypeScript SDK's order (id last), a `\r\n`, after a blank line; then an answer to an
    // id that was never a call, the same shape.
    let lines = format!(
        "\n{}\r\n{}\n",
        json!({"result": result, "jsonrpc": "2.0", "id": 1}),
        json!({"jsonrpc": "2.0", "id": 7, "result": {"content": [{"type": "text", "text": "y"}]}})
    );
    // Written while the transport reads: the pipe holds less than the lines.
    let writer = tokio::spawn(async move { server_out.write_all(lines.as_bytes()).await });
    let (id, first) = answer(&mut transport).await;
    assert_eq!(id, RequestId::Number(1));
    assert!(
        matches!(&first, ServerResult::CustomResult(CustomResult(json)) if *json == result),
        "{first:?}"
    );
    let (id, second) = answer(&mut transport).await;
    assert_eq!(id, RequestId::Number(7));
    assert!(
        matches!(second, ServerResult::CallToolResult(_)),
        "{second:?}"
    );
    writer.await.unwrap().unwrap();
}

#[tokio::test]
async fn a_cancelled_calls_late_answer_is_no_longer_taken_for_a_call() {
    let (mut transport, mut server_out, _server_in) = pipes(Arc::default());
    transport.send(call(4)).await.unwrap();
    let cancel = rmcp::model::CancelledNotification::new(
        rmcp::model::CancelledNotificationParam::new(Some(RequestId::Number(4)), None),
    );
    let notice = JsonRpcMessage::notification(
        rmcp::model::ClientNotification::CancelledNotification(cancel),
    );
    transport.send(notice).await.unwrap();
    let line = json!({"jsonrpc": "2.0", "id": 4, "result": {"content": []}});
    server_out
        .write_all(format!("{line}\n").as_bytes())
        .await
        .unwrap();
    let (_, result) = answer(&mut transport).await;
    assert!(
        matches!(result, ServerResult::CallToolResult(_)),
        "{result:?}"
    );
}

#[tokio::test]
async fn garbage_is_skipped_and_json_that_is_no_message_is_refused() {
    let (mut transport, mut server_out, mut server_in) = pipes(Arc::default());
    let ping = JsonRpcMessage::request(
        ClientRequest::PingRequest(PingRequest::default()),
        RequestId::Number(2),
    );
    transport.send(ping).await.unwrap();
    line_from(&mut server_in).await;
    let lines = "not json\n{\"jsonrpc\":\"2.0\",\"id\":2}\n\u{feff}{\"jsonrpc\":\"2.0\",\"id\":2,\"result\":{}}\n";
    server_out.write_all(lines.as_bytes()).await.unwrap();
    let (id, _) = answer(&mut transport).await;
    assert_eq!(id, RequestId::Number(2));
    let refusal = line_from(&mut server_in).await;
    assert_eq!(refusal["error"]["message"], "Invalid request", "{refusal}");
}

#[tokio::test]
async fn progress_is_delivered_before_the_answer_that_follows_it() {
    let routes = Arc::new(Routes::default());
    let (mut transport, mut server_out, _server_in) = pipes(routes.clone());
    let seen = Arc::new(Mutex::new(Vec::new()));
    let sink = {
        let seen = seen.clone();
        let deliver = move |update: ProgressUpdate| seen.lock().unwrap().push(update.data);
        ProgressSink::new("c0", "t", Arc::new(deliver))
    };
    let token = ProgressToken(NumberOrString::Number(9));
    let _route = routes.route_progress(token, sink);
    transport.send(call(1)).await.unwrap();
    let progress = |n: u32| {
        json!({"jsonrpc": "2.0", "method": "notifications/progress",
               "params": {"progressToken": 9, "progress": n}})
    };
    let answer_line = json!({"jsonrpc": "2.0", "id": 1, "result": {"content": []}});
    let lines = format!("{}\n{}\n{answer_line}\n", progress(1), progress(2));
    server_out.write_all(lines.as_bytes()).await.unwrap();
    loop {
        let message = transport.receive().await.expect("open");
        if message.into_response().is_some() {
            break;
        }
    }
    let seen = seen.lock().unwrap();
    let progress: Vec<&Value> = seen.iter().map(|report| &report["progress"]).collect();
    assert_eq!(progress, [&json!(1.0), &json!(2.0)]);
}

#[tokio::test]
async fn an_oversized_answer_is_dropped_and_its_call_told_from_either_end() {
    let routes = Arc::new(Routes::default());
    let (transport, mut server_out, _server_in) = pipes(routes.clone());
    let mut transport = transport.with_max_bytes(1000);
    let text = "x".repeat(5000);
    // rmcp's order (id first), then the TypeScript SDK's (id last), then one that fits.
    let content = format!(r#"{{"content":[{{"type":"text","text":"{text}"}}]}}"#);
    let lines = format!(
        "{{\"jsonrpc\":\"2.0\",\"id\":3,\"result\":{content}}}\n\
         {{\"result\":{content},\"jsonrpc\":\"2.0\",\"id\":\"r-4\"}}\n\
         {{\"jsonrpc\":\"2.0\",\"id\":5,\"result\":{{\"content\":[]}}}}\n"
    );
    let writer = tokio::spawn(async move {
        server_out.write_all(lines.as_bytes()).await.unwrap();
        server_out
    });
    let (id, _) = answer(&mut transport).await;
    assert_eq!(id, RequestId::Number(5));
    assert_eq!(
        routes.oversized.load(std::sync::atomic::Ordering::Acquire),
        2
    );
    assert!(routes.take_oversized("3"));
    assert!(routes.take_oversized("\"r-4\""));
    assert!(!routes.take_oversized("5"));
    drop(writer.await);
}

#[test]
fn an_answers_id_is_read_from_its_start_or_its_end() {
    let lead = |text: &str| leading_id(text.as_bytes());
    assert_eq!(
        lead(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"#).as_deref(),
        Some("7")
    );
    assert_eq!(
        lead(r#"{"id": "a-1", "jsonrpc":"2.0","result":"#).as_deref(),
        Some("\"a-1\"")
    );
    assert_eq!(lead(r#"{"jsonrpc":"2.0","result":{"id":3,"#), None);
    assert_eq!(lead(r#"{"jsonrpc":"2.0","method":"notifications/x""#), None);
    assert_eq!(
        lead(r#"{"jsonrpc":"2.0","id":12"#),
        None,
        "the number may go on"
    );
    let trail = |text: &str| trailing_id(text.as_bytes());
    assert_eq!(
        trail("xxx\"}]},\"jsonrpc\":\"2.0\",\"id\":2}\n").as_deref(),
        Some("2")
    );
    assert_eq!(
        trail("x\"},\"jsonrpc\":\"2.0\",\"id\":\"r-9\"}").as_deref(),
        Some("\"r-9\"")
    );
    assert_eq!(trail("\"text\":\"xxxx\"}]}}"), None);
    assert_eq!(trail("\"id\":{\"a\":1}}"), None);
}
