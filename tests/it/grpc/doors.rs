//! The gRPC door beside the HTTP one on the same listener: bearer auth from metadata, the
//! client's deadline (`grpc-timeout`), `grpc.health.v1`, reflection (v1 and v1alpha), and
//! HTTP/1.1 still answering.

use std::time::{Duration, Instant};

use tokio_stream::StreamExt;
use tonic::Code;
use tonic::metadata::MetadataValue;
use tonic_health::pb::health_check_response::ServingStatus;
use tonic_health::pb::{HealthCheckRequest, health_client::HealthClient};
use tonic_reflection::pb::{v1, v1alpha};
use toold::api::grpc::proto;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;

use crate::grpc::harness::{Toold, call};

fn with_token<T>(message: T, token: &str) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    request.metadata_mut().insert(
        "authorization",
        MetadataValue::try_from(format!("Bearer {token}")).unwrap(),
    );
    request
}

#[tokio::test]
async fn bearer_tokens_guard_every_rpc_but_health() {
    let toold = Toold::start_with(&["--auth-token", "s3cret"]);
    let mut client = ToolServiceClient::new(toold.channel().await);
    let missing = client
        .create_session(proto::CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::Unauthenticated, "{missing:?}");
    let wrong = client
        .create_session(with_token(proto::CreateSessionRequest::default(), "guess"))
        .await
        .unwrap_err();
    assert_eq!(wrong.code(), Code::Unauthenticated);
    let subscribe = client
        .subscribe(proto::SubscribeRequest::default())
        .await
        .unwrap_err();
    assert_eq!(subscribe.code(), Code::Unauthenticated);
    let session = client
        .create_session(with_token(proto::CreateSessionRequest::default(), "s3cret"))
        .await
        .expect("the right token is accepted")
        .into_inner();
    assert!(session.id.starts_with("sess_"));

    let mut health = HealthClient::new(toold.channel().await);
    let serving = health
        .check(HealthCheckRequest {
            service: String::new(),
        })
        .await
        .expect("health needs no token")
        .into_inner();
    assert_eq!(serving.status, ServingStatus::Serving as i32);
}

#[tokio::test]
async fn a_clients_deadline_ends_its_call_with_deadline_exceeded() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    // Over raw HTTP/2: tonic's and grpcio's channels enforce a deadline themselves (they give
    // up at it with CANCELLED), so only a bare request shows what the server does with one.
    let batch = proto::ExecuteBatchRequest {
        session_id: session,
        calls: vec![call(
            "slow",
            "bash",
            serde_json::json!({"command": "sleep 30"}),
        )],
        idempotency_key: String::new(),
    };
    let started = Instant::now();
    let (code, message) = raw_unary(
        &toold,
        "/toold.v1.ToolService/ExecuteBatch",
        &[("grpc-timeout", "300m")],
        prost::Message::encode_to_vec(&batch),
    )
    .await;
    assert_eq!(code, Code::DeadlineExceeded as i32, "{message}");
    assert!(message.contains("grpc-timeout"), "{message}");
    assert!(
        started.elapsed() < Duration::from_secs(20),
        "answered at the deadline, not after the call: {:?}",
        started.elapsed()
    );
}

/// Sends one unary gRPC request over a bare HTTP/2 connection; the `grpc-status` and
/// `grpc-message` of the answer (from its trailers, or its headers when it has no body).
async fn raw_unary(
    toold: &Toold,
    path: &str,
    headers: &[(&str, &str)],
    message: Vec<u8>,
) -> (i32, String) {
    let address = toold.base.strip_prefix("http://").unwrap();
    let tcp = tokio::net::TcpStream::connect(address).await.unwrap();
    let (h2, connection) = h2::client::handshake(tcp).await.unwrap();
    tokio::spawn(connection);
    let mut h2 = h2.ready().await.unwrap();
    let mut request = axum::http::Request::post(format!("{}{path}", toold.base))
        .header("content-type", "application/grpc")
        .header("te", "trailers");
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    let (answer, mut body) = h2.send_request(request.body(()).unwrap(), false).unwrap();
    // The gRPC frame: not compressed, then the length (big-endian), then the message.
    let mut frame = vec![0u8];
    frame.extend_from_slice(&u32::try_from(message.len()).unwrap().to_be_bytes());
    frame.extend_from_slice(&message);
    body.send_data(frame.into(), true).unwrap();
    let answer = answer.await.unwrap();
    let (head, mut received) = answer.into_parts();
    let status_of = |headers: &axum::http::HeaderMap| {
        let code = headers.get("grpc-status")?.to_str().ok()?.parse().ok()?;
        let message = headers
            .get("grpc-message")
            .map(|m| m.to_str().unwrap_or_default().to_owned())
            .unwrap_or_default();
        Some((code, message))
    };
    if let Some(status) = status_of(&head.headers) {
        return status;
    }
    while let Some(data) = received.data().await {
        data.unwrap();
    }
    let trailers = received.trailers().await.unwrap().expect("trailers");
    status_of(&trailers).expect("a grpc-status")
}

#[tokio::test]
async fn a_malformed_grpc_timeout_is_invalid_argument_naming_it() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let mut request = tonic::Request::new(proto::CreateSessionRequest::default());
    request
        .metadata_mut()
        .insert("grpc-timeout", MetadataValue::from_static("soon"));
    let status = client.create_session(request).await.unwrap_err();
    assert_eq!(status.code(), Code::InvalidArgument, "{status:?}");
    assert!(status.message().contains("\"soon\""), "{status:?}");
    // The daemon stays up.
    toold.session(&mut client).await;
}

#[tokio::test]
async fn health_reports_the_tool_service_and_unknown_services_are_not_found() {
    let toold = Toold::start();
    let mut health = HealthClient::new(toold.channel().await);
    let ours = health
        .check(HealthCheckRequest {
            service: "toold.v1.ToolService".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ours.status, ServingStatus::Serving as i32);
    let unknown = health
        .check(HealthCheckRequest {
            service: "nope.v1.Nothing".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
}

#[tokio::test]
async fn reflection_lists_the_services_in_both_versions() {
    let toold = Toold::start();
    let mut v1_client =
        v1::server_reflection_client::ServerReflectionClient::new(toold.channel().await);
    let request = v1::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(v1::server_reflection_request::MessageRequest::ListServices(
            String::new(),
        )),
    };
    let mut answers = v1_client
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "a reflection answer",
        answers.next(),
    )
    .await
    .unwrap()
    .unwrap();
    let Some(v1::server_reflection_response::MessageResponse::ListServicesResponse(list)) =
        answer.message_response
    else {
        panic!("a service list: {answer:?}");
    };
    let names: Vec<String> = list.service.into_iter().map(|s| s.name).collect();
    for name in ["toold.v1.ToolService", "grpc.health.v1.Health"] {
        assert!(names.iter().any(|n| n == name), "{names:?}");
    }

    let mut alpha =
        v1alpha::server_reflection_client::ServerReflectionClient::new(toold.channel().await);
    let request = v1alpha::ServerReflectionRequest {
        host: String::new(),
        message_request: Some(
            v1alpha::server_reflection_request::MessageRequest::FileContainingSymbol(
                "toold.v1.ToolService".into(),
            ),
        ),
    };
    let mut answers = alpha
        .server_reflection_info(tokio_stream::iter([request]))
        .await
        .unwrap()
        .into_inner();
    let answer = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "a reflection answer",
        answers.next(),
    )
    .await
    .unwrap()
    .unwrap();
    let Some(v1alpha::server_reflection_response::MessageResponse::FileDescriptorResponse(files)) =
        answer.message_response
    else {
        panic!("the file descriptor: {answer:?}");
    };
    assert!(!files.file_descriptor_proto.is_empty());
}

#[tokio::test]
async fn grpc_requests_are_counted_by_method_and_status() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    toold.session(&mut client).await;
    let unknown = client
        .execute_batch(proto::ExecuteBatchRequest {
            session_id: "sess_nope".into(),
            calls: vec![call(
                "c",
                "read_file",
                serde_json::json!({"file_path": "x"}),
            )],
            idempotency_key: String::new(),
        })
        .await
        .unwrap_err();
    assert_eq!(unknown.code(), Code::NotFound);
    let (code, _) = raw_unary(&toold, "/toold.v1.ToolService/MadeUp", &[], Vec::new()).await;
    assert_eq!(code, Code::Unimplemented as i32);
    let text = reqwest::get(format!("{}/metrics", toold.base))
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    for line in [
        r#"toold_grpc_requests_total{method="/toold.v1.ToolService/CreateSession",code="OK"} 1"#,
        r#"toold_grpc_requests_total{method="/toold.v1.ToolService/ExecuteBatch",code="NotFound"} 1"#,
        r#"toold_grpc_requests_total{method="unknown",code="Unimplemented"} 1"#,
    ] {
        assert!(text.contains(line), "{line} in:\n{text}");
    }
    assert!(!text.contains("MadeUp"), "{text}");
}

#[tokio::test]
async fn http_1_1_still_answers_on_the_same_listener() {
    let toold = Toold::start();
    let client = reqwest::Client::builder().http1_only().build().unwrap();
    let health = client
        .get(format!("{}/healthz", toold.base))
        .send()
        .await
        .unwrap();
    assert_eq!(health.status(), 200);
    let created = client
        .post(format!("{}/v1/sessions", toold.base))
        .header("content-type", "application/json")
        .body("{}")
        .send()
        .await
        .unwrap();
    assert_eq!(created.status(), 201);
    // A session made over HTTP is usable over gRPC: one core behind both doors.
    let body: serde_json::Value = serde_json::from_slice(&created.bytes().await.unwrap()).unwrap();
    let id = body["id"].as_str().unwrap().to_owned();
    let mut grpc = toold.client().await;
    let tools = grpc
        .list_tools(proto::ListToolsRequest {
            session_id: id,
            format: "mcp".into(),
        })
        .await
        .unwrap()
        .into_inner();
    assert!(tools.tools_json.contains("inputSchema"));
}
