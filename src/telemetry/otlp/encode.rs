//! The encoding of an OTLP export (`opentelemetry/proto/collector/trace/v1/trace_service.proto`
//! and the messages it names) from the SDK's spans, in one pass. Scalars at their default are
//! left out, as proto3 encoders do; `resource`, `scope` and `status` are always written, as
//! `opentelemetry-proto`'s transform sets them.

use std::time::{SystemTime, UNIX_EPOCH};

use opentelemetry::trace::{SpanId, SpanKind, Status};
use opentelemetry::{Array, InstrumentationScope, Value};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::SpanData;

/// A `Resource` message's body, and the resource's schema URL.
pub fn encode_resource(resource: &Resource) -> (Vec<u8>, String) {
    let mut body = Vec::new();
    for (key, value) in resource.iter() {
        message(&mut body, 1, |buf| key_value(buf, key.as_str(), value));
    }
    let schema_url = resource.schema_url().unwrap_or_default().to_owned();
    (body, schema_url)
}

const VARINT: u8 = 0;
const FIXED64: u8 = 1;
const LEN: u8 = 2;
const FIXED32: u8 = 5;

fn varint(buf: &mut Vec<u8>, value: u64) {
    let (bytes, len) = varint_bytes(value);
    buf.extend_from_slice(&bytes[..len]);
}

/// `value` as a varint: its bytes, and how many there are.
fn varint_bytes(mut value: u64) -> ([u8; 10], usize) {
    let mut bytes = [0u8; 10];
    let mut len = 0;
    while value >= 0x80 {
        bytes[len] = (value as u8) | 0x80;
        value >>= 7;
        len += 1;
    }
    bytes[len] = value as u8;
    (bytes, len + 1)
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
    let (prefix, n) = varint_bytes(len as u64);
    buf[at] = prefix[0];
    buf.splice(at + 1..at + 1, prefix[1..n].iter().copied());
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
                let text = other.to_string();
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
