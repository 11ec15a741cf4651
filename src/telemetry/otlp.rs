//! toold's OTLP span exporter: the SDK's batch processor hands it each batch of finished spans
//! ([`SpanData`]), which it writes straight into an `ExportTraceServiceRequest`'s protobuf bytes
//! and sends over gRPC (`TraceService/Export`, through tonic with a codec that passes the bytes
//! on) or HTTP/protobuf (a POST through reqwest). Both clients live on the daemon's runtime; the
//! batch processor's thread waits for them.
//!
//! Decisions:
//! - **Why not `opentelemetry-otlp`'s exporter** (issue 20 names the crate; its budget, at most
//!   15 % on the single-call p50 while every call is traced, is why toold deviates). Its export
//!   cloned the whole batch, looked each span's instrumentation scope up in a hash map, built
//!   `opentelemetry-proto`'s message structs (a `String` for every name and attribute key) and
//!   then had prost encode them, computing the nested lengths again at each level: ~10 000
//!   instructions a span, ~30 000 of the ~51 000 a traced call cost (callgrind,
//!   `docs/performance.md`), on a 2-core machine where that CPU is taken from the calls. Here a
//!   span is encoded in one pass (a nested message gets a one-byte length, widened in place only
//!   for a body of 128 bytes or more); tracing's cost a call went to ~30 000. The SDK (spans,
//!   sampler, batch processor) is unchanged.
//! - **The same bytes.** The request is byte for byte what prost writes for
//!   `opentelemetry-proto`'s transform of the same batch (the test `encodes_what_the_transform_makes`),
//!   span flags included (`CONTEXT_HAS_IS_REMOTE`, `CONTEXT_IS_REMOTE`).
//! - **The exporter's knobs** are the specification's: `OTEL_EXPORTER_OTLP_TRACES_HEADERS`
//!   else `OTEL_EXPORTER_OTLP_HEADERS` (`key=value` pairs, comma-separated, values
//!   percent-decoded), `OTEL_EXPORTER_OTLP_TRACES_TIMEOUT` else `OTEL_EXPORTER_OTLP_TIMEOUT`
//!   (milliseconds, 10 s by default), read by [`ExportSettings::from_env`]. The batch
//!   processor's (`OTEL_BSP_*`) are still read by the SDK. Where the specification says a bad
//!   value SHOULD be warned about and ignored, toold refuses to start instead, naming the
//!   variable, as it does for every other setting: a pair without `=`, a header the client
//!   writes itself (`host`, `content-length`, `content-type`, …), a CR or LF in a value, a
//!   timeout that is not a positive number.
//! - **TLS**: HTTP/protobuf takes `https://` (reqwest with rustls and the web PKI's roots, as
//!   the exporter before did); gRPC is built without TLS, so an `https://` gRPC endpoint is
//!   refused at start-up rather than failing every export.
//! - **Retries**: a batch whose send fails for a reason that may pass (no answer at all, gRPC
//!   `UNAVAILABLE`/`CANCELLED`/`ABORTED`/`OUT_OF_RANGE`/`DATA_LOSS`/`DEADLINE_EXCEEDED`, HTTP
//!   429/502/503/504) is sent again after 100, 200 and 400 ms, within the timeout; then it is
//!   dropped with a warning (the batch processor's rule: an export that fails loses its batch,
//!   the daemon goes on). `Retry-After` and gRPC's RetryInfo are not read.

use std::borrow::Cow;
use std::fmt;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};
use prost::bytes::Bytes;

/// gRPC's method for an export.
const GRPC_PATH: &str = "/opentelemetry.proto.collector.trace.v1.TraceService/Export";
/// How long a send may take when no `…_TIMEOUT` says.
const DEFAULT_TIMEOUT: Duration = Duration::from_secs(10);
/// The waits before a failed send is tried again.
const RETRY_WAITS: [Duration; 3] = [
    Duration::from_millis(100),
    Duration::from_millis(200),
    Duration::from_millis(400),
];
/// The most of a collector's refusal kept for the warning.
const ERROR_BODY_BYTES: usize = 512;
/// Headers the HTTP client writes itself, which a configured header may not replace.
const RESERVED_HEADERS: &[&str] = &[
    "host",
    "content-length",
    "content-type",
    "transfer-encoding",
    "connection",
    "te",
    "upgrade",
];

/// The headers and timeout of the exports, from the standard variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSettings {
    pub headers: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

impl ExportSettings {
    /// Reads `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `…_TIMEOUT` through `env`.
    pub fn from_env(env: impl Fn(&str) -> Option<String>) -> Result<ExportSettings, String> {
        let either = |specific: &str, general: &str| {
            env(specific)
                .filter(|v| !v.trim().is_empty())
                .map(|v| (specific.to_owned(), v))
                .or_else(|| {
                    env(general)
                        .filter(|v| !v.trim().is_empty())
                        .map(|v| (general.to_owned(), v))
                })
        };
        let headers = match either(
            "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
            "OTEL_EXPORTER_OTLP_HEADERS",
        ) {
            Some((name, value)) => parse_headers(&value).map_err(|err| format!("{name}: {err}"))?,
            None => Vec::new(),
        };
        let timeout = match either(
            "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
            "OTEL_EXPORTER_OTLP_TIMEOUT",
        ) {
            Some((name, value)) => Some(
                value
                    .trim()
                    .parse::<u64>()
                    .ok()
                    .filter(|ms| *ms > 0)
                    .map(Duration::from_millis)
                    .ok_or_else(|| {
                        format!("{name}: {value:?} is not a positive number of milliseconds")
                    })?,
            ),
            None => None,
        };
        Ok(ExportSettings { headers, timeout })
    }
}

/// `key=value,key2=value2`, each part trimmed and percent-decoded (the W3C baggage form the
/// specification names).
fn parse_headers(text: &str) -> Result<Vec<(String, String)>, String> {
    let mut headers = Vec::new();
    for pair in text.split(',').map(str::trim).filter(|p| !p.is_empty()) {
        let (key, value) = pair
            .split_once('=')
            .ok_or_else(|| format!("{pair:?} is not key=value"))?;
        let key = key.trim().to_ascii_lowercase();
        let value = percent_decode(value.trim());
        let valid_key = !key.is_empty()
            && key
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
        if !valid_key || value.bytes().any(|b| b == b'\r' || b == b'\n' || b == 0) {
            return Err(format!("{pair:?} is not a valid header"));
        }
        if RESERVED_HEADERS.contains(&key.as_str()) {
            return Err(format!("{key:?} is set by the exporter itself"));
        }
        headers.push((key, value));
    }
    Ok(headers)
}

fn percent_decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| char::from(b).to_digit(16);
        if bytes[i] == b'%'
            && let (Some(hi), Some(lo)) = (
                bytes.get(i + 1).copied().and_then(hex),
                bytes.get(i + 2).copied().and_then(hex),
            )
        {
            out.push((hi * 16 + lo) as u8);
            i += 3;
            continue;
        }
        out.push(bytes[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The exporter the SDK's batch processor drives.
pub struct OtlpExporter {
    /// The encoded `Resource` message (its body), from [`SpanExporter::set_resource`].
    resource: Vec<u8>,
    resource_schema_url: String,
    transport: Transport,
    timeout: Duration,
}

enum Transport {
    Grpc {
        client: Box<tonic::client::Grpc<tonic::transport::Channel>>,
        metadata: tonic::metadata::MetadataMap,
    },
    Http {
        client: reqwest::Client,
        url: String,
        /// The daemon's runtime, which carries the request (the export runs on the SDK's
        /// own thread).
        runtime: tokio::runtime::Handle,
    },
}

impl fmt::Debug for OtlpExporter {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let kind = match self.transport {
            Transport::Grpc { .. } => "grpc",
            Transport::Http { .. } => "http/protobuf",
        };
        f.debug_struct("OtlpExporter")
            .field("protocol", &kind)
            .finish_non_exhaustive()
    }
}

impl OtlpExporter {
    /// An exporter over gRPC to `endpoint` (`http://host:port`). Connects lazily: must run
    /// inside the Tokio runtime, which then carries the connection.
    pub fn grpc(endpoint: &str, settings: &ExportSettings) -> Result<OtlpExporter, String> {
        if endpoint
            .get(..8)
            .is_some_and(|s| s.eq_ignore_ascii_case("https://"))
        {
            return Err(
                "TLS to the collector over gRPC is not built in; use an http:// endpoint, or http/protobuf"
                    .to_owned(),
            );
        }
        let timeout = settings.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let channel = tonic::transport::Endpoint::from_shared(endpoint.to_owned())
            .map_err(|err| err.to_string())?
            .connect_timeout(timeout)
            .timeout(timeout)
            .connect_lazy();
        let mut metadata = tonic::metadata::MetadataMap::new();
        for (key, value) in &settings.headers {
            let key = tonic::metadata::MetadataKey::from_bytes(key.as_bytes())
                .map_err(|_| format!("{key:?} is not a gRPC metadata key"))?;
            let value = value
                .parse()
                .map_err(|_| format!("the value of {key:?} is not valid metadata"))?;
            metadata.insert(key, value);
        }
        Ok(OtlpExporter {
            resource: Vec::new(),
            resource_schema_url: String::new(),
            transport: Transport::Grpc {
                client: Box::new(tonic::client::Grpc::new(channel)),
                metadata,
            },
            timeout,
        })
    }

    /// An exporter over HTTP/protobuf, POSTing to `url` (`http://` or `https://`). Must run
    /// inside the Tokio runtime, which then carries the requests.
    pub fn http(url: &str, settings: &ExportSettings) -> Result<OtlpExporter, String> {
        let parsed = reqwest::Url::parse(url).map_err(|err| format!("{url:?}: {err}"))?;
        if !matches!(parsed.scheme(), "http" | "https") || parsed.host_str().is_none() {
            return Err(format!("{url:?} is not an http:// or https:// URL"));
        }
        if !parsed.username().is_empty() || parsed.password().is_some() {
            return Err(format!(
                "{url:?} has credentials in it; use OTEL_EXPORTER_OTLP_HEADERS"
            ));
        }
        let timeout = settings.timeout.unwrap_or(DEFAULT_TIMEOUT);
        let mut headers = reqwest::header::HeaderMap::new();
        for (key, value) in &settings.headers {
            let name = reqwest::header::HeaderName::from_bytes(key.as_bytes())
                .map_err(|_| format!("{key:?} is not a header name"))?;
            let value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("the value of {key:?} is not a header value"))?;
            headers.append(name, value);
        }
        headers.insert(
            reqwest::header::CONTENT_TYPE,
            reqwest::header::HeaderValue::from_static("application/x-protobuf"),
        );
        let client = reqwest::Client::builder()
            .default_headers(headers)
            .user_agent(concat!("toold/", env!("CARGO_PKG_VERSION")))
            .redirect(reqwest::redirect::Policy::none())
            .connect_timeout(timeout)
            .timeout(timeout)
            .build()
            .map_err(|err| format!("the HTTP client: {err}"))?;
        let runtime = tokio::runtime::Handle::try_current()
            .map_err(|_| "the HTTP exporter needs the daemon's runtime".to_owned())?;
        Ok(OtlpExporter {
            resource: Vec::new(),
            resource_schema_url: String::new(),
            transport: Transport::Http {
                client,
                url: parsed.into(),
                runtime,
            },
            timeout,
        })
    }

    async fn send(&self, body: &Bytes) -> Result<(), SendError> {
        match &self.transport {
            Transport::Grpc { client, metadata } => {
                let mut client = (**client).clone();
                client
                    .ready()
                    .await
                    .map_err(|err| SendError::transient(format!("gRPC: {err}")))?;
                let mut request = tonic::Request::new(body.clone());
                *request.metadata_mut() = metadata.clone();
                let path = tonic::codegen::http::uri::PathAndQuery::from_static(GRPC_PATH);
                match client.unary(request, path, BytesCodec).await {
                    Ok(_) => Ok(()),
                    Err(status) => {
                        let message = format!("gRPC {:?}: {}", status.code(), status.message());
                        // The specification's retryable codes (RESOURCE_EXHAUSTED only with
                        // RetryInfo, which toold does not read: not retried).
                        Err(match status.code() {
                            tonic::Code::Unavailable
                            | tonic::Code::Cancelled
                            | tonic::Code::Aborted
                            | tonic::Code::OutOfRange
                            | tonic::Code::DataLoss
                            | tonic::Code::DeadlineExceeded => SendError::transient(message),
                            _ => SendError::permanent(message),
                        })
                    }
                }
            }
            Transport::Http {
                client,
                url,
                runtime,
            } => {
                let request = client.post(url.as_str()).body(body.clone());
                let answer = runtime
                    .spawn(async move {
                        let response = request.send().await?;
                        let status = response.status();
                        let body = response.bytes().await?;
                        Ok::<_, reqwest::Error>((status, body))
                    })
                    .await;
                let (status, answer) = match answer {
                    Err(err) => return Err(SendError::permanent(format!("the export: {err}"))),
                    Ok(Err(err)) => {
                        // No answer: no connection, a timeout, a connection lost.
                        return Err(SendError::transient(format!(
                            "{url}: {}",
                            error_chain(&err)
                        )));
                    }
                    Ok(Ok(answer)) => answer,
                };
                if status.is_success() {
                    use prost::Message;
                    if let Ok(answer) = ExportAnswer::decode(answer) {
                        warn_partial(answer);
                    }
                    return Ok(());
                }
                let text = String::from_utf8_lossy(&answer[..answer.len().min(ERROR_BODY_BYTES)])
                    .trim()
                    .to_owned();
                let message = format!("HTTP {}: {text}", status.as_u16());
                Err(if matches!(status.as_u16(), 429 | 502 | 503 | 504) {
                    SendError::transient(message)
                } else {
                    SendError::permanent(message)
                })
            }
        }
    }
}

/// An error and its causes, on one line (reqwest's own message names only the step). The
/// terminal client has one too (`client::wire`), out of this layer's reach.
fn error_chain(err: &dyn std::error::Error) -> String {
    std::iter::successors(Some(err), |e| e.source())
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(": ")
}

/// Why a send failed, and whether trying again may help.
#[derive(Debug)]
struct SendError {
    message: String,
    transient: bool,
}

impl SendError {
    fn transient(message: String) -> SendError {
        SendError {
            message,
            transient: true,
        }
    }
    fn permanent(message: String) -> SendError {
        SendError {
            message,
            transient: false,
        }
    }
}

impl SpanExporter for OtlpExporter {
    async fn export(&self, batch: Vec<SpanData>) -> OTelSdkResult {
        if batch.is_empty() {
            return Ok(());
        }
        let body = Bytes::from(encode_request(
            &self.resource,
            &self.resource_schema_url,
            &batch,
        ));
        let deadline = Instant::now() + self.timeout;
        let mut waits = RETRY_WAITS.iter();
        loop {
            match self.send(&body).await {
                Ok(()) => return Ok(()),
                Err(err) => match waits.next() {
                    Some(wait) if err.transient && Instant::now() + *wait < deadline => {
                        // On the batch processor's own thread: sleeping holds no worker.
                        std::thread::sleep(*wait);
                    }
                    _ => {
                        // The SDK's own report of a failed export is off (its internal logs
                        // are not built): say it here.
                        tracing::warn!(spans = batch.len(), error = %err.message, "spans not exported");
                        return Err(OTelSdkError::InternalFailure(format!(
                            "{} spans not exported: {}",
                            batch.len(),
                            err.message
                        )));
                    }
                },
            }
        }
    }

    fn set_resource(&mut self, resource: &Resource) {
        (self.resource, self.resource_schema_url) = encode_resource(resource);
    }
}

/// A `Resource` message's body, and the resource's schema URL.
pub fn encode_resource(resource: &Resource) -> (Vec<u8>, String) {
    let mut body = Vec::new();
    for (key, value) in resource.iter() {
        message(&mut body, 1, |buf| key_value(buf, key.as_str(), value));
    }
    let schema_url = resource.schema_url().unwrap_or_default().to_owned();
    (body, schema_url)
}

// ---------------------------------------------------------------------------------------------
// The encoding (opentelemetry/proto/collector/trace/v1/trace_service.proto and the messages it
// names). Scalars at their default are left out, as proto3 encoders do; `resource`, `scope` and
// `status` are always written, as `opentelemetry-proto`'s transform sets them.

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn varint(buf: &mut Vec<u8>, mut value: u64) {
    while value >= 0x80 {
        buf.push((value as u8) | 0x80);
        value >>= 7;
    }
    buf.push(value as u8);
}

fn tag(buf: &mut Vec<u8>, field: u32, wire: u8) {
    varint(buf, u64::from(field << 3 | u32::from(wire)));
}

fn bytes(buf: &mut Vec<u8>, field: u32, value: &[u8]) {
    if !value.is_empty() {
        tag(buf, field, LEN);
        varint(buf, value.len() as u64);
        buf.extend_from_slice(value);
    }
}

fn uint(buf: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        tag(buf, field, VARINT);
        varint(buf, value);
    }
}

fn fixed64(buf: &mut Vec<u8>, field: u32, value: u64) {
    if value != 0 {
        tag(buf, field, FIXED64);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

fn fixed32(buf: &mut Vec<u8>, field: u32, value: u32) {
    if value != 0 {
        tag(buf, field, FIXED32);
        buf.extend_from_slice(&value.to_le_bytes());
    }
}

/// A nested message: its body written by `body` after a one-byte length, which is right for
/// most (a key-value, a status); a body of 128 bytes or more (a span, the groups) has the rest
/// of its length's varint put in after the fact, moving the body once.
fn message(buf: &mut Vec<u8>, field: u32, body: impl FnOnce(&mut Vec<u8>)) {
    tag(buf, field, LEN);
    let at = buf.len();
    buf.push(0);
    body(buf);
    let len = buf.len() - at - 1;
    if len < 0x80 {
        buf[at] = len as u8;
        return;
    }
    let mut prefix = [0u8; 10];
    let mut n = 0;
    let mut value = len as u64;
    while value >= 0x80 {
        prefix[n] = (value as u8) | 0x80;
        value >>= 7;
        n += 1;
    }
    prefix[n] = value as u8;
    buf[at] = prefix[0];
    buf.splice(at + 1..at + 1, prefix[1..=n].iter().copied());
}

/// `ExportTraceServiceRequest` of one `ResourceSpans`, the spans grouped by scope in the
/// order their scopes first appear.
pub fn encode_request(resource: &[u8], schema_url: &str, batch: &[SpanData]) -> Vec<u8> {
    let mut scopes: Vec<&InstrumentationScope> = Vec::new();
    for span in batch {
        if !scopes.contains(&&span.instrumentation_scope) {
            scopes.push(&span.instrumentation_scope);
        }
    }
    let mut buf = Vec::with_capacity(64 + batch.len() * 512);
    message(&mut buf, 1, |buf| {
        message(buf, 1, |buf| buf.extend_from_slice(resource));
        for scope in &scopes {
            message(buf, 2, |buf| {
                message(buf, 1, |buf| {
                    bytes(buf, 1, scope.name().as_bytes());
                    bytes(buf, 2, scope.version().unwrap_or_default().as_bytes());
                    for attribute in scope.attributes() {
                        message(buf, 3, |buf| {
                            key_value(buf, attribute.key.as_str(), &attribute.value)
                        });
                    }
                });
                for span in batch.iter().filter(|s| &s.instrumentation_scope == *scope) {
                    message(buf, 2, |buf| encode_span(buf, span));
                }
                bytes(buf, 3, scope.schema_url().unwrap_or_default().as_bytes());
            });
        }
        bytes(buf, 3, schema_url.as_bytes());
    });
    buf
}

/// `CONTEXT_HAS_IS_REMOTE_MASK` and `CONTEXT_IS_REMOTE_MASK` of `SpanFlags`.
const HAS_IS_REMOTE: u32 = 0x100;
const IS_REMOTE: u32 = 0x200;

fn span_flags(trace_flags: u8, remote: bool) -> u32 {
    u32::from(trace_flags) | HAS_IS_REMOTE | if remote { IS_REMOTE } else { 0 }
}

fn encode_span(buf: &mut Vec<u8>, span: &SpanData) {
    let context = &span.span_context;
    bytes(buf, 1, &context.trace_id().to_bytes());
    bytes(buf, 2, &context.span_id().to_bytes());
    bytes(buf, 3, context.trace_state().header().as_bytes());
    if span.parent_span_id != SpanId::INVALID {
        bytes(buf, 4, &span.parent_span_id.to_bytes());
    }
    bytes(buf, 5, span.name.as_bytes());
    uint(buf, 6, span_kind(&span.span_kind));
    fixed64(buf, 7, nanos(span.start_time));
    fixed64(buf, 8, nanos(span.end_time));
    for attribute in &span.attributes {
        message(buf, 9, |buf| {
            key_value(buf, attribute.key.as_str(), &attribute.value)
        });
    }
    uint(buf, 10, u64::from(span.dropped_attributes_count));
    for event in span.events.iter() {
        message(buf, 11, |buf| {
            fixed64(buf, 1, nanos(event.timestamp));
            bytes(buf, 2, event.name.as_bytes());
            for attribute in &event.attributes {
                message(buf, 3, |buf| {
                    key_value(buf, attribute.key.as_str(), &attribute.value)
                });
            }
            uint(buf, 4, u64::from(event.dropped_attributes_count));
        });
    }
    uint(buf, 12, u64::from(span.events.dropped_count));
    for link in span.links.iter() {
        message(buf, 13, |buf| {
            bytes(buf, 1, &link.span_context.trace_id().to_bytes());
            bytes(buf, 2, &link.span_context.span_id().to_bytes());
            bytes(buf, 3, link.span_context.trace_state().header().as_bytes());
            for attribute in &link.attributes {
                message(buf, 4, |buf| {
                    key_value(buf, attribute.key.as_str(), &attribute.value)
                });
            }
            uint(buf, 5, u64::from(link.dropped_attributes_count));
            fixed32(
                buf,
                6,
                span_flags(
                    link.span_context.trace_flags().to_u8(),
                    link.span_context.is_remote(),
                ),
            );
        });
    }
    uint(buf, 14, u64::from(span.links.dropped_count));
    message(buf, 15, |buf| match &span.status {
        Status::Error { description } => {
            bytes(buf, 2, description.as_bytes());
            uint(buf, 3, 2);
        }
        Status::Ok => uint(buf, 3, 1),
        Status::Unset => {}
    });
    fixed32(
        buf,
        16,
        span_flags(context.trace_flags().to_u8(), span.parent_span_is_remote),
    );
}

fn span_kind(kind: &SpanKind) -> u64 {
    match kind {
        SpanKind::Internal => 1,
        SpanKind::Server => 2,
        SpanKind::Client => 3,
        SpanKind::Producer => 4,
        SpanKind::Consumer => 5,
    }
}

fn nanos(time: SystemTime) -> u64 {
    time.duration_since(UNIX_EPOCH)
        .map(|d| d.as_nanos() as u64)
        .unwrap_or_default()
}

/// A `KeyValue` message's body.
fn key_value(buf: &mut Vec<u8>, key: &str, value: &Value) {
    bytes(buf, 1, key.as_bytes());
    message(buf, 2, |buf| any_value(buf, value));
}

/// An `AnyValue` message's body: the one field of its `oneof` (written even at its default,
/// as a set `oneof` is).
fn any_value(buf: &mut Vec<u8>, value: &Value) {
    match value {
        Value::String(text) => string_value(buf, text.as_str()),
        Value::Bool(value) => bool_value(buf, *value),
        Value::I64(value) => int_value(buf, *value),
        Value::F64(value) => double_value(buf, *value),
        Value::Array(array) => message(buf, 5, |buf| match array {
            Array::Bool(values) => {
                for v in values {
                    message(buf, 1, |buf| bool_value(buf, *v));
                }
            }
            Array::I64(values) => {
                for v in values {
                    message(buf, 1, |buf| int_value(buf, *v));
                }
            }
            Array::F64(values) => {
                for v in values {
                    message(buf, 1, |buf| double_value(buf, *v));
                }
            }
            Array::String(values) => {
                for v in values {
                    message(buf, 1, |buf| string_value(buf, v.as_str()));
                }
            }
            other => {
                let text: Cow<'_, str> = Cow::Owned(other.to_string());
                message(buf, 1, |buf| string_value(buf, &text));
            }
        }),
        other => string_value(buf, &other.to_string()),
    }
}

fn string_value(buf: &mut Vec<u8>, text: &str) {
    tag(buf, 1, LEN);
    varint(buf, text.len() as u64);
    buf.extend_from_slice(text.as_bytes());
}

fn bool_value(buf: &mut Vec<u8>, value: bool) {
    tag(buf, 2, VARINT);
    varint(buf, u64::from(value));
}

fn int_value(buf: &mut Vec<u8>, value: i64) {
    tag(buf, 3, VARINT);
    varint(buf, value as u64);
}

fn double_value(buf: &mut Vec<u8>, value: f64) {
    tag(buf, 4, FIXED64);
    buf.extend_from_slice(&value.to_le_bytes());
}

// ---------------------------------------------------------------------------------------------
// gRPC: the request is the encoded bytes; the answer (`ExportTraceServiceResponse`) is read for
// its partial success only.

#[derive(Clone, Copy, Default)]
struct BytesCodec;

struct BytesEncoder;
struct AnswerDecoder;

impl tonic::codec::Codec for BytesCodec {
    type Encode = Bytes;
    type Decode = ();
    type Encoder = BytesEncoder;
    type Decoder = AnswerDecoder;

    fn encoder(&mut self) -> BytesEncoder {
        BytesEncoder
    }

    fn decoder(&mut self) -> AnswerDecoder {
        AnswerDecoder
    }
}

impl tonic::codec::Encoder for BytesEncoder {
    type Item = Bytes;
    type Error = tonic::Status;

    fn encode(
        &mut self,
        item: Bytes,
        dst: &mut tonic::codec::EncodeBuf<'_>,
    ) -> Result<(), tonic::Status> {
        use prost::bytes::BufMut;
        dst.put_slice(&item);
        Ok(())
    }
}

/// `ExportTraceServiceResponse`: only `partial_success` (field 1) matters.
#[derive(Clone, PartialEq, prost::Message)]
struct ExportAnswer {
    #[prost(message, optional, tag = "1")]
    partial_success: Option<PartialSuccess>,
}

#[derive(Clone, PartialEq, prost::Message)]
struct PartialSuccess {
    #[prost(int64, tag = "1")]
    rejected_spans: i64,
    #[prost(string, tag = "2")]
    error_message: String,
}

impl tonic::codec::Decoder for AnswerDecoder {
    type Item = ();
    type Error = tonic::Status;

    fn decode(
        &mut self,
        src: &mut tonic::codec::DecodeBuf<'_>,
    ) -> Result<Option<()>, tonic::Status> {
        use prost::Message;
        let answer = ExportAnswer::decode(src)
            .map_err(|err| tonic::Status::internal(format!("an unreadable answer: {err}")))?;
        warn_partial(answer);
        Ok(Some(()))
    }
}

/// The specification: a partial success is logged, not retried.
fn warn_partial(answer: ExportAnswer) {
    if let Some(partial) = answer.partial_success
        && (partial.rejected_spans > 0 || !partial.error_message.is_empty())
    {
        tracing::warn!(
            rejected_spans = partial.rejected_spans,
            message = %partial.error_message,
            "the collector rejected spans"
        );
    }
}

#[cfg(test)]
#[path = "otlp_tests.rs"]
mod tests;
