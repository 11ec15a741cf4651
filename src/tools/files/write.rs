//! `write_file` (alias `Write`): creates a file or replaces one whole.
//!
//! Owns the rule for overwriting: the session must have read the file and it must not have
//! changed since (by content); a new file needs no read. Missing parent directories are
//! created; the write is atomic and keeps the old file's permissions ([`super::access`]). The
//! content is written exactly as given (line endings included). Overwriting is destructive;
//! creating is not.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::access::Location;
use super::diff::short_diff;
use super::state::{self, blocking};
use super::text::line_count;
use super::{build, check_path, path_permission, string_field};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, SessionView, Tool, ToolContext,
    ToolError, ToolOutput, ToolSpec,
};
use crate::tools::paths;

/// The largest previous content an overwrite shows a diff against.
const MAX_DIFFED_BYTES: usize = 1024 * 1024;

const DESCRIPTION: &str = "Writes a file, creating it (and any missing parent directories) \
or replacing its whole content. `file_path` is absolute or relative to the workspace root (a bash `cd` \
does not change it); `content` is written exactly as given. To overwrite an existing file you must have \
read it in this session (read_file) and it must not have changed since; otherwise the call is \
refused and you should read it again. Prefer edit_file for changing part of an existing file: \
it sends only the change. The write is atomic and keeps the file's permissions. Returns a short \
diff when an existing file was replaced.";

/// The `write_file` tool.
pub struct WriteFile {
    spec: ToolSpec,
}

impl WriteFile {
    pub fn new() -> Result<WriteFile, RegistryError> {
        let spec = build(
            ToolSpec::builder("write_file")
                .alias("Write")
                .description(DESCRIPTION)
                .input_schema(json!({
                    "type": "object",
                    "properties": {
                        "file_path": {
                            "type": "string",
                            "description": "The file to write, absolute or relative to the workspace root (a bash `cd` does not change it)"
                        },
                        "content": {
                            "type": "string",
                            "description": "The whole new content of the file"
                        }
                    },
                    "required": ["file_path", "content"],
                    "additionalProperties": false
                }))
                .read_only(false)
                .concurrency_safe(false)
                .destructive_if(|input, session| exists(input, "file_path", session))
                .permission_for(
                    PermissionLevel::WorkspaceWrite,
                    path_permission("file_path", PermissionLevel::WorkspaceWrite),
                )
                .concurrency_class(ConcurrencyClass::WriteExclusive)
                .interrupt_behavior(InterruptBehavior::Block)
                .max_result_size_chars(Some(20_000))
                .idempotent(true)
                .open_world(false),
        )?;
        Ok(WriteFile { spec })
    }
}

/// Whether `input[field]` names something that exists (an overwrite); errors fail closed.
pub fn exists(input: &Value, field: &str, session: &dyn SessionView) -> Result<bool, String> {
    let resolved = paths::resolve_input(input, field, session).map_err(|err| err.to_string())?;
    Ok(std::fs::symlink_metadata(&resolved.path).is_ok())
}

#[async_trait]
impl Tool for WriteFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check_path(input, "file_path", ctx)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let location = Location::resolve(&input, "file_path", ctx)?;
        let content = string_field(&input, "content").to_owned();
        let session = ctx.session.clone();
        blocking(move || write(&location, &content, &*session, "read_file")).await
    }
}

/// Creates or replaces the file at `location` with `content` under the read-before-overwrite
/// rule. Shared with the editor's `create`.
pub fn write(
    location: &Location,
    content: &str,
    session: &dyn SessionView,
    how_to_read: &str,
) -> Result<ToolOutput, ToolError> {
    let path = &location.path;
    let previous = state::load(location, state::MAX_FILE_BYTES)?;
    if let Some(previous) = &previous {
        state::require_fresh(session, path, previous, how_to_read)?;
    }
    let update = state::commit(location, content.as_bytes(), previous.as_ref())?;
    let lines = line_count(content);
    let output = match &previous {
        None => ToolOutput::text(format!(
            "Created \"{}\" ({lines} lines, {} bytes)",
            path.display(),
            content.len()
        )),
        Some(previous) => {
            let label = path.display().to_string();
            let summary = if previous.bytes.len().max(content.len()) > MAX_DIFFED_BYTES {
                "the file is too large to show a diff".to_owned()
            } else {
                let before = String::from_utf8_lossy(&previous.bytes);
                let diff = short_diff(label.trim_start_matches('/'), &before, content);
                if diff.is_empty() {
                    "the content is unchanged".to_owned()
                } else {
                    format!("diff:\n{diff}")
                }
            };
            ToolOutput::text(format!(
                "Replaced \"{}\" ({lines} lines, {} bytes); {summary}",
                path.display(),
                content.len()
            ))
        }
    };
    Ok(output
        .with_metadata("path", json!(path))
        .with_metadata("created", json!(previous.is_none()))
        .with_metadata("bytes", json!(content.len()))
        .with_update(update))
}
