//! A call as the dispatcher receives it, and the one result it returns for it.
//!
//! These are wire-neutral: provider formats (`registry::calls`) convert to and from them, and
//! the doors serialise them. A call's input may be malformed (an OpenAI `arguments` string that
//! is not JSON); that is the call's own `input_validation` error, never a failed batch.

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use super::ErrorKind;

/// The input of a call: parsed JSON, or the raw text that did not parse.
#[derive(Clone, Debug, PartialEq)]
pub enum CallInput {
    Json(Value),
    Malformed { raw: String, reason: String },
}

impl CallInput {
    /// Parses a provider's `arguments` string. An empty string means `{}`, as the OpenAI API
    /// sends for tools without parameters.
    pub fn from_arguments(raw: &str) -> CallInput {
        if raw.trim().is_empty() {
            return CallInput::Json(Value::Object(Map::new()));
        }
        match serde_json::from_str(raw) {
            Ok(value) => CallInput::Json(value),
            Err(err) => CallInput::Malformed {
                raw: raw.to_owned(),
                reason: err.to_string(),
            },
        }
    }

    pub fn as_json(&self) -> Option<&Value> {
        match self {
            CallInput::Json(value) => Some(value),
            CallInput::Malformed { .. } => None,
        }
    }

    /// The input as recorded in events and the audit log: the raw text when it did not parse.
    pub fn to_record(&self) -> Value {
        match self {
            CallInput::Json(value) => value.clone(),
            CallInput::Malformed { raw, .. } => Value::String(raw.clone()),
        }
    }

    /// [`CallInput::to_record`] as a view to serialise, copying nothing.
    pub fn recorded(&self) -> Recorded<'_> {
        Recorded(self)
    }
}

/// A call's input serialised as [`CallInput::to_record`] gives it ([`CallInput::recorded`]).
pub struct Recorded<'a>(&'a CallInput);

impl Serialize for Recorded<'_> {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        match self.0 {
            CallInput::Json(value) => value.serialize(serializer),
            CallInput::Malformed { raw, .. } => serializer.serialize_str(raw),
        }
    }
}

/// One tool call of a batch.
#[derive(Clone, Debug, PartialEq)]
pub struct ToolCall {
    pub id: String,
    pub name: String,
    pub input: CallInput,
}

impl ToolCall {
    pub fn new(id: impl Into<String>, name: impl Into<String>, input: Value) -> ToolCall {
        ToolCall {
            id: id.into(),
            name: name.into(),
            input: CallInput::Json(input),
        }
    }
}

/// Where an oversized output went.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffloadedResult {
    pub result_id: String,
    pub total_chars: u64,
}

/// The one result of one call.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolResult {
    pub id: String,
    pub name: String,
    pub is_error: bool,
    pub output: String,
    pub error_kind: Option<ErrorKind>,
    pub duration_ms: f64,
    pub offloaded: Option<OffloadedResult>,
    /// Structured data the tool returned beside its text, if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub structured: Option<Value>,
    /// Tool metadata (exit codes, sandbox used, …).
    #[serde(default, skip_serializing_if = "Map::is_empty")]
    pub metadata: Map<String, Value>,
}

impl ToolResult {
    /// An error result for a call that never reached its tool.
    pub fn refused(call: &ToolCall, kind: ErrorKind, message: &str) -> ToolResult {
        ToolResult {
            id: call.id.clone(),
            name: call.name.clone(),
            is_error: true,
            output: kind.format_output(message),
            error_kind: Some(kind),
            duration_ms: 0.0,
            offloaded: None,
            structured: None,
            metadata: Map::new(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_strings_parse_or_stay_malformed() {
        assert_eq!(
            CallInput::from_arguments(r#"{"a":1}"#),
            CallInput::Json(serde_json::json!({"a": 1}))
        );
        assert_eq!(
            CallInput::from_arguments("  "),
            CallInput::Json(serde_json::json!({}))
        );
        let CallInput::Malformed { raw, reason } = CallInput::from_arguments("{\"a\":") else {
            panic!("truncated JSON must stay malformed");
        };
        assert_eq!(raw, "{\"a\":");
        assert!(reason.contains("EOF"), "{reason}");
    }
}
