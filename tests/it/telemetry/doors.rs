//! The other doors' incoming context, exported to a real gRPC receiver: a `traceparent` in a
//! gRPC call's metadata parents the RPC's span, and one in an MCP `tools/call`'s
//! `params._meta` parents the call's `tools/call` span; the calls below them run in that
//! trace, and their audit rows keep it. With `[telemetry] capture_content` the call's span
//! carries its input and output, cut to the limit.

use std::sync::Arc;

use serde_json::json;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{self, ToolCall};

use super::receiver::{Protocol, Receiver, attribute, children, find};
use super::traces::traceparent;
use crate::http::harness::Toold;
use crate::mcp::{McpClient, audit_rows};

const GRPC_TRACE: &str = "0af7651916cd43dd8448eb211c80319c";
const GRPC_PARENT: &str = "b7ad6b7169203331";
const MCP_TRACE: &str = "5c3e9f1a2b4d6e8f0a1b2c3d4e5f6a7b";
const MCP_PARENT: &str = "1111222233334444";

#[tokio::test]
async fn grpc_metadata_and_mcp_meta_parent_their_requests() {
    let receiver = Receiver::start(Protocol::Grpc).await;
    let env = receiver.env();
    let env: Vec<(&str, &str)> = env.iter().map(|(k, v)| (*k, v.as_str())).collect();
    // Content captured here (cut to 8 bytes), to show what `capture_content` puts in spans.
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(
        &file,
        "[telemetry]\ncapture_content = true\ncontent_limit_bytes = 8\n",
    )
    .unwrap();
    let file = file.to_str().unwrap().to_owned();
    let toold = Toold::start_with_env(dir, &["--config", &file], &env);

    // gRPC: the parent in the call's metadata.
    let channel = tonic::transport::Channel::from_shared(toold.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    let mut client = ToolServiceClient::new(channel);
    let session = client
        .create_session(proto::CreateSessionRequest::default())
        .await
        .unwrap()
        .into_inner()
        .id;
    let mut request = tonic::Request::new(proto::ExecuteBatchRequest {
        session_id: session.clone(),
        calls: vec![ToolCall {
            id: "g1".into(),
            name: "glob_search".into(),
            input_json: json!({"pattern": "*"}).to_string(),
        }],
        idempotency_key: String::new(),
    });
    request.metadata_mut().insert(
        "traceparent",
        traceparent(GRPC_TRACE, GRPC_PARENT).parse().unwrap(),
    );
    let answer = client.execute_batch(request).await.unwrap().into_inner();
    assert!(!answer.results[0].is_error, "{answer:?}");
    let rows = audit_rows(&toold, &session).await;
    assert_eq!(rows[0]["trace_id"], GRPC_TRACE, "{rows:?}");

    // MCP: the parent in `params._meta` (a stateless request, in the default session).
    let mut mcp = McpClient::new(&toold, "/mcp");
    let params = json!({
        "name": "glob_search",
        "arguments": {"pattern": "*"},
        "_meta": {"traceparent": traceparent(MCP_TRACE, MCP_PARENT)},
    });
    let called = mcp.call_tool_with("glob_search", params).await;
    assert_eq!(called.result()["isError"], false, "{}", called.text);
    let sessions = toold.get("/v1/sessions").await.body["sessions"].clone();
    let default = sessions
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["id"].as_str().unwrap().to_owned())
        .find(|id| *id != session)
        .expect("the MCP caller's default session");
    let rows = audit_rows(&toold, &default).await;
    assert_eq!(rows[0]["trace_id"], MCP_TRACE, "{rows:?}");

    // Off the test's runtime thread: the receiver runs on it while the daemon flushes.
    let stopped = tokio::task::spawn_blocking(move || toold.terminate())
        .await
        .unwrap();
    assert!(stopped.success());
    let spans = receiver
        .spans_until(|spans| spans.iter().filter(|s| s.name == "batch").count() >= 2)
        .await;

    let rpc = find(&spans, "/toold.v1.ToolService/ExecuteBatch", None);
    assert_eq!(
        (rpc.trace_id.as_str(), rpc.parent_span_id.as_str()),
        (GRPC_TRACE, GRPC_PARENT)
    );
    assert_eq!(attribute(rpc, "rpc.system").as_deref(), Some("grpc"));
    let below = children(&spans, rpc);
    let batch = find(&below, "batch", None);
    find(&children(&spans, batch), "execute_tool glob_search", None);

    let call = find(&spans, "tools/call glob_search", None);
    assert_eq!(
        (call.trace_id.as_str(), call.parent_span_id.as_str()),
        (MCP_TRACE, MCP_PARENT)
    );
    let below = children(&spans, call);
    let batch = find(&below, "batch", None);
    let tools = children(&spans, batch);
    let tool = find(&tools, "execute_tool glob_search", None);
    assert_eq!(
        attribute(tool, "gen_ai.tool.call.arguments").as_deref(),
        Some(r#"{\"patter…"#)
    );
    let result = attribute(tool, "gen_ai.tool.call.result").unwrap();
    assert!(
        result.ends_with('…') && result.len() <= 8 + '…'.len_utf8(),
        "{result}"
    );
    assert_eq!(
        attribute(tool, "gen_ai.tool.call.id"),
        rows[0]["call_id"].as_str().map(str::to_owned)
    );
}
