//! A provided tool's cost (issue 22): the single-call p50 of a provided tool that answers at
//! once (`bench__instant`, served by a gRPC provider in this process, on a thread and runtime
//! of its own so that answering does not share the client's thread) beside a built-in
//! `read_file` of the 4 KiB fixture, both through the HTTP batch door of one daemon, in
//! alternating rounds over the same client. Budget: at most 200 µs more at p50.
//!
//! `TOOLD_BENCH_ONLY=providers` runs only this; `TOOLD_BENCH_QUICK=1` runs a few calls only
//! (to check the bench works, not to measure).

use std::time::Duration;

use futures::StreamExt;
use serde_json::json;
use tonic::transport::Channel;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{
    InvokeResult, ProvideToolsRequest, ProvidedToolSpec, ProviderRegistration,
    provide_tools_request, provide_tools_response,
};

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{
    FILE_NAME, ROUND, ROUNDS, WARM_UP, batch, fixture_dir, percentiles, projects_in, us, verdict,
};

const EXTRA_BUDGET: Duration = Duration::from_micros(200);

/// Connects a provider named `bench` with one tool, `instant`, answering every invocation at
/// once with `ok`, on a thread of its own; returns once it is registered.
fn provide(address: std::net::SocketAddr) {
    let (ready, registered) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("provider runtime");
        runtime.block_on(async move {
            let channel = Channel::from_shared(format!("http://{address}"))
                .expect("a valid address")
                .connect()
                .await
                .expect("gRPC connects");
            let mut client = ToolServiceClient::new(channel);
            let (answers, outgoing) = tokio::sync::mpsc::unbounded_channel();
            let register = ProvideToolsRequest {
                kind: Some(provide_tools_request::Kind::Register(
                    ProviderRegistration {
                        provider: "bench".into(),
                        tools: vec![ProvidedToolSpec {
                            name: "instant".into(),
                            description: "Answers at once.".into(),
                            read_only: true,
                            concurrency_safe: true,
                            destructive: Some(false),
                            required_permission: "read_only".into(),
                            ..ProvidedToolSpec::default()
                        }],
                        global: false,
                    },
                )),
            };
            let requests = futures::stream::once(async { register }).chain(
                tokio_stream::wrappers::UnboundedReceiverStream::new(outgoing),
            );
            let mut responses = client
                .provide_tools(requests)
                .await
                .expect("registered")
                .into_inner();
            while let Ok(Some(message)) = responses.message().await {
                match message.kind {
                    Some(provide_tools_response::Kind::Registered(_)) => {
                        let _ = ready.send(());
                    }
                    Some(provide_tools_response::Kind::Invoke(invoke)) => {
                        let _ = answers.send(ProvideToolsRequest {
                            kind: Some(provide_tools_request::Kind::Result(InvokeResult {
                                invocation_id: invoke.invocation_id,
                                output: "ok".into(),
                                is_error: false,
                            })),
                        });
                    }
                    _ => {}
                }
            }
        });
    });
    registered
        .recv_timeout(Duration::from_secs(30))
        .expect("the provider registered");
}

/// Prints the provided tool's p50 beside `read_file`'s.
pub async fn measure() {
    let quick = std::env::var("TOOLD_BENCH_QUICK").is_ok_and(|q| q == "1");
    let (warm_up, rounds, round) = if quick {
        (20, 2, 50)
    } else {
        (WARM_UP, ROUNDS, ROUND)
    };
    let dir = fixture_dir();
    let daemon = Daemon::start(dir.path()).await;
    let projects = projects_in(dir.path());
    provide(daemon.address);
    let mut connection = Connection::open(daemon.address).await.expect("connects");
    let created = connection
        .send(&PreparedRequest::post_json(
            daemon.address,
            "/v1/sessions",
            &json!({"working_directory": projects, "permission_mode": "read_only", "providers": ["bench"]}),
        ))
        .await
        .expect("session created");
    assert_eq!(created.status, 201, "{}", created.json());
    let session = created.json()["id"]
        .as_str()
        .expect("session id")
        .to_owned();
    let path = format!("/v1/sessions/{session}/batches");
    let built_in = PreparedRequest::post_json(daemon.address, &path, &batch(1));
    let provided = PreparedRequest::post_json(
        daemon.address,
        &path,
        &json!({"calls": [{"id": "c0", "name": "bench__instant", "input": {}}]}),
    );
    let answer = connection.send(&provided).await.expect("a response").json();
    assert_eq!(answer["results"][0]["output"], "ok", "{answer}");
    super::time_requests(&mut connection, &built_in, warm_up).await;
    super::time_requests(&mut connection, &provided, warm_up).await;
    let (mut read_samples, mut provided_samples) = (Vec::new(), Vec::new());
    for _ in 0..rounds {
        read_samples.extend(super::time_requests(&mut connection, &built_in, round).await);
        provided_samples.extend(super::time_requests(&mut connection, &provided, round).await);
    }
    let (read_p50, read_p99) = percentiles(&mut read_samples);
    let (provided_p50, provided_p99) = percentiles(&mut provided_samples);
    let extra = provided_p50.saturating_sub(read_p50);
    println!(
        "read_file ({FILE_NAME}): p50 {:.1} µs, p99 {:.1} µs ({} calls, HTTP batch)",
        us(read_p50),
        us(read_p99),
        read_samples.len()
    );
    println!(
        "provided (instant):  p50 {:.1} µs, p99 {:.1} µs ({} calls, gRPC provider in-process)",
        us(provided_p50),
        us(provided_p99),
        provided_samples.len()
    );
    println!(
        "provided − built-in: {:.1} µs at p50  (budget ≤ {} µs: {})",
        us(extra),
        EXTRA_BUDGET.as_micros(),
        verdict(extra <= EXTRA_BUDGET)
    );
    daemon.terminate();
}
