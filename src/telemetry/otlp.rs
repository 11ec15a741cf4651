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

use std::fmt;
use std::time::{Duration, Instant};

use opentelemetry_sdk::Resource;
use opentelemetry_sdk::error::{OTelSdkError, OTelSdkResult};
use opentelemetry_sdk::trace::{SpanData, SpanExporter};

mod encode;
pub use encode::{encode_request, encode_resource};
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

/// The standard variables [`ExportSettings::from_env`] reads. Config reads them from the
/// environment, as it reads every variable, and hands them over in `[telemetry]`.
pub const EXPORT_VARIABLES: [&str; 4] = [
    "OTEL_EXPORTER_OTLP_TRACES_HEADERS",
    "OTEL_EXPORTER_OTLP_HEADERS",
    "OTEL_EXPORTER_OTLP_TRACES_TIMEOUT",
    "OTEL_EXPORTER_OTLP_TIMEOUT",
];

/// The headers and timeout of the exports, from the standard variables.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExportSettings {
    pub headers: Vec<(String, String)>,
    pub timeout: Option<Duration>,
}

impl ExportSettings {
    /// Reads `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `…_TIMEOUT` ([`EXPORT_VARIABLES`])
    /// through `env`.
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
        let value = percent_encoding::percent_decode_str(value.trim())
            .decode_utf8_lossy()
            .into_owned();
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
