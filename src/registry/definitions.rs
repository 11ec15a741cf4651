//! Tool definitions in each provider's format, generated from the registry, never by hand.
//!
//! Output is byte-stable: tools come in pool order and JSON object keys are sorted, so the
//! same pool always serialises to the same bytes (which keeps providers' prompt caches warm).
//! Every schema sent is the flattened copy, so no definition contains a `$ref`.

use std::fmt;
use std::str::FromStr;

use serde_json::{Value, json};

use super::pool::ToolPool;
use super::schema::is_strict_compatible;
use super::{RegisteredTool, ToolSource};
use crate::tool::{InputFlag, InputPermission};

/// The definition formats of `GET /v1/sessions/{id}/tools?format=`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ToolFormat {
    Anthropic,
    /// OpenAI Responses API.
    OpenAi,
    OpenAiChat,
    Mcp,
    /// Everything toold knows about a tool.
    Toold,
}

impl ToolFormat {
    pub const ALL: [ToolFormat; 5] = [
        ToolFormat::Anthropic,
        ToolFormat::OpenAi,
        ToolFormat::OpenAiChat,
        ToolFormat::Mcp,
        ToolFormat::Toold,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ToolFormat::Anthropic => "anthropic",
            ToolFormat::OpenAi => "openai",
            ToolFormat::OpenAiChat => "openai_chat",
            ToolFormat::Mcp => "mcp",
            ToolFormat::Toold => "toold",
        }
    }
}

impl fmt::Display for ToolFormat {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown format \"{0}\"; expected anthropic, openai, openai_chat, mcp or toold")]
pub struct UnknownFormat(pub String);

impl FromStr for ToolFormat {
    type Err = UnknownFormat;

    fn from_str(text: &str) -> Result<Self, Self::Err> {
        ToolFormat::ALL
            .into_iter()
            .find(|format| format.as_str() == text)
            .ok_or_else(|| UnknownFormat(text.to_owned()))
    }
}

/// The pool's definitions in `format`, in pool order.
pub fn definitions(pool: &ToolPool, format: ToolFormat) -> Vec<Value> {
    pool.tools()
        .iter()
        .map(|tool| definition(tool, format))
        .collect()
}

/// One tool's definition in `format`.
pub fn definition(tool: &RegisteredTool, format: ToolFormat) -> Value {
    let spec = tool.spec();
    let schema = tool.flattened_schema.clone();
    match format {
        ToolFormat::Anthropic => json!({
            "name": spec.name,
            "description": spec.description,
            "input_schema": schema,
        }),
        ToolFormat::OpenAi => json!({
            "type": "function",
            "name": spec.name,
            "description": spec.description,
            "strict": is_strict_compatible(&schema),
            "parameters": schema,
        }),
        ToolFormat::OpenAiChat => json!({
            "type": "function",
            "function": {
                "name": spec.name,
                "description": spec.description,
                "parameters": schema,
            },
        }),
        ToolFormat::Mcp => mcp_definition(tool, schema),
        ToolFormat::Toold => toold_definition(tool, schema),
    }
}

/// MCP hints from the metadata. A flag that depends on input is reported on its safe side
/// (not read-only, destructive), since a hint must hold for every call.
fn mcp_definition(tool: &RegisteredTool, schema: Value) -> Value {
    let spec = tool.spec();
    let read_only = spec.read_only.fixed().unwrap_or(false);
    let mut definition = json!({
        "name": spec.name,
        "description": spec.description,
        "inputSchema": schema,
        "annotations": {
            "readOnlyHint": read_only,
            // The MCP spec gives destructiveHint meaning only when the tool is not read-only.
            "destructiveHint": !read_only && spec.destructive.fixed().unwrap_or(true),
            "idempotentHint": spec.idempotent,
            "openWorldHint": spec.open_world,
        },
    });
    if let Some(output_schema) = &tool.flattened_output_schema {
        definition["outputSchema"] = output_schema.clone();
    }
    definition
}

fn flag_value(flag: &InputFlag) -> Value {
    match flag.fixed() {
        Some(value) => Value::Bool(value),
        None => Value::String("depends_on_input".into()),
    }
}

fn toold_definition(tool: &RegisteredTool, schema: Value) -> Value {
    let spec = tool.spec();
    let (permission, floor) = match &spec.required_permission {
        InputPermission::Fixed(level) => (json!(level), json!(level)),
        InputPermission::Dynamic { floor, .. } => (json!("depends_on_input"), json!(floor)),
    };
    json!({
        "name": spec.name,
        "aliases": spec.aliases,
        "description": spec.description,
        "input_schema": schema,
        "output_schema": tool.flattened_output_schema,
        "source": match tool.source {
            ToolSource::BuiltIn => "builtin",
            ToolSource::External => "external",
        },
        "read_only": flag_value(&spec.read_only),
        "concurrency_safe": flag_value(&spec.concurrency_safe),
        "destructive": flag_value(&spec.destructive),
        "required_permission": permission,
        "minimum_permission": floor,
        "concurrency_class": spec.concurrency_class,
        "interrupt_behavior": spec.interrupt_behavior,
        "requires_user_interaction": spec.requires_user_interaction,
        "should_defer": spec.should_defer,
        "always_load": spec.always_load,
        "max_result_size_chars": spec.max_result_size_chars,
        "preview_style": spec.preview_style,
        "idempotent": spec.idempotent,
        "open_world": spec.open_world,
        "aborts_siblings_on_failure": spec.aborts_siblings_on_failure,
        "timeout_ms": spec.timeout.map(|t| t.as_millis() as u64),
    })
}
