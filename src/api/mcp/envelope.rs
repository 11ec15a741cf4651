//! Whether a body (an HTTP POST's, a stdio line) is one JSON-RPC message, checked before rmcp
//! sees it, and the JSON-RPC error for one that is not. rmcp answers what it cannot parse with
//! a plain-text HTTP 415, or on stdio not at all; this check gives those bodies the answers
//! JSON-RPC 2.0 prescribes instead:
//!
//! - not JSON (or an empty body): `-32700` Parse error;
//! - a JSON array, a JSON-RPC batch: `-32600` Invalid Request. MCP removed batching in
//!   2025-06-18; 2025-11-25 and 2026-07-28 say a POST body (a stdio line) is one message. The
//!   TypeScript SDK refuses a batch holding a 2026 request with 400 and `-32600` (an
//!   all-legacy batch it still serves, for 2025-03-26 clients); the Python SDK refuses every
//!   batch with 400 and `-32602`. rmcp serves no batch, so every one is refused, as the
//!   TypeScript SDK does the ones it cannot serve;
//! - JSON that is not a JSON-RPC 2.0 message (not an object, `jsonrpc` not `"2.0"`, an `id`
//!   that is not a string or an integer, a `method` that is not a string, `params` that are not
//!   an object, neither `method` nor `result`/`error`): `-32600` Invalid Request.
//!
//! The error's `id` is the message's own when it could be read, else `null` (JSON-RPC 2.0
//! §5; the TypeScript and Python SDKs do the same; MCP's schema would rather omit it, and
//! rmcp's own `-32600` answers do). Only the outline is checked, in one pass that borrows
//! from the body and builds no tree: whether the params fit the method stays rmcp's and the
//! handler's to say. What passes goes on to rmcp as it came.

use rmcp::model::ErrorData;
use serde::de::{Deserializer, IgnoredAny};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use serde_json::value::RawValue;

/// How much of an offending value an error message quotes.
const QUOTED_CHARS: usize = 40;

/// A body that is not one JSON-RPC message, and what to answer it.
#[derive(Debug)]
pub struct Refusal {
    /// The message's `id` when it could be read, else `Null`.
    id: Value,
    error: ErrorData,
}

impl Refusal {
    fn parse_error(err: &serde_json::Error) -> Refusal {
        Refusal {
            id: Value::Null,
            error: ErrorData::parse_error(format!("parse error: {err}"), None),
        }
    }

    fn invalid_request(id: Value, message: String) -> Refusal {
        Refusal {
            id,
            error: ErrorData::invalid_request(message, None),
        }
    }

    /// A message with the outline of one that rmcp still could not take (its fields' types
    /// are not MCP's: an `error` without a numeric `code`, say).
    pub fn unreadable(id: Value) -> Refusal {
        Refusal::invalid_request(
            id,
            "invalid request: not a JSON-RPC message the server can read (its fields do not \
             have the types MCP gives them)"
                .to_owned(),
        )
    }

    /// A stdio line longer than the server takes (HTTP answers 413 instead).
    pub fn too_long(limit: usize) -> Refusal {
        Refusal::invalid_request(
            Value::Null,
            format!("invalid request: a message longer than {limit} bytes is not read"),
        )
    }

    /// A body that could not be read to its end (the client went away, or stalled past the
    /// request timeout).
    pub fn unread(err: &dyn std::fmt::Display) -> Refusal {
        Refusal {
            id: Value::Null,
            error: ErrorData::parse_error(
                format!("parse error: the body was not read: {err}"),
                None,
            ),
        }
    }

    /// The JSON-RPC error code (`-32700`, `-32600`).
    pub fn code(&self) -> i32 {
        self.error.code.0
    }

    /// The error response, serialized.
    pub fn to_json(&self) -> Vec<u8> {
        #[derive(Serialize)]
        struct ErrorResponse<'a> {
            jsonrpc: &'static str,
            id: &'a Value,
            error: &'a ErrorData,
        }
        let response = ErrorResponse {
            jsonrpc: "2.0",
            id: &self.id,
            error: &self.error,
        };
        // Invariant: a struct of strings, a JSON value and rmcp's `ErrorData` always serializes.
        serde_json::to_vec(&response).expect("an error response serializes")
    }
}

/// What the check found a body to be.
#[derive(Debug, PartialEq)]
pub enum Outline {
    /// A request or notification: a `method`, and an `id` unless a notification.
    Call { id: Value },
    /// A response or an error response to a request of the server's.
    Response,
}

/// Checks that `body` is one JSON-RPC 2.0 message (its outline only).
pub fn check(body: &[u8]) -> Result<Outline, Refusal> {
    let first = body
        .iter()
        .find(|byte| !matches!(byte, b' ' | b'\t' | b'\n' | b'\r'));
    if first == Some(&b'{') {
        return check_object(body);
    }
    // Anything else is refused; its syntax is checked (so that broken JSON is a parse error)
    // without building it.
    serde_json::from_slice::<IgnoredAny>(body).map_err(|err| Refusal::parse_error(&err))?;
    let message = match first {
        Some(b'[') => {
            "invalid request: a JSON-RPC batch (an array) is not accepted; MCP removed batching \
             in its 2025-06-18 revision, so send each message on its own"
        }
        Some(b'"') => "invalid request: a JSON-RPC message is a JSON object, not a string",
        Some(b'n') => "invalid request: a JSON-RPC message is a JSON object, not null",
        Some(b't' | b'f') => "invalid request: a JSON-RPC message is a JSON object, not a boolean",
        _ => "invalid request: a JSON-RPC message is a JSON object, not a number",
    };
    Err(Refusal::invalid_request(Value::Null, message.to_owned()))
}

/// The members that make a JSON-RPC message, each borrowed as written; every member that is
/// present is `Some`, `null` included (JSON-RPC tells a message's kind by which are there).
#[derive(Deserialize)]
struct Envelope<'a> {
    #[serde(default, borrow, deserialize_with = "present")]
    jsonrpc: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    id: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    method: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    params: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    result: Option<&'a RawValue>,
    #[serde(default, borrow, deserialize_with = "present")]
    error: Option<&'a RawValue>,
}

fn present<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Option<&'de RawValue>, D::Error> {
    <&RawValue>::deserialize(deserializer).map(Some)
}

fn check_object(body: &[u8]) -> Result<Outline, Refusal> {
    let envelope: Envelope = serde_json::from_slice(body).map_err(|err| match err.classify() {
        serde_json::error::Category::Data => Refusal::invalid_request(
            Value::Null,
            format!("invalid request: not a JSON-RPC message: {err}"),
        ),
        _ => Refusal::parse_error(&err),
    })?;
    let id = match envelope.id {
        None => Value::Null,
        Some(raw) => match serde_json::from_str::<Value>(raw.get()) {
            Ok(id @ Value::String(_)) => id,
            Ok(Value::Number(number)) if number.is_i64() || number.is_u64() => {
                Value::Number(number)
            }
            _ => {
                return Err(Refusal::invalid_request(
                    Value::Null,
                    format!(
                        "invalid request: \"id\" must be a string or an integer, not {}",
                        quoted(raw)
                    ),
                ));
            }
        },
    };
    let invalid = |message: String| Err(Refusal::invalid_request(id.clone(), message));
    match envelope.jsonrpc {
        Some(version) if version.get() == "\"2.0\"" => {}
        Some(version) => {
            return invalid(format!(
                "invalid request: \"jsonrpc\" must be \"2.0\", not {}",
                quoted(version)
            ));
        }
        None => return invalid("invalid request: \"jsonrpc\": \"2.0\" is missing".to_owned()),
    }
    let answers = envelope.result.is_some() || envelope.error.is_some();
    let Some(method) = envelope.method else {
        if envelope.result.is_some() && envelope.error.is_some() {
            return invalid(
                "invalid request: a response has \"result\" or \"error\", not both".to_owned(),
            );
        }
        if !answers {
            return invalid(
                "invalid request: neither a request nor a response: no \"method\", \"result\" \
                 or \"error\""
                    .to_owned(),
            );
        }
        return Ok(Outline::Response);
    };
    if !method.get().starts_with('"') {
        return invalid(format!(
            "invalid request: \"method\" must be a string, not {}",
            quoted(method)
        ));
    }
    if answers {
        return invalid("invalid request: a request has no \"result\" or \"error\"".to_owned());
    }
    if let Some(params) = envelope.params
        && !params.get().starts_with('{')
    {
        return invalid(format!(
            "invalid request: \"params\" must be an object, not {}",
            quoted(params)
        ));
    }
    Ok(Outline::Call { id })
}

/// A value as written, cut short when long.
fn quoted(raw: &RawValue) -> String {
    let text = raw.get();
    match text.char_indices().nth(QUOTED_CHARS) {
        Some((end, _)) => format!("{}…", &text[..end]),
        None => text.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// (body, expected code or `None` for a message, the error message holds, the id echoed)
    const CASES: &[(&str, Option<i32>, &str, &str)] = &[
        (r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#, None, "", "1"),
        (
            r#" {"jsonrpc":"2.0","id":"a","method":"tools/list","params":{}} "#,
            None,
            "",
            r#""a""#,
        ),
        (
            r#"{"jsonrpc":"2.0","method":"notifications/initialized"}"#,
            None,
            "",
            "null",
        ),
        (r#"{"jsonrpc":"2.0","id":7,"result":{}}"#, None, "", "null"),
        (
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":-1,"message":"x"}}"#,
            None,
            "",
            "null",
        ),
        ("", Some(-32700), "EOF while parsing", "null"),
        (
            "{\"jsonrpc\": \"2.0\", \"id\": 1,",
            Some(-32700),
            "EOF while parsing",
            "null",
        ),
        (
            "{this is not json",
            Some(-32700),
            "key must be a string",
            "null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"ping"} x"#,
            Some(-32700),
            "trailing",
            "null",
        ),
        ("[1, 2", Some(-32700), "EOF while parsing", "null"),
        (
            r#"[{"jsonrpc":"2.0","id":1,"method":"ping"}]"#,
            Some(-32600),
            "batch",
            "null",
        ),
        ("[]", Some(-32600), "batch", "null"),
        ("42", Some(-32600), "not a number", "null"),
        (r#""ping""#, Some(-32600), "not a string", "null"),
        ("null", Some(-32600), "not null", "null"),
        ("true", Some(-32600), "not a boolean", "null"),
        (
            r#"{"jsonrpc":"1.0","id":1,"method":"ping"}"#,
            Some(-32600),
            "not \"1.0\"",
            "1",
        ),
        (
            r#"{"id":1,"method":"ping"}"#,
            Some(-32600),
            "is missing",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            Some(-32600),
            "not null",
            "null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1.5,"method":"ping"}"#,
            Some(-32600),
            "not 1.5",
            "null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":{},"method":"ping"}"#,
            Some(-32600),
            "\"id\"",
            "null",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":5}"#,
            Some(-32600),
            "\"method\" must",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":[1]}"#,
            Some(-32600),
            "not [1]",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","params":5}"#,
            Some(-32600),
            "not 5",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"method":"x","result":{}}"#,
            Some(-32600),
            "no \"result\"",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1}"#,
            Some(-32600),
            "no \"method\"",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"result":1,"error":{}}"#,
            Some(-32600),
            "not both",
            "1",
        ),
        (
            r#"{"jsonrpc":"2.0","id":1,"id":2,"method":"x"}"#,
            Some(-32600),
            "duplicate",
            "null",
        ),
    ];

    #[test]
    fn bodies_are_messages_or_refused_with_the_jsonrpc_error_they_call_for() {
        for (body, code, says, id) in CASES {
            let checked = check(body.as_bytes());
            match (code, checked) {
                (None, Ok(_)) => {}
                (Some(code), Err(refusal)) => {
                    let response: Value = serde_json::from_slice(&refusal.to_json()).unwrap();
                    assert_eq!(response["jsonrpc"], "2.0", "{body}");
                    assert_eq!(response["error"]["code"], *code, "{body}: {response}");
                    let message = response["error"]["message"].as_str().unwrap();
                    assert!(message.contains(says), "{body}: {message}");
                    assert_eq!(response["id"].to_string(), *id, "{body}: {response}");
                    assert!(response.as_object().unwrap().contains_key("id"), "{body}");
                }
                (code, checked) => panic!("{body}: expected {code:?}, got {checked:?}"),
            }
        }
    }

    #[test]
    fn a_request_keeps_its_id_and_a_long_offending_value_is_cut() {
        let outline = check(br#"{"jsonrpc":"2.0","id":"r-1","method":"ping"}"#).unwrap();
        assert_eq!(
            outline,
            Outline::Call {
                id: Value::from("r-1")
            }
        );
        let long = format!(
            r#"{{"jsonrpc":"{}","id":1,"method":"ping"}}"#,
            "v".repeat(1000)
        );
        let refusal = check(long.as_bytes()).unwrap_err();
        let text = String::from_utf8(refusal.to_json()).unwrap();
        assert!(text.len() < 300, "{text}");
        assert!(text.contains("vvvv…"), "{text}");
    }
}
