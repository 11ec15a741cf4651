//! Tests of the OTLP exporter: its bytes against `opentelemetry-proto`'s transform, the
//! standard variables, and exports to a collector on loopback.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::TcpListener;
use std::time::{Duration, SystemTime};

use opentelemetry::trace::{
    Event, Link, SpanContext, SpanId, SpanKind, Status, TraceFlags, TraceId, TraceState,
};
use opentelemetry::{Array, InstrumentationScope, KeyValue, StringValue, Value};
use opentelemetry_proto::tonic::collector::trace::v1::ExportTraceServiceRequest;
use opentelemetry_proto::transform::common::tonic::ResourceAttributesWithSchema;
use opentelemetry_proto::transform::trace::tonic::group_spans_by_resource_and_scope;
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{SpanData, SpanEvents, SpanLinks};
use prost::Message;

use super::*;

fn context(trace: u128, span: u64, sampled: bool, remote: bool, state: &str) -> SpanContext {
    SpanContext::new(
        TraceId::from(trace),
        SpanId::from(span),
        if sampled {
            TraceFlags::SAMPLED
        } else {
            TraceFlags::default()
        },
        remote,
        state.parse::<TraceState>().expect("a trace state"),
    )
}

fn span(name: &'static str, scope: &InstrumentationScope, span_id: u64) -> SpanData {
    let start = SystemTime::UNIX_EPOCH + Duration::from_nanos(1_764_000_000_123_456_789);
    SpanData {
        span_context: context(0x0af7651916cd43dd8448eb211c80319c, span_id, true, false, ""),
        parent_span_id: SpanId::INVALID,
        parent_span_is_remote: false,
        span_kind: SpanKind::Internal,
        name: name.into(),
        start_time: start,
        end_time: start + Duration::from_micros(42),
        attributes: Vec::new(),
        dropped_attributes_count: 0,
        events: SpanEvents::default(),
        links: SpanLinks::default(),
        status: Status::Unset,
        instrumentation_scope: scope.clone(),
    }
}

/// A batch with every kind of value, event, link, status, parent and flag, in two scopes.
fn batch() -> (Vec<SpanData>, Resource) {
    let toold = InstrumentationScope::builder("toold").build();
    let other = InstrumentationScope::builder("other")
        .with_version("1.2.3")
        .with_schema_url("https://opentelemetry.io/schemas/1.30.0")
        .with_attributes([KeyValue::new("scope.kind", "library")])
        .build();

    let mut request = span("request", &toold, 1);
    request.span_kind = SpanKind::Server;
    request.parent_span_id = SpanId::from(0xb7ad6b7169203331);
    request.parent_span_is_remote = true;
    request.span_context = context(
        0x0af7651916cd43dd8448eb211c80319c,
        1,
        true,
        false,
        "vendor=kept,other=x",
    );
    request.attributes = vec![
        KeyValue::new("http.request.method", "POST"),
        KeyValue::new("http.response.status_code", 200_i64),
        KeyValue::new("toold.negative", -7_i64),
        KeyValue::new("toold.flag", true),
        KeyValue::new("toold.off", false),
        KeyValue::new("toold.zero", 0_i64),
        KeyValue::new("toold.ratio", 0.25_f64),
        KeyValue::new("toold.empty", ""),
        KeyValue::new(
            "toold.strings",
            Value::Array(Array::String(vec![
                StringValue::from("a"),
                StringValue::from("é"),
            ])),
        ),
        KeyValue::new("toold.ints", Value::Array(Array::I64(vec![1, -2, 0]))),
        KeyValue::new("toold.bools", Value::Array(Array::Bool(vec![true, false]))),
        KeyValue::new("toold.floats", Value::Array(Array::F64(vec![1.5, -0.0]))),
    ];
    request.dropped_attributes_count = 3;
    request.status = Status::Ok;

    let mut batch_span = span("batch", &toold, 2);
    batch_span.parent_span_id = SpanId::from(1);
    batch_span.events.events.push(Event::new(
        "exception",
        SystemTime::UNIX_EPOCH + Duration::from_secs(1_764_000_001),
        vec![KeyValue::new("exception.message", "boom")],
        1,
    ));
    batch_span
        .events
        .events
        .push(Event::new("plain", SystemTime::UNIX_EPOCH, Vec::new(), 0));
    batch_span.events.dropped_count = 4;
    batch_span.links.links.push(Link::new(
        context(7, 8, false, true, "a=b"),
        vec![KeyValue::new("link.why", "follows")],
        2,
    ));
    batch_span
        .links
        .links
        .push(Link::new(context(9, 10, true, false, ""), Vec::new(), 0));
    batch_span.links.dropped_count = 1;

    let mut failed = span("execute_tool", &other, 3);
    failed.parent_span_id = SpanId::from(2);
    failed.span_context = context(0x0af7651916cd43dd8448eb211c80319c, 3, false, false, "");
    failed.status = Status::error("the tool failed: ünïcode");
    failed.span_kind = SpanKind::Client;

    let mut producer = span("hook", &toold, 4);
    producer.span_kind = SpanKind::Producer;
    let mut consumer = span("approval", &other, 5);
    consumer.span_kind = SpanKind::Consumer;
    consumer.status = Status::error("");

    let resource = Resource::builder_empty()
        .with_schema_url(
            [KeyValue::new("service.name", "toold")],
            "https://opentelemetry.io/schemas/1.30.0",
        )
        .with_attribute(KeyValue::new("service.version", "9.9.9"))
        .with_attribute(KeyValue::new("host.cpus", 2_i64))
        .build();
    (
        vec![request, batch_span, failed, producer, consumer],
        resource,
    )
}

/// The bytes decode to what `opentelemetry-proto`'s transform (the exporter toold used
/// before) makes of the same batch.
#[test]
fn encodes_what_the_transform_makes() {
    let (batch, resource) = batch();
    let (resource_body, schema_url) = encode_resource(&resource);
    let bytes = encode_request(&resource_body, &schema_url, &batch);
    let ours = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("an export request");
    let theirs = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(
            batch.clone(),
            &ResourceAttributesWithSchema::from(&resource),
        ),
    };
    assert_eq!(ours, theirs);
    // And the same bytes, as prost writes them (the order of fields and the defaults left out).
    assert_eq!(bytes, theirs.encode_to_vec());
}

#[test]
fn an_empty_resource_and_a_large_batch_encode_too() {
    let scope = InstrumentationScope::builder("toold").build();
    let batch: Vec<SpanData> = (1..=600)
        .map(|i| {
            let mut s = span("execute_tool", &scope, i);
            s.attributes = vec![KeyValue::new("gen_ai.tool.name", "x".repeat(i as usize))];
            s
        })
        .collect();
    let bytes = encode_request(&[], "", &batch);
    let ours = ExportTraceServiceRequest::decode(bytes.as_slice()).expect("an export request");
    let theirs = ExportTraceServiceRequest {
        resource_spans: group_spans_by_resource_and_scope(
            batch,
            &ResourceAttributesWithSchema::from(&Resource::builder_empty().build()),
        ),
    };
    assert_eq!(ours, theirs);
}

#[test]
fn headers_and_timeout_come_from_the_standard_variables() {
    let env = |pairs: &'static [(&'static str, &'static str)]| {
        move |name: &str| {
            pairs
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| (*v).to_owned())
        }
    };
    let settings = ExportSettings::from_env(env(&[
        (
            "OTEL_EXPORTER_OTLP_HEADERS",
            "api-key=general, Authorization=Basic%20abc%3D%3D ,",
        ),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "2500"),
    ]))
    .unwrap();
    assert_eq!(
        settings.headers,
        vec![
            ("api-key".to_owned(), "general".to_owned()),
            ("authorization".to_owned(), "Basic abc==".to_owned()),
        ]
    );
    assert_eq!(settings.timeout, Some(Duration::from_millis(2500)));

    let specific = ExportSettings::from_env(env(&[
        ("OTEL_EXPORTER_OTLP_HEADERS", "a=general"),
        ("OTEL_EXPORTER_OTLP_TRACES_HEADERS", "b=traces"),
        ("OTEL_EXPORTER_OTLP_TIMEOUT", "1"),
        ("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "30"),
    ]))
    .unwrap();
    assert_eq!(
        specific.headers,
        vec![("b".to_owned(), "traces".to_owned())]
    );
    assert_eq!(specific.timeout, Some(Duration::from_millis(30)));
    assert_eq!(
        ExportSettings::from_env(env(&[])).unwrap(),
        ExportSettings::default()
    );

    let bad = |pairs: &'static [(&'static str, &'static str)]| {
        ExportSettings::from_env(env(pairs)).unwrap_err()
    };
    assert!(
        bad(&[("OTEL_EXPORTER_OTLP_HEADERS", "novalue")]).contains("OTEL_EXPORTER_OTLP_HEADERS")
    );
    assert!(
        bad(&[("OTEL_EXPORTER_OTLP_HEADERS", "x=a%0d%0aInjected: 1")])
            .contains("not a valid header")
    );
    assert!(bad(&[("OTEL_EXPORTER_OTLP_HEADERS", "bad key=1")]).contains("not a valid header"));
    assert!(
        bad(&[("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", "10s")])
            .contains("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT")
    );
    assert!(bad(&[("OTEL_EXPORTER_OTLP_TIMEOUT", "0")]).contains("positive"));
    assert!(bad(&[("OTEL_EXPORTER_OTLP_HEADERS", "Host=x")]).contains("set by the exporter"));
    assert!(
        bad(&[(
            "OTEL_EXPORTER_OTLP_HEADERS",
            "a=1,transfer-encoding=chunked"
        )])
        .contains("set by the exporter")
    );
    // Keys are taken as written (only values are percent-decoded).
    let encoded_key =
        ExportSettings::from_env(env(&[("OTEL_EXPORTER_OTLP_HEADERS", "a%41b=%41")])).unwrap();
    assert_eq!(
        encoded_key.headers,
        vec![("a%41b".to_owned(), "A".to_owned())]
    );
}

/// A runtime for the clients, as the daemon's.
fn runtime() -> tokio::runtime::Runtime {
    tokio::runtime::Builder::new_multi_thread()
        .worker_threads(1)
        .enable_all()
        .build()
        .unwrap()
}

#[test]
fn tls_over_grpc_and_bad_urls_are_refused() {
    let settings = ExportSettings::default();
    let runtime = runtime();
    let _inside = runtime.enter();
    let err = OtlpExporter::grpc("https://collector:4317", &settings).unwrap_err();
    assert!(err.contains("TLS"), "{err}");
    assert!(OtlpExporter::grpc("HTTPS://collector:4317", &settings).is_err());
    assert!(OtlpExporter::grpc("http://collector:4317", &settings).is_ok());
    assert!(OtlpExporter::http("https://collector:4318/v1/traces", &settings).is_ok());
    assert!(OtlpExporter::http("ftp://collector/v1/traces", &settings).is_err());
    assert!(OtlpExporter::http("http://:4318/v1/traces", &settings).is_err());
    assert!(OtlpExporter::http("not a url", &settings).is_err());
    let err = OtlpExporter::http("http://user:pw@collector/v1/traces", &settings).unwrap_err();
    assert!(err.contains("credentials"), "{err}");
    assert!(OtlpExporter::http("http://collector/v1/traces", &settings).is_ok());
    assert!(OtlpExporter::http("http://[::1]:4318/v1/traces", &settings).is_ok());
}

/// One request as a collector reads it: the head's lines and the body.
fn read_request(reader: &mut BufReader<std::net::TcpStream>) -> Option<(Vec<String>, Vec<u8>)> {
    let mut head = Vec::new();
    let mut length = 0;
    loop {
        let mut line = String::new();
        if reader.read_line(&mut line).ok()? == 0 {
            return None;
        }
        let line = line.trim_end().to_owned();
        if line.is_empty() {
            break;
        }
        if let Some(value) = line.strip_prefix("content-length: ") {
            length = value.parse().unwrap();
        }
        head.push(line);
    }
    let mut body = vec![0; length];
    reader.read_exact(&mut body).ok()?;
    Some((head, body))
}

/// What [`collector`] received: each request's head lines and body.
type Requests = std::sync::mpsc::Receiver<(Vec<String>, Vec<u8>)>;

/// A collector on loopback that answers each request with the next of `answers`, closing the
/// connection after those marked so; what it received comes back through the channel.
fn collector(
    answers: Vec<(&'static str, bool)>,
) -> (String, Requests, std::thread::JoinHandle<usize>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    let (sender, received) = std::sync::mpsc::channel();
    let handle = std::thread::spawn(move || {
        let mut answers = answers.into_iter();
        let mut connections = 0;
        'accept: while let Some(mut answer) = answers.next() {
            let (stream, _) = listener.accept().unwrap();
            connections += 1;
            let mut reader = BufReader::new(stream);
            loop {
                let Some(request) = read_request(&mut reader) else {
                    continue 'accept;
                };
                sender.send(request).unwrap();
                reader.get_mut().write_all(answer.0.as_bytes()).unwrap();
                if answer.1 {
                    continue 'accept;
                }
                match answers.next() {
                    Some(next) => answer = next,
                    None => break 'accept,
                }
            }
        }
        connections
    });
    (url, received, handle)
}

const OK_EMPTY: &str =
    "HTTP/1.1 200 OK\r\ncontent-type: application/x-protobuf\r\ncontent-length: 0\r\n\r\n";
const OK_CLOSE: &str = "HTTP/1.1 200 OK\r\nconnection: close\r\ncontent-length: 0\r\n\r\n";
const REFUSED: &str = "HTTP/1.1 400 Bad Request\r\ncontent-length: 17\r\n\r\nnot an export req";
const BUSY: &str = "HTTP/1.1 503 Service Unavailable\r\ncontent-length: 0\r\n\r\n";

/// An exporter to `url` on its own runtime, and one span to send.
fn http_exporter(url: &str, timeout: Duration) -> (tokio::runtime::Runtime, OtlpExporter) {
    let runtime = runtime();
    let settings = ExportSettings {
        headers: vec![("api-key".into(), "the key".into())],
        timeout: Some(timeout),
    };
    let mut exporter = {
        let _inside = runtime.enter();
        OtlpExporter::http(url, &settings).unwrap()
    };
    exporter.set_resource(&Resource::builder_empty().build());
    (runtime, exporter)
}

fn one_span() -> Vec<SpanData> {
    vec![span(
        "request",
        &InstrumentationScope::builder("toold").build(),
        1,
    )]
}

/// As the SDK's batch processor drives it: from a plain thread.
fn export(exporter: &OtlpExporter) -> OTelSdkResult {
    futures::executor::block_on(exporter.export(one_span()))
}

#[test]
fn http_exports_carry_the_request_and_the_headers_and_retry_what_may_pass() {
    let (url, received, collector) = collector(vec![
        (OK_EMPTY, false),
        (OK_CLOSE, true),
        (REFUSED, false),
        (BUSY, false),
        (BUSY, false),
        (OK_EMPTY, false),
    ]);
    let (_runtime, exporter) = http_exporter(&url, Duration::from_secs(5));
    export(&exporter).expect("exported");
    export(&exporter).expect("exported, then the collector closes");
    let refused = export(&exporter).unwrap_err().to_string();
    assert!(
        refused.contains("HTTP 400") && refused.contains("not an export req"),
        "{refused}"
    );
    export(&exporter).expect("exported on the third try, after two 503s");
    drop(exporter);
    collector.join().unwrap();

    let requests: Vec<_> = received.try_iter().collect();
    assert_eq!(
        requests.len(),
        6,
        "two, one refused (not retried), three for the 503s"
    );
    let expected = encode_request(&[], "", &one_span());
    let (head, body) = &requests[0];
    assert_eq!(head[0], "POST /v1/traces HTTP/1.1");
    assert!(
        head.contains(&"content-type: application/x-protobuf".to_owned()),
        "{head:?}"
    );
    assert!(head.contains(&"api-key: the key".to_owned()), "{head:?}");
    assert_eq!(
        ExportTraceServiceRequest::decode(body.as_slice()).unwrap(),
        ExportTraceServiceRequest::decode(expected.as_slice()).unwrap()
    );
}

#[test]
fn http_to_nobody_fails_after_its_retries() {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/v1/traces", listener.local_addr().unwrap());
    drop(listener);
    let (_runtime, exporter) = http_exporter(&url, Duration::from_secs(5));
    let started = std::time::Instant::now();
    let err = export(&exporter).unwrap_err().to_string();
    assert!(err.contains("1 spans not exported"), "{err}");
    assert!(
        started.elapsed() >= Duration::from_millis(700),
        "retried after 100, 200 and 400 ms"
    );
}
