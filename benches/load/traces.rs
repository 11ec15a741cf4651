//! The cost of traces (issue 20): the single-call p50 of `read_file` on a daemon with tracing
//! off beside one exporting every span (`OTEL_TRACES_SAMPLER=always_on`, OTLP over gRPC to
//! a receiver that decodes and counts them, run on a thread and runtime of its own so that
//! receiving spans does not share the client's thread), in alternating rounds over the same
//! client. Budget: at most
//! 15% more with an endpoint set. "Off costs nothing" is the off daemon against an older
//! build (`TOOLD_BENCH_BINARY`) or the plain latency figures of `docs/performance.md`.
//! `TOOLD_BENCH_SAMPLER=always_off` (the traced daemon's `OTEL_TRACES_SAMPLER`) keeps every
//! span's making and drops it unexported: the request path's share without the export's.

use std::net::SocketAddr;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::trace_service_server::{
    TraceService, TraceServiceServer,
};
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{ROUND, ROUNDS, WARM_UP, batch, create_session, fixture_dir, percentiles, us};

const TRACING_BUDGET: f64 = 1.15;

/// The receiving end of OTLP/gRPC: decodes each export and counts its spans, as a
/// collector's receiver does before its pipeline, and keeps nothing. (The fake collector of
/// the tests converts and queues every span for inspection: on this 2-core machine that work
/// competed with the daemon under test and was charged to tracing.)
struct CountingReceiver(Arc<AtomicUsize>);

#[tonic::async_trait]
impl TraceService for CountingReceiver {
    async fn export(
        &self,
        request: tonic::Request<ExportTraceServiceRequest>,
    ) -> Result<tonic::Response<ExportTraceServiceResponse>, tonic::Status> {
        let spans: usize = request
            .get_ref()
            .resource_spans
            .iter()
            .flat_map(|resource| &resource.scope_spans)
            .map(|scope| scope.spans.len())
            .sum();
        self.0.fetch_add(spans, Ordering::Relaxed);
        Ok(tonic::Response::new(ExportTraceServiceResponse::default()))
    }
}

/// Starts the receiver on a thread and runtime of its own; its endpoint and the count of
/// spans received.
fn collector() -> (String, Arc<AtomicUsize>) {
    let received = Arc::new(AtomicUsize::new(0));
    let counted = received.clone();
    let (sender, endpoint) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()
            .expect("receiver runtime");
        runtime.block_on(async move {
            let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
                .await
                .expect("receiver binds");
            let address = listener.local_addr().expect("receiver address");
            sender
                .send(format!("http://{address}"))
                .expect("endpoint sent");
            tonic::transport::Server::builder()
                .add_service(TraceServiceServer::new(CountingReceiver(counted)))
                .serve_with_incoming(tokio_stream::wrappers::TcpListenerStream::new(listener))
                .await
                .expect("receiver serves");
        });
    });
    (endpoint.recv().expect("receiver endpoint"), received)
}

/// A daemon, a session in it and a connection with the single-call request.
struct Target {
    daemon: Daemon,
    _dir: tempfile::TempDir,
    connection: Connection,
    request: PreparedRequest,
}

impl Target {
    async fn start(env: &[(&str, &str)]) -> Target {
        let dir = fixture_dir();
        let daemon = Daemon::start_with_env(dir.path(), &[], env).await;
        let projects = dir
            .path()
            .join("projects")
            .canonicalize()
            .expect("projects");
        let session = create_session(daemon.address, &projects).await;
        Target {
            connection: Connection::open(daemon.address).await.expect("connects"),
            request: PreparedRequest::post_json(
                daemon.address,
                &format!("/v1/sessions/{session}/batches"),
                &batch(1),
            ),
            daemon,
            _dir: dir,
        }
    }

    async fn time(&mut self, calls: usize) -> Vec<Duration> {
        super::time_requests(&mut self.connection, &self.request, calls).await
    }

    fn address(&self) -> SocketAddr {
        self.daemon.address
    }
}

/// Prints tracing off against tracing on.
pub async fn measure() {
    let (endpoint, received) = collector();
    let mut off = Target::start(&[]).await;
    // `TOOLD_BENCH_SAMPLER=always_off` keeps the span layer and drops every span at its
    // start: what the spans cost on the request path without their export.
    let sampler = std::env::var("TOOLD_BENCH_SAMPLER").unwrap_or_else(|_| "always_on".into());
    let mut on = Target::start(&[
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_TRACES_SAMPLER", sampler.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ])
    .await;
    assert_ne!(off.address(), on.address());
    off.time(WARM_UP).await;
    on.time(WARM_UP).await;
    let (mut off_samples, mut on_samples) = (Vec::new(), Vec::new());
    for _ in 0..ROUNDS {
        off_samples.extend(off.time(ROUND).await);
        on_samples.extend(on.time(ROUND).await);
    }
    let (off_p50, off_p99) = percentiles(&mut off_samples);
    let (on_p50, on_p99) = percentiles(&mut on_samples);
    let ratio = on_p50.as_secs_f64() / off_p50.as_secs_f64();
    // The exporter sends every 200 ms; what arrived shows the spans were made and sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    println!(
        "tracing off:         read_file p50 {:.1} µs, p99 {:.1} µs ({} calls)",
        us(off_p50),
        us(off_p99),
        off_samples.len()
    );
    println!(
        "tracing on:          read_file p50 {:.1} µs, p99 {:.1} µs ({} calls, always_on, OTLP/gRPC; {} spans received)",
        us(on_p50),
        us(on_p99),
        on_samples.len(),
        received.load(Ordering::Relaxed)
    );
    println!(
        "on / off p50:        {ratio:.2}×  (budget ≤ {TRACING_BUDGET}×: {})",
        super::verdict(ratio <= TRACING_BUDGET)
    );
    off.daemon.terminate();
    on.daemon.terminate();
}
