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

use super::ToolDeps;
use crate::registry::{RegistryError, ToolRegistry};
use crate::tool::Tool;
use crate::tools::input::{optional_whole_number, string_field};

pub use config::{RUNTIME_SETTINGS, RuntimeSettingSpec, runtime_setting_u64};
pub use skill::{SkillSummary, skill_catalog};
pub use web_fetch::{AddressPolicy, BlockedAddress, WebFetchTool};

/// Registers every tool of this family.
pub fn register(registry: &mut ToolRegistry, deps: &ToolDeps) -> Result<(), RegistryError> {
    let tools: Vec<Arc<dyn Tool>> = vec![
        Arc::new(WebFetchTool::new(deps.web_fetch.clone())?),
        Arc::new(todo_write::TodoWriteTool::new()?),
        Arc::new(tool_search::ToolSearchTool::new()?),
        Arc::new(sleep::SleepTool::new()?),
        Arc::new(read_result::ReadResultTool::new(deps.results.clone())?),
        Arc::new(send_user_message::SendUserMessageTool::new()?),
        Arc::new(structured_output::StructuredOutputTool::new()?),
        Arc::new(skill::SkillTool::new(&deps.skills.directories)?),
        Arc::new(config::ConfigTool::new()?),
    ];
    for tool in tools {
        registry.register(tool)?;
    }
    Ok(())
}

/// `text` cut to at most `max` characters, and whether it was cut.
fn cut_chars(text: &str, max: usize) -> (&str, bool) {
    match text.char_indices().nth(max) {
        Some((byte, _)) => (&text[..byte], true),
        None => (text, false),
    }
}
