//! The session and utility tools: `web_fetch`, `todo_write`, `tool_search`, `sleep`,
//! `read_result`, `send_user_message`, `structured_output`, `skill` and `config`.
//!
//! They share no state with each other: each is a file (web_fetch a folder) with its spec and
//! its behaviour, and [`register`] puts them all in the registry. State they change (the task
//! list, loaded tools, runtime settings) goes back as `ContextUpdate`s; none of them touches
//! the workspace's files. The file, search and shell tools live elsewhere.

mod config;
mod read_result;
mod send_user_message;
mod skill;
mod sleep;
mod structured_output;
mod todo_write;
mod tool_search;
mod web_fetch;

use std::sync::Arc;

use serde_json::Value;

use super::ToolDeps;
use crate::registry::{RegistryError, ToolRegistry};
use crate::tool::{BuildError, Tool, ToolError};

pub use config::{RUNTIME_SETTINGS, RuntimeSettingSpec, runtime_setting_u64};
pub use web_fetch::{AddressPolicy, BlockedAddress, WebFetchTool, web_fetch_host};

/// Registers every tool of this family.
pub fn register(registry: &mut ToolRegistry, deps: &ToolDeps) -> Result<(), RegistryError> {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(WebFetchTool::new(deps.web_fetch.clone()).map_err(spec_error)?),
        Arc::new(todo_write::TodoWriteTool::new().map_err(spec_error)?),
        Arc::new(tool_search::ToolSearchTool::new().map_err(spec_error)?),
        Arc::new(sleep::SleepTool::new().map_err(spec_error)?),
        Arc::new(read_result::ReadResultTool::new(deps.results.clone()).map_err(spec_error)?),
        Arc::new(send_user_message::SendUserMessageTool::new().map_err(spec_error)?),
        Arc::new(structured_output::StructuredOutputTool::new().map_err(spec_error)?),
        Arc::new(skill::SkillTool::new(&deps.skills.directories).map_err(spec_error)?),
        Arc::new(config::ConfigTool::new().map_err(spec_error)?),
    ];
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(())
}

/// A spec that does not build is a mistake in this family's code (the registration test
/// catches it); it surfaces as a registry error rather than a panic.
fn spec_error(err: BuildError) -> RegistryError {
    let tool = match &err {
        BuildError::MissingMaxResultSize { name }
        | BuildError::MissingDescription { name }
        | BuildError::SchemaNotObject { name } => name.clone(),
    };
    RegistryError::InvalidSchema {
        tool,
        problem: err.to_string(),
    }
}

/// `input[field]` as a string (the schema has already checked the type; this guards callers
/// that run a tool without a dispatcher).
fn str_field<'a>(input: &'a Value, field: &str) -> Result<&'a str, ToolError> {
    input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Validation(format!("\"{field}\" must be a string")))
}

/// `input[field]` as an optional non-negative integer.
fn optional_u64(input: &Value, field: &str) -> Result<Option<u64>, ToolError> {
    match input.get(field) {
        None | Some(Value::Null) => Ok(None),
        Some(value) => value.as_u64().map(Some).ok_or_else(|| {
            ToolError::Validation(format!(
                "\"{field}\" must be a non-negative integer, got {value}"
            ))
        }),
    }
}

/// `text` cut to at most `max` characters, and whether it was cut.
fn cut_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((byte, _)) => (&text[..byte], true),
        None => (text, false),
    }
}
