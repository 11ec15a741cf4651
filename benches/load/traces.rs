//! The cost of traces (issue 20): the single-call p50 of `read_file` on a daemon with tracing
//! off beside one exporting every span (`OTEL_TRACES_SAMPLER=always_on`, OTLP over gRPC to a
//! receiver on a thread and runtime of its own that keeps each export's bytes and decodes them
//! only after the timed rounds, to count the spans), in many short alternating rounds over the
//! same client (`PAIRED_ROUNDS`). Budget: at most 15% more with an endpoint set. "Off costs
//! nothing" is the off daemon against an older build (`TOOLD_BENCH_BINARY`) or the plain
//! latency figures of `docs/performance.md`. `TOOLD_BENCH_SAMPLER=always_off` (the traced
//! daemon's `OTEL_TRACES_SAMPLER`) keeps every span's making and drops it unexported: the
//! request path's share without the export's; `TOOLD_BENCH_SAMPLER=none` traces neither
//! daemon (an A/A run: the bench's own noise on this machine).

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceResponse;
use opentelemetry_proto::tonic::trace::v1::ResourceSpans;
use prost::Message;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::placement;
use super::{WARM_UP, batch, create_session, fixture_dir, percentiles, projects_in, us};

const TRACING_BUDGET: f64 = 1.15;

/// An export as the receiver keeps it while the bench runs: each `ResourceSpans` as the
/// bytes it came in (field 1 of `ExportTraceServiceRequest`, read as `bytes`, which has the
/// same wire form as a message), so receiving costs a copy and no decoding.
#[derive(Clone, PartialEq, prost::Message)]
struct RawExport {
    #[prost(bytes = "bytes", repeated, tag = "1")]
    resource_spans: Vec<prost::bytes::Bytes>,
}

/// The receiving end of OTLP/gRPC (`TraceService/Export`): keeps what arrives and decodes it
/// only once the timed rounds are over ([`Received::spans`]). A collector decodes on
/// another machine; here it shares the 2 cores with the daemons and the client, and decoding
/// 512 spans in the middle of a round (the fake collector, then a receiver counting as it
/// decoded) was charged to tracing.
#[derive(Clone, Default)]
struct Received(Arc<Mutex<Vec<prost::bytes::Bytes>>>);

impl Received {
    /// Every span received so far, decoded now.
    fn spans(&self) -> usize {
        let kept = self.0.lock().expect("received exports");
        kept.iter()
            .map(|bytes| {
                ResourceSpans::decode(bytes.clone())
                    .expect("a ResourceSpans")
                    .scope_spans
                    .iter()
                    .map(|scope| scope.spans.len())
                    .sum::<usize>()
            })
            .sum()
    }
}

impl tonic::server::NamedService for Received {
    const NAME: &'static str = "opentelemetry.proto.collector.trace.v1.TraceService";
}

/// The `Export` call's handler: keeps the export.
struct Keep(Received);

impl tonic::server::UnaryService<RawExport> for Keep {
    type Response = ExportTraceServiceResponse;
    type Future = std::future::Ready<Result<tonic::Response<Self::Response>, tonic::Status>>;

    fn call(&mut self, request: tonic::Request<RawExport>) -> Self::Future {
        (self.0)
            .0
            .lock()
            .expect("received exports")
            .extend(request.into_inner().resource_spans);
        std::future::ready(Ok(tonic::Response::new(
            ExportTraceServiceResponse::default(),
        )))
    }
}

impl tower::Service<axum::http::Request<tonic::body::Body>> for Received {
    type Response = axum::http::Response<tonic::body::Body>;
    type Error = std::convert::Infallible;
    type Future = std::pin::Pin<
        Box<dyn std::future::Future<Output = Result<Self::Response, Self::Error>> + Send>,
    >;

    fn poll_ready(
        &mut self,
        _: &mut std::task::Context<'_>,
    ) -> std::task::Poll<Result<(), Self::Error>> {
        std::task::Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: axum::http::Request<tonic::body::Body>) -> Self::Future {
        let export = Keep(self.clone());
        Box::pin(async move {
            if request.uri().path() != "/opentelemetry.proto.collector.trace.v1.TraceService/Export"
            {
                return Ok(
                    tonic::Status::unimplemented(request.uri().path().to_owned()).into_http(),
                );
            }
            let mut grpc = tonic::server::Grpc::new(tonic_prost::ProstCodec::default());
            Ok(grpc.unary(export, request).await)
        })
    }
}

/// Starts the receiver on a thread and runtime of its own; its endpoint and what it keeps.
fn collector() -> (String, Received) {
    let received = Received::default();
    let kept = received.clone();
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
                .add_service(kept)
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
        let projects = projects_in(dir.path());
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
    // `TOOLD_BENCH_SAMPLER=none`: the second daemon exports nothing either, an A/A run
    // showing the bench's own noise on this machine.
    let sampler = std::env::var("TOOLD_BENCH_SAMPLER").unwrap_or_else(|_| "always_on".into());
    let traced = [
        ("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.as_str()),
        ("OTEL_EXPORTER_OTLP_PROTOCOL", "grpc"),
        ("OTEL_TRACES_SAMPLER", sampler.as_str()),
        ("OTEL_BSP_SCHEDULE_DELAY", "200"),
    ];
    let mut on = Target::start(if sampler == "none" { &[] } else { &traced }).await;
    assert_ne!(off.address(), on.address());
    off.time(WARM_UP).await;
    on.time(WARM_UP).await;
    let unpinned = alternate(&mut off, &mut on).await;
    // Placement fixed, twice: the client (and the receiver, a thread of this process) on one
    // CPU and each daemon, every thread of it (the exporter's too), on the other; then all
    // of them on the one CPU (no wake-up crosses CPUs, and the exporter's work competes with
    // the daemon and the client alike). Unpinned, where the
    // scheduler puts each daemon's workers against the client moves a p50 by more than
    // tracing does on this 2-vCPU machine, and it may choose differently for the two daemons
    // for a whole run (A/A runs here read 0.78-1.22x); pinned, both pay the same wake-ups
    // and the exporter's work lands on the CPU of the daemon it serves.
    let daemons = [off.daemon.pid(), on.daemon.pid()];
    let pinned =
        placement::in_fixed_placements(&daemons, async || alternate(&mut off, &mut on).await).await;
    // The exporter sends every 200 ms; what arrived shows the spans were made and sent.
    tokio::time::sleep(Duration::from_millis(500)).await;
    let [off_samples, on_samples] = unpinned;
    println!(
        "tracing, unpinned ({} calls each; {} spans received, {sampler}, OTLP/gRPC):",
        off_samples.len(),
        received.spans()
    );
    report(off_samples, on_samples);
    for (label, [off_samples, on_samples]) in pinned {
        println!("tracing, {label}:");
        report(off_samples, on_samples);
    }
    off.daemon.terminate();
    on.daemon.terminate();
}

/// Alternating rounds of the two daemons: their samples.
async fn alternate(off: &mut Target, on: &mut Target) -> [Vec<Duration>; 2] {
    super::alternate_pair(
        (&mut off.connection, &off.request),
        (&mut on.connection, &on.request),
    )
    .await
}

fn report(mut off_samples: Vec<Duration>, mut on_samples: Vec<Duration>) {
    let (off_p50, off_p99) = percentiles(&mut off_samples);
    let (on_p50, on_p99) = percentiles(&mut on_samples);
    let ratio = on_p50.as_secs_f64() / off_p50.as_secs_f64();
    println!(
        "  tracing off:       read_file p50 {:.1} µs, p99 {:.1} µs",
        us(off_p50),
        us(off_p99)
    );
    println!(
        "  tracing on:        read_file p50 {:.1} µs, p99 {:.1} µs",
        us(on_p50),
        us(on_p99)
    );
    println!(
        "  on / off p50:      {ratio:.2}×  (budget ≤ {TRACING_BUDGET}×: {})",
        super::verdict(ratio <= TRACING_BUDGET)
    );
}
