//! The gRPC door under the same load as HTTP: single-call `ExecuteBatch` p50/p99 of one
//! `read_file`, and calls/s of 100-call batches from 4 clients (each with its own session
//! and HTTP/2 connection), through the generated tonic client. Not here: the HTTP figures and
//! the audit check (`load.rs` checks these sessions' rows too).

use std::net::SocketAddr;
use std::path::Path;
use std::time::{Duration, Instant};

use tonic::transport::Channel;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;
use toold::api::grpc::proto::{CreateSessionRequest, ExecuteBatchRequest, ToolCall};

type Client = ToolServiceClient<Channel>;

/// What the gRPC rounds did: calls made per session (for the audit check).
pub struct GrpcFigures {
    pub per_session: Vec<(String, usize)>,
}

async fn client(address: SocketAddr) -> Client {
    let channel = Channel::from_shared(format!("http://{address}"))
        .expect("a valid address")
        .connect()
        .await
        .expect("gRPC connects");
    ToolServiceClient::new(channel)
}

async fn session(client: &mut Client, projects: &Path) -> String {
    client
        .create_session(CreateSessionRequest {
            working_directory: projects.display().to_string(),
            permission_mode: "read_only".into(),
            ..Default::default()
        })
        .await
        .expect("session created")
        .into_inner()
        .id
}

fn batch(session: &str, calls: usize, file: &str) -> ExecuteBatchRequest {
    let input = serde_json::json!({ "file_path": file }).to_string();
    ExecuteBatchRequest {
        session_id: session.to_owned(),
        calls: (0..calls)
            .map(|n| ToolCall {
                id: format!("c{n}"),
                name: "read_file".into(),
                input_json: input.clone(),
            })
            .collect(),
        idempotency_key: String::new(),
    }
}

async fn send(client: &mut Client, request: &ExecuteBatchRequest) -> usize {
    let response = client
        .execute_batch(request.clone())
        .await
        .expect("a batch")
        .into_inner();
    assert!(
        response.results.iter().all(|r| !r.is_error),
        "{:?}",
        response.results
    );
    response.results.len()
}

/// Single calls (warm-up, then `samples`), then `clients` clients for `duration`.
pub async fn measure(
    address: SocketAddr,
    projects: &Path,
    file: &str,
    (warm_up, samples): (usize, usize),
    (clients, batch_calls, duration): (usize, usize, Duration),
) -> GrpcFigures {
    let mut single = client(address).await;
    let id = session(&mut single, projects).await;
    let request = batch(&id, 1, file);
    for _ in 0..warm_up {
        send(&mut single, &request).await;
    }
    let mut timings = Vec::with_capacity(samples);
    for _ in 0..samples {
        let started = Instant::now();
        send(&mut single, &request).await;
        timings.push(started.elapsed());
    }
    timings.sort();
    println!(
        "gRPC read_file:      p50 {:.1} µs, p99 {:.1} µs ({} calls, audited; ExecuteBatch of one)",
        timings[timings.len() / 2].as_secs_f64() * 1e6,
        timings[timings.len() * 99 / 100].as_secs_f64() * 1e6,
        samples
    );
    let mut per_session = vec![(id, warm_up + samples)];

    let mut loops = Vec::new();
    for _ in 0..clients {
        let mut connection = client(address).await;
        let id = session(&mut connection, projects).await;
        loops.push((connection, id));
    }
    let started = Instant::now();
    let deadline = started + duration;
    let answered = futures::future::join_all(loops.into_iter().map(|(mut connection, id)| {
        let request = batch(&id, batch_calls, file);
        async move {
            let mut calls = 0;
            while Instant::now() < deadline {
                calls += send(&mut connection, &request).await;
            }
            (id, calls)
        }
    }))
    .await;
    let elapsed = started.elapsed();
    let made: usize = answered.iter().map(|(_, calls)| calls).sum();
    println!(
        "gRPC throughput:     {:.0} audited calls/s ({made} calls in batches of {batch_calls}, \
         {clients} clients, {:.1} s)",
        made as f64 / elapsed.as_secs_f64(),
        elapsed.as_secs_f64()
    );
    per_session.extend(answered);
    GrpcFigures { per_session }
}
