//! `read_result`: pages through an output that was offloaded because it was too large.
//!
//! Owns paging by character range over `ToolDeps::results` (the same store the offload phase
//! writes to) and the note that says what was shown and how to go on. Its own output is never
//! offloaded: the page limit bounds it.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::{optional_whole_number, runtime_setting_u64, string_field};
use crate::dispatch::ResultStore;
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};

const PAGE_SETTING: &str = "read_result_page_chars";
/// Default and largest page; with the short header and footer this bounds the output.
const MAX_PAGE_CHARS: u64 = 30_000;

/// The `read_result` tool.
pub struct ReadResultTool {
    spec: ToolSpec,
    results: Arc<dyn ResultStore>,
}

impl ReadResultTool {
    pub fn new(results: Arc<dyn ResultStore>) -> Result<ReadResultTool, BuildError> {
        let spec = ToolSpec::builder("read_result")
            .description(format!(
                "Reads part of a tool output that was too large to show in full. When an output \
                 is offloaded you see a preview with a `result_id` and the total size; call \
                 this with that `result_id` and a character `offset` (0-based, default 0) to \
                 read up to `limit` characters (default and maximum {MAX_PAGE_CHARS}). The \
                 answer says which range it shows and the offset to continue from."
            ))
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "result_id": {
                        "type": "string",
                        "description": "The id given in the offloaded output's preview",
                        "minLength": 1,
                        "maxLength": 200,
                        "pattern": "^[A-Za-z0-9_-]+$"
                    },
                    "offset": {
                        "type": "integer",
                        "description": "First character to read, 0-based (default 0)",
                        "minimum": 0
                    },
                    "limit": {
                        "type": "integer",
                        "description": format!("Most characters to read (default and maximum {MAX_PAGE_CHARS})"),
                        "minimum": 1,
                        "maximum": MAX_PAGE_CHARS
                    }
                },
                "required": ["result_id"],
                "additionalProperties": false
            }))
            .read_only(true)
            .concurrency_safe(true)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(true)
            .open_world(false)
            .max_result_size_chars(None)
            .build()?;
        Ok(ReadResultTool { spec, results })
    }
}

#[async_trait]
impl Tool for ReadResultTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let result_id = string_field(&input, "result_id")?;
        // Ids are opaque tokens; refusing anything else keeps a store that names files by
        // id safe from paths smuggled in as ids.
        let is_token = !result_id.is_empty()
            && result_id.len() <= 200
            && result_id
                .bytes()
                .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-');
        if !is_token {
            return Err(ToolError::Validation(format!(
                "\"{result_id}\" is not a result id (letters, digits, '_' and '-' only)"
            )));
        }
        let offset = optional_whole_number(&input, "offset")?.unwrap_or(0);
        let limit = match optional_whole_number(&input, "limit")? {
            Some(0) => return Err(ToolError::Validation("\"limit\" must be at least 1".into())),
            Some(n) if n > MAX_PAGE_CHARS => {
                return Err(ToolError::Validation(format!(
                    "\"limit\" is at most {MAX_PAGE_CHARS}, got {n}"
                )));
            }
            Some(n) => n,
            None => runtime_setting_u64(&*ctx.session, PAGE_SETTING)
                .unwrap_or(MAX_PAGE_CHARS)
                .min(MAX_PAGE_CHARS),
        };
        let page = self
            .results
            .read_for_session(&ctx.session_id, result_id, offset, limit)
            .await
            .map_err(|err| ToolError::Execution(format!("cannot read \"{result_id}\": {err}")))?;
        let total = page.total_chars;
        if offset > 0 && offset >= total {
            return Err(ToolError::Validation(format!(
                "offset {offset} is past the end of \"{result_id}\", which has {total} characters"
            )));
        }
        let shown = page.content.chars().count() as u64;
        let end = offset + shown;
        let mut text = format!(
            "[{result_id}: characters {offset}..{end} of {total}]\n{}",
            page.content
        );
        if end < total {
            text.push_str(&format!(
                "\n[{} characters remain; continue with read_result {{\"result_id\": \"{result_id}\", \"offset\": {end}}}]",
                total - end
            ));
        } else {
            text.push_str("\n[end of result]");
        }
        Ok(ToolOutput::text(text)
            .with_metadata("result_id", json!(result_id))
            .with_metadata("offset", json!(offset))
            .with_metadata("end", json!(end))
            .with_metadata("total_chars", json!(total)))
    }
}
