//! Provider call shapes in, provider result shapes out (DESIGN §4 batch bodies).
//!
//! A body is an envelope around calls. A broken envelope (not an object, `calls` missing, a
//! call without an id, duplicate ids, an unknown format) is the caller's error for the whole
//! batch; a broken call input (an OpenAI `arguments` string that is not JSON) is only that
//! call's `input_validation` error. Results mirror the request's shape so an agent can append
//! them to its conversation unchanged.
//!
//! Unknown members are refused where toold owns the shape: every envelope (each format's
//! own members plus `format` and `idempotency_key`) and each toold `calls[]` entry (`id`,
//! `name`, `input`). A dropped member is a silent misunderstanding — `arguments` for `input`
//! would run the call with `{}` and blame the tool's schema, `idempotencykey` would turn a
//! retry into a second run — so the error names the member, the ones expected, and the
//! likely one meant ([`UnknownField`]). What the provider SDKs put in their own items
//! (Anthropic content blocks, Responses output items, the Chat Completions message and its
//! `tool_calls`) is theirs and grows with every SDK release, so it stays accepted and
//! ignored; a call's input is its tool's schema's business.

use std::collections::HashSet;

use serde_json::{Map, Value, json};

pub use super::results_json::results_json;
use crate::tool::{CallInput, ToolCall, ToolResult};

/// The four batch body shapes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum BatchFormat {
    Toold,
    Anthropic,
    OpenAi,
    OpenAiChat,
}

impl BatchFormat {
    pub fn as_str(self) -> &'static str {
        match self {
            BatchFormat::Toold => "toold",
            BatchFormat::Anthropic => "anthropic",
            BatchFormat::OpenAi => "openai",
            BatchFormat::OpenAiChat => "openai_chat",
        }
    }
}

/// The format [`BatchFormat::as_str`] names; any other name is an error naming it.
impl std::str::FromStr for BatchFormat {
    type Err = EnvelopeError;

    fn from_str(name: &str) -> Result<BatchFormat, EnvelopeError> {
        match name {
            "toold" => Ok(BatchFormat::Toold),
            "anthropic" => Ok(BatchFormat::Anthropic),
            "openai" => Ok(BatchFormat::OpenAi),
            "openai_chat" => Ok(BatchFormat::OpenAiChat),
            other => Err(EnvelopeError::UnknownFormat(other.to_owned())),
        }
    }
}

/// Serialised by name (`"openai_chat"`), as requests name it.
impl serde::Serialize for BatchFormat {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_str(self.as_str())
    }
}

/// Why a batch body is refused as a whole.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum EnvelopeError {
    #[error("malformed batch body: {0}")]
    Malformed(String),
    #[error("unknown batch format \"{0}\"; expected toold, anthropic, openai or openai_chat")]
    UnknownFormat(String),
    #[error("duplicate call id \"{0}\" in one batch")]
    DuplicateCallId(String),
    #[error("{0}")]
    UnknownField(UnknownField),
}

/// A member toold does not know, where it was, what was expected there, and a hint.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct UnknownField {
    pub field: String,
    /// `the batch body` or `calls[N]`.
    pub place: String,
    pub expected: &'static [&'static str],
    /// `did you mean "input"?` and the like.
    pub hint: Option<String>,
}

impl std::fmt::Display for UnknownField {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "unknown field \"{}\" in {}; expected one of: {}",
            self.field,
            self.place,
            self.expected.join(", ")
        )?;
        if let Some(hint) = &self.hint {
            write!(f, " ({hint})")?;
        }
        Ok(())
    }
}

/// The envelope's members in each shape, and a toold call's.
const TOOLD_ENVELOPE: &[&str] = &["calls", "idempotency_key", "format"];
const ANTHROPIC_ENVELOPE: &[&str] = &["format", "content", "idempotency_key"];
const OPENAI_ENVELOPE: &[&str] = &["format", "output", "idempotency_key"];
const OPENAI_CHAT_ENVELOPE: &[&str] = &["format", "message", "idempotency_key"];
const TOOLD_CALL: &[&str] = &["id", "name", "input"];

/// The member names other shapes (and habits from them) use for a toold call's members.
const TOOLD_CALL_ALIASES: &[(&str, &str)] = &[
    ("arguments", "input"),
    ("args", "input"),
    ("parameters", "input"),
    ("params", "input"),
    ("tool_input", "input"),
    ("tool", "name"),
    ("tool_name", "name"),
    ("function", "name"),
    ("call_id", "id"),
    ("tool_use_id", "id"),
    ("tool_call_id", "id"),
];

/// A toold envelope's member that belongs to another shape, and that shape's format.
const OTHER_SHAPES: &[(&str, &str)] = &[
    ("content", "anthropic"),
    ("output", "openai"),
    ("message", "openai_chat"),
];

/// The first member of `object` not in `expected`, as an error with a hint: a known alias's
/// meaning, else the closest expected name, else (toold envelope) the format it belongs to.
fn refuse_unknown(
    object: &Map<String, Value>,
    expected: &'static [&'static str],
    place: impl FnOnce() -> String,
    aliases: &[(&str, &str)],
) -> Result<(), EnvelopeError> {
    let Some(field) = object.keys().find(|key| !expected.contains(&key.as_str())) else {
        return Ok(());
    };
    let alias = aliases.iter().find(|(alias, _)| alias == field);
    let meant = alias
        .map(|(_, meant)| *meant)
        .or_else(|| crate::tool::closest(field, expected.iter().copied()));
    let hint = match meant {
        Some(meant) => Some(format!("did you mean \"{meant}\"?")),
        None if expected == TOOLD_ENVELOPE => OTHER_SHAPES
            .iter()
            .find(|(member, _)| member == field)
            .map(|(_, format)| format!("an {format} body says \"format\": \"{format}\"")),
        None => None,
    };
    Err(EnvelopeError::UnknownField(UnknownField {
        field: field.clone(),
        place: place(),
        expected,
        hint,
    }))
}

/// A batch as every door hands it to the service: the provider shape its answer takes, its
/// calls, and what a retry is recognised by.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchRequest {
    pub format: BatchFormat,
    pub calls: Vec<ToolCall>,
    pub idempotency: Option<Idempotency>,
}

/// A batch's idempotency key and the hash of the request it was first used with: a retry
/// with the key and an equal hash gets the stored results, a different hash is a conflict.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Idempotency {
    pub key: String,
    pub request_hash: String,
}

impl Idempotency {
    /// `key` for `request` (a body as received): JSON objects serialise with sorted keys, so
    /// equal requests hash equal whatever their key order on the wire. Only a key's retries
    /// are compared with the hash; hashing every body would cost a batch a second
    /// serialisation of its calls.
    fn new(key: String, request: &Value) -> Idempotency {
        let mut hasher = JsonHasher::default();
        // Writing into the hasher cannot fail, and a `Value` always serialises.
        let _ = serde_json::to_writer(&mut hasher, request);
        hasher.finish(key)
    }

    /// `key` for calls that came typed (gRPC): hashed as the same batch sent as a toold body
    /// would be, written straight into the hasher (no JSON body is built), so a retry through
    /// the other door is recognised.
    fn for_calls(key: String, calls: &[ToolCall]) -> Idempotency {
        let mut hasher = JsonHasher::default();
        let body = TooldBody {
            calls: calls.iter().map(TooldCall::from).collect(),
            idempotency_key: &key,
        };
        let _ = serde_json::to_writer(&mut hasher, &body);
        hasher.finish(key)
    }
}

/// Hashes the JSON text written into it.
#[derive(Default)]
struct JsonHasher(xxhash_rust::xxh3::Xxh3);

impl JsonHasher {
    fn finish(self, key: String) -> Idempotency {
        Idempotency {
            key,
            request_hash: format!("{:032x}", self.0.digest128()),
        }
    }
}

impl std::io::Write for JsonHasher {
    fn write(&mut self, bytes: &[u8]) -> std::io::Result<usize> {
        self.0.update(bytes);
        Ok(bytes.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// A typed batch as its toold body, fields in the order a `Value` sorts them.
#[derive(serde::Serialize)]
struct TooldBody<'a> {
    calls: Vec<TooldCall<'a>>,
    idempotency_key: &'a str,
}

#[derive(serde::Serialize)]
struct TooldCall<'a> {
    id: &'a str,
    input: crate::tool::Recorded<'a>,
    name: &'a str,
}

impl<'a> From<&'a ToolCall> for TooldCall<'a> {
    fn from(call: &'a ToolCall) -> Self {
        TooldCall {
            id: &call.id,
            input: call.input.recorded(),
            name: &call.name,
        }
    }
}

impl BatchRequest {
    pub fn from_json(body: &Value) -> Result<BatchRequest, EnvelopeError> {
        BatchRequest::from_json_owned(body.clone())
    }

    /// [`BatchRequest::from_json`] of a body the caller is done with: the calls' ids, names
    /// and inputs move out of it instead of being copied.
    pub fn from_json_owned(body: Value) -> Result<BatchRequest, EnvelopeError> {
        // Hashed as received, before the calls move out of it.
        let idempotency = match body.get("idempotency_key") {
            None | Some(Value::Null) => None,
            Some(Value::String(key)) => Some(Idempotency::new(key.clone(), &body)),
            Some(_) => return Err(malformed("\"idempotency_key\" must be a string")),
        };
        let Value::Object(mut object) = body else {
            return Err(malformed("the body must be a JSON object"));
        };
        let format = match object.get("format") {
            None | Some(Value::Null) => BatchFormat::Toold,
            Some(Value::String(name)) => match name.as_str() {
                "toold" => BatchFormat::Toold,
                "anthropic" => BatchFormat::Anthropic,
                "openai" => BatchFormat::OpenAi,
                "openai_chat" => BatchFormat::OpenAiChat,
                other => return Err(EnvelopeError::UnknownFormat(other.to_owned())),
            },
            Some(_) => return Err(malformed("\"format\" must be a string")),
        };
        let envelope = match format {
            BatchFormat::Toold => TOOLD_ENVELOPE,
            BatchFormat::Anthropic => ANTHROPIC_ENVELOPE,
            BatchFormat::OpenAi => OPENAI_ENVELOPE,
            BatchFormat::OpenAiChat => OPENAI_CHAT_ENVELOPE,
        };
        refuse_unknown(&object, envelope, || "the batch body".to_owned(), &[])?;
        let calls = match format {
            BatchFormat::Toold => toold_calls(&mut object)?,
            BatchFormat::Anthropic => anthropic_calls(&mut object)?,
            BatchFormat::OpenAi => openai_calls(&mut object)?,
            BatchFormat::OpenAiChat => openai_chat_calls(&mut object)?,
        };
        let mut seen = HashSet::new();
        if let Some(duplicate) = calls.iter().find(|call| !seen.insert(call.id.as_str())) {
            return Err(EnvelopeError::DuplicateCallId(duplicate.id.clone()));
        }
        Ok(BatchRequest {
            format,
            calls,
            idempotency,
        })
    }
}

impl BatchRequest {
    /// A toold-shaped batch from calls already split out by a typed door (gRPC): the same
    /// envelope rules as [`BatchRequest::from_json`] (non-empty ids and names, unique ids).
    pub fn from_calls(
        calls: Vec<ToolCall>,
        idempotency_key: Option<String>,
    ) -> Result<BatchRequest, EnvelopeError> {
        let mut seen = HashSet::new();
        for (position, call) in calls.iter().enumerate() {
            for (key, value) in [("id", &call.id), ("name", &call.name)] {
                if value.is_empty() {
                    return Err(EnvelopeError::Malformed(format!(
                        "call {position}: \"{key}\" must be a non-empty string"
                    )));
                }
            }
            if !seen.insert(call.id.as_str()) {
                return Err(EnvelopeError::DuplicateCallId(call.id.clone()));
            }
        }
        let idempotency = idempotency_key.map(|key| Idempotency::for_calls(key, &calls));
        Ok(BatchRequest {
            format: BatchFormat::Toold,
            calls,
            idempotency,
        })
    }
}

fn malformed(message: &str) -> EnvelopeError {
    EnvelopeError::Malformed(message.to_owned())
}

fn array(object: &mut Map<String, Value>, key: &str) -> Result<Vec<Value>, EnvelopeError> {
    match object.remove(key) {
        Some(Value::Array(items)) => Ok(items),
        _ => Err(EnvelopeError::Malformed(format!(
            "\"{key}\" must be an array"
        ))),
    }
}

/// Takes a non-empty string member out of `item`.
fn string_field(item: &mut Value, key: &str, position: usize) -> Result<String, EnvelopeError> {
    match item.get_mut(key) {
        Some(Value::String(text)) if !text.is_empty() => Ok(std::mem::take(text)),
        _ => Err(EnvelopeError::Malformed(format!(
            "call {position}: \"{key}\" must be a non-empty string"
        ))),
    }
}

/// Takes `input` out of `item` (`{}` when it has none).
fn input_field(item: &mut Value) -> Value {
    item.get_mut("input")
        .map(Value::take)
        .unwrap_or_else(|| json!({}))
}

fn toold_calls(object: &mut Map<String, Value>) -> Result<Vec<ToolCall>, EnvelopeError> {
    array(object, "calls")?
        .into_iter()
        .enumerate()
        .map(|(position, mut call)| {
            if let Value::Object(members) = &call {
                let place = || format!("calls[{position}]");
                refuse_unknown(members, TOOLD_CALL, place, TOOLD_CALL_ALIASES)?;
            }
            Ok(ToolCall {
                id: string_field(&mut call, "id", position)?,
                name: string_field(&mut call, "name", position)?,
                input: CallInput::Json(input_field(&mut call)),
            })
        })
        .collect()
}

fn anthropic_calls(object: &mut Map<String, Value>) -> Result<Vec<ToolCall>, EnvelopeError> {
    array(object, "content")?
        .into_iter()
        .enumerate()
        .filter(|(_, block)| block.get("type").and_then(Value::as_str) == Some("tool_use"))
        .map(|(position, mut block)| {
            Ok(ToolCall {
                id: string_field(&mut block, "id", position)?,
                name: string_field(&mut block, "name", position)?,
                input: CallInput::Json(input_field(&mut block)),
            })
        })
        .collect()
}

/// OpenAI sends `arguments` as a JSON string; an object is accepted too for lenient clients.
fn arguments(item: &mut Value) -> CallInput {
    match item.get_mut("arguments") {
        Some(Value::String(raw)) => CallInput::from_arguments(raw),
        Some(value @ Value::Object(_)) => CallInput::Json(value.take()),
        None | Some(Value::Null) => CallInput::Json(json!({})),
        Some(other) => CallInput::Malformed {
            raw: other.to_string(),
            reason: "\"arguments\" must be a JSON string".into(),
        },
    }
}

fn openai_calls(object: &mut Map<String, Value>) -> Result<Vec<ToolCall>, EnvelopeError> {
    array(object, "output")?
        .into_iter()
        .enumerate()
        .filter(|(_, item)| item.get("type").and_then(Value::as_str) == Some("function_call"))
        .map(|(position, mut item)| {
            Ok(ToolCall {
                id: string_field(&mut item, "call_id", position)?,
                name: string_field(&mut item, "name", position)?,
                input: arguments(&mut item),
            })
        })
        .collect()
}

fn openai_chat_calls(object: &mut Map<String, Value>) -> Result<Vec<ToolCall>, EnvelopeError> {
    let Some(Value::Object(message)) = object.get_mut("message") else {
        return Err(malformed("\"message\" must be an object"));
    };
    let Some(tool_calls) = message.remove("tool_calls").filter(|v| !v.is_null()) else {
        return Ok(Vec::new());
    };
    let Value::Array(tool_calls) = tool_calls else {
        return Err(malformed("\"message.tool_calls\" must be an array"));
    };
    tool_calls
        .into_iter()
        .enumerate()
        .filter(|(_, call)| {
            call.get("type")
                .and_then(Value::as_str)
                .unwrap_or("function")
                == "function"
        })
        .map(|(position, mut call)| {
            let mut function = call.get_mut("function").map(Value::take).ok_or_else(|| {
                EnvelopeError::Malformed(format!("call {position}: \"function\" is missing"))
            })?;
            Ok(ToolCall {
                id: string_field(&mut call, "id", position)?,
                name: string_field(&mut function, "name", position)?,
                input: arguments(&mut function),
            })
        })
        .collect()
}

/// Results in the request's shape.
pub fn format_results(format: BatchFormat, batch_id: &str, results: &[ToolResult]) -> Value {
    serde_json::to_value(ResultsBody::new(format, batch_id, results))
        .unwrap_or_else(|err| unreachable_json(&err))
}

/// [`results_json`] the plain way, serde_json over the shapes below: the bytes the
/// hand-written text must equal (its tests compare the two).
#[cfg(test)]
pub(super) fn results_json_by_serde(
    format: BatchFormat,
    batch_id: &str,
    results: &[ToolResult],
) -> Vec<u8> {
    serde_json::to_vec(&ResultsBody::new(format, batch_id, results)).unwrap_or_default()
}

/// One result in the request's shape (what a stream yields per result).
pub fn format_result(format: BatchFormat, result: &ToolResult) -> Value {
    let shaped = match format {
        BatchFormat::Toold => serde_json::to_value(result),
        BatchFormat::Anthropic => serde_json::to_value(AnthropicResult::from(result)),
        BatchFormat::OpenAi => serde_json::to_value(OpenAiResult::from(result)),
        BatchFormat::OpenAiChat => serde_json::to_value(OpenAiChatResult::from(result)),
    };
    shaped.unwrap_or_else(|err| unreachable_json(&err))
}

/// Results serialise to JSON whatever they hold (string keys, finite numbers: `duration_ms`
/// is a measured time); a failure here is a bug, answered with `null` rather than a panic.
fn unreachable_json(err: &serde_json::Error) -> Value {
    tracing::error!(error = %err, "results could not be serialised");
    Value::Null
}

/// The four response bodies, borrowing from the results (`results_json` writes the same
/// bytes by hand).
#[derive(serde::Serialize)]
#[serde(untagged)]
enum ResultsBody<'a> {
    Toold {
        batch_id: &'a str,
        results: &'a [ToolResult],
    },
    Anthropic {
        role: &'static str,
        content: Vec<AnthropicResult<'a>>,
    },
    OpenAi {
        input: Vec<OpenAiResult<'a>>,
    },
    OpenAiChat {
        messages: Vec<OpenAiChatResult<'a>>,
    },
}

impl<'a> ResultsBody<'a> {
    fn new(format: BatchFormat, batch_id: &'a str, results: &'a [ToolResult]) -> Self {
        match format {
            BatchFormat::Toold => ResultsBody::Toold { batch_id, results },
            BatchFormat::Anthropic => ResultsBody::Anthropic {
                role: "user",
                content: results.iter().map(AnthropicResult::from).collect(),
            },
            BatchFormat::OpenAi => ResultsBody::OpenAi {
                input: results.iter().map(OpenAiResult::from).collect(),
            },
            BatchFormat::OpenAiChat => ResultsBody::OpenAiChat {
                messages: results.iter().map(OpenAiChatResult::from).collect(),
            },
        }
    }
}

#[derive(serde::Serialize)]
struct AnthropicResult<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    tool_use_id: &'a str,
    content: &'a str,
    is_error: bool,
}

impl<'a> From<&'a ToolResult> for AnthropicResult<'a> {
    fn from(result: &'a ToolResult) -> Self {
        AnthropicResult {
            kind: "tool_result",
            tool_use_id: &result.id,
            content: &result.output,
            is_error: result.is_error,
        }
    }
}

#[derive(serde::Serialize)]
struct OpenAiResult<'a> {
    #[serde(rename = "type")]
    kind: &'static str,
    call_id: &'a str,
    output: &'a str,
}

impl<'a> From<&'a ToolResult> for OpenAiResult<'a> {
    fn from(result: &'a ToolResult) -> Self {
        OpenAiResult {
            kind: "function_call_output",
            call_id: &result.id,
            output: &result.output,
        }
    }
}

#[derive(serde::Serialize)]
struct OpenAiChatResult<'a> {
    role: &'static str,
    tool_call_id: &'a str,
    content: &'a str,
}

impl<'a> From<&'a ToolResult> for OpenAiChatResult<'a> {
    fn from(result: &'a ToolResult) -> Self {
        OpenAiChatResult {
            role: "tool",
            tool_call_id: &result.id,
            content: &result.output,
        }
    }
}

#[cfg(test)]
#[path = "calls_tests.rs"]
mod tests;
