//! Real OTLP receivers a test daemon exports to: gRPC (`fake-opentelemetry-collector`) and
//! HTTP/protobuf (an axum route decoding opentelemetry-proto's `ExportTraceServiceRequest`,
//! since the fake collector speaks only gRPC). Both hand spans over as the fake collector's
//! [`ExportedSpan`], drained continuously into a shared list so that a daemon flushing at its
//! shutdown never waits on a full channel.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::Bytes;
use axum::http::StatusCode;
pub use fake_opentelemetry_collector::ExportedSpan;
use fake_opentelemetry_collector::FakeCollectorServer;
use opentelemetry_proto::tonic::collector::trace::v1::{
    ExportTraceServiceRequest, ExportTraceServiceResponse,
};
use opentelemetry_proto::tonic::common::v1::any_value::Value as AnyValue;
use prost::Message;

/// The wire format a receiver speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Protocol {
    Grpc,
    HttpProtobuf,
}

/// A running receiver and what it has received so far.
pub struct Receiver {
    pub protocol: Protocol,
    /// `http://127.0.0.1:PORT`, the base URL (`OTEL_EXPORTER_OTLP_ENDPOINT`).
    pub endpoint: String,
    spans: Arc<Mutex<Vec<ExportedSpan>>>,
    /// `service.name` of each export request (HTTP only: the fake collector drops resources).
    pub services: Arc<Mutex<Vec<String>>>,
    /// The `api-key` header of each export request (HTTP only: the fake collector does not
    /// show its metadata), set by [`Receiver::env`] through `OTEL_EXPORTER_OTLP_HEADERS`.
    pub api_keys: Arc<Mutex<Vec<String>>>,
    task: tokio::task::JoinHandle<()>,
}

impl Drop for Receiver {
    fn drop(&mut self) {
        self.task.abort();
    }
}

impl Receiver {
    pub async fn start(protocol: Protocol) -> Receiver {
        match protocol {
            Protocol::Grpc => Receiver::grpc().await,
            Protocol::HttpProtobuf => Receiver::http().await,
        }
    }

    async fn grpc() -> Receiver {
        let mut collector = FakeCollectorServer::start()
            .await
            .expect("collector starts");
        let endpoint = collector.endpoint();
        let spans = Arc::new(Mutex::new(Vec::new()));
        let into = spans.clone();
        let task = tokio::spawn(async move {
            loop {
                let batch = collector.exported_spans(1, Duration::from_millis(50)).await;
                into.lock().unwrap().extend(batch);
            }
        });
        Receiver {
            protocol: Protocol::Grpc,
            endpoint,
            spans,
            services: Arc::default(),
            api_keys: Arc::default(),
            task,
        }
    }

    async fn http() -> Receiver {
        let spans = Arc::new(Mutex::new(Vec::new()));
        let services = Arc::new(Mutex::new(Vec::new()));
        let api_keys = Arc::new(Mutex::new(Vec::new()));
        let (into, names, keys) = (spans.clone(), services.clone(), api_keys.clone());
        let route = axum::routing::post(move |headers: axum::http::HeaderMap, body: Bytes| {
            let (into, names, keys) = (into.clone(), names.clone(), keys.clone());
            async move {
                let key = headers.get("api-key").and_then(|v| v.to_str().ok());
                keys.lock()
                    .unwrap()
                    .push(key.unwrap_or_default().to_owned());
                export(&body, &into, &names)
            }
        });
        let app = axum::Router::new().route("/v1/traces", route);
        let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
        let endpoint = format!("http://{}", listener.local_addr().unwrap());
        let task = tokio::spawn(async move {
            axum::serve(listener, app).await.unwrap();
        });
        Receiver {
            protocol: Protocol::HttpProtobuf,
            endpoint,
            spans,
            services,
            api_keys,
            task,
        }
    }

    /// The standard variables pointing a daemon here, sampling every span.
    pub fn env(&self) -> Vec<(&'static str, String)> {
        let protocol = match self.protocol {
            Protocol::Grpc => "grpc",
            Protocol::HttpProtobuf => "http/protobuf",
        };
        vec![
            ("OTEL_EXPORTER_OTLP_ENDPOINT", self.endpoint.clone()),
            ("OTEL_EXPORTER_OTLP_PROTOCOL", protocol.to_owned()),
            ("OTEL_TRACES_SAMPLER", "always_on".to_owned()),
            ("OTEL_SERVICE_NAME", "toold-under-test".to_owned()),
            // Percent-encoded, as the specification writes header values.
            ("OTEL_EXPORTER_OTLP_HEADERS", "api-key=the%20key".to_owned()),
        ]
    }

    /// Everything received so far.
    pub fn spans(&self) -> Vec<ExportedSpan> {
        self.spans.lock().unwrap().clone()
    }

    /// Waits (30 s guard) until the spans received satisfy `done`; returns them.
    pub async fn spans_until(&self, done: impl Fn(&[ExportedSpan]) -> bool) -> Vec<ExportedSpan> {
        let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
        loop {
            let spans = self.spans();
            if done(&spans) {
                return spans;
            }
            assert!(
                tokio::time::Instant::now() < deadline,
                "spans never arrived; got {:#?}",
                names(&spans)
            );
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
    }
}

/// One OTLP/HTTP export: a protobuf body in, an empty protobuf answer out; a body that is not
/// an export request is a 400, as a collector answers it.
fn export(
    body: &[u8],
    into: &Mutex<Vec<ExportedSpan>>,
    names: &Mutex<Vec<String>>,
) -> (StatusCode, Vec<u8>) {
    let Ok(request) = ExportTraceServiceRequest::decode(body) else {
        return (StatusCode::BAD_REQUEST, Vec::new());
    };
    for resource_spans in request.resource_spans {
        let service = resource_spans
            .resource
            .iter()
            .flat_map(|resource| &resource.attributes)
            .find(|kv| kv.key == "service.name")
            .and_then(|kv| match kv.value.as_ref()?.value.as_ref()? {
                AnyValue::StringValue(name) => Some(name.clone()),
                _ => None,
            });
        names.lock().unwrap().extend(service);
        let spans = resource_spans
            .scope_spans
            .into_iter()
            .flat_map(|scope| scope.spans)
            .map(ExportedSpan::from);
        into.lock().unwrap().extend(spans);
    }
    (
        StatusCode::OK,
        ExportTraceServiceResponse::default().encode_to_vec(),
    )
}

/// A span attribute's value as text (`None` when absent). The fake collector keeps values
/// as their `Debug` form (`Some(AnyValue { value: Some(StringValue("x")) })`).
pub fn attribute(span: &ExportedSpan, key: &str) -> Option<String> {
    let debug = span.attributes.get(key)?;
    if let Some(start) = debug.find("StringValue(\"") {
        let rest = &debug[start + "StringValue(\"".len()..];
        return Some(rest[..rest.rfind("\")").unwrap_or(rest.len())].to_owned());
    }
    let start = debug.find("IntValue(")? + "IntValue(".len();
    let rest = &debug[start..];
    Some(rest[..rest.find(')').unwrap_or(rest.len())].to_owned())
}

/// The names of `spans` (for failure messages).
pub fn names(spans: &[ExportedSpan]) -> Vec<&str> {
    spans.iter().map(|span| span.name.as_str()).collect()
}

/// The one span named `name` in `spans` whose attribute `key` is `value` (when given).
pub fn find<'s>(
    spans: &'s [ExportedSpan],
    name: &str,
    with: Option<(&str, &str)>,
) -> &'s ExportedSpan {
    let matching: Vec<&ExportedSpan> = spans
        .iter()
        .filter(|span| span.name == name)
        .filter(|span| {
            with.is_none_or(|(key, value)| attribute(span, key).as_deref() == Some(value))
        })
        .collect();
    assert_eq!(
        matching.len(),
        1,
        "one span {name:?} {with:?} expected among {:#?}",
        names(spans)
    );
    matching[0]
}

/// The children of `parent` in `spans`.
pub fn children(spans: &[ExportedSpan], parent: &ExportedSpan) -> Vec<ExportedSpan> {
    spans
        .iter()
        .filter(|span| span.parent_span_id == parent.span_id && span.trace_id == parent.trace_id)
        .cloned()
        .collect()
}

/// Whether the receiver decodes only export requests: garbage gets a 400.
#[tokio::test]
async fn the_http_receiver_refuses_a_body_that_is_not_an_export() {
    let receiver = Receiver::start(Protocol::HttpProtobuf).await;
    let response = reqwest::Client::new()
        .post(format!("{}/v1/traces", receiver.endpoint))
        .body(vec![0xff, 0xff, 0xff])
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), 400);
    assert!(receiver.spans().is_empty());
}
