//! `edit_file` (alias `Edit`): replaces an exact string in a file the session has read.
//!
//! Owns the tool's contract around [`super::replace`]: the read-before-edit rule, an empty
//! `old_string` (creates a missing file, or fills an empty one, as models trained on Claude
//! Code expect), the atomic write and the short diff returned. Not destructive: the edit
//! touches only the matched text and its diff undoes it.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::access::Location;
use super::diff::short_diff;
use super::replace::{Wording, replace};
use super::state::{self, blocking};
use super::text::as_text;
use super::{build, check_path, path_permission, string_field};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, SessionView, Tool, ToolContext,
    ToolError, ToolOutput, ToolSpec,
};

const WORDING: Wording = Wording {
    old_field: "old_string",
    several_hint: "give more surrounding context to make it unique, or set replace_all to replace every match",
};

const DESCRIPTION: &str = "Replaces an exact string in a file. You must have read the file \
in this session (read_file) and it must not have changed since; edits made with this tool keep \
that true, so you can edit the same file again without reading it. `old_string` must match the \
file exactly, including whitespace and indentation (copy it from read_file's output without \
the line-number prefix) and must appear exactly once unless `replace_all` is true; give more \
surrounding lines to make it unique. `new_string` must differ from it. Line endings follow the \
file's (CRLF files stay CRLF) and so does its final newline. An empty `old_string` creates a \
file that does not exist yet, or fills an empty one. Returns a short diff of the change.";

/// The `edit_file` tool.
pub struct EditFile {
    spec: ToolSpec,
}

impl EditFile {
    pub fn new() -> Result<EditFile, RegistryError> {
        let spec = build(
            ToolSpec::builder("edit_file")
                .alias("Edit")
                .description(DESCRIPTION)
                .input_schema(json!({
                    "type": "object",
                    "properties": {
                        "file_path": {
                            "type": "string",
                            "description": "The file to edit, absolute or relative to the workspace root (a bash `cd` does not change it)"
                        },
                        "old_string": {
                            "type": "string",
                            "description": "The exact text to replace"
                        },
                        "new_string": {
                            "type": "string",
                            "description": "The text to replace it with (different from old_string)"
                        },
                        "replace_all": {
                            "type": "boolean",
                            "default": false,
                            "description": "Replace every occurrence of old_string (default false: it must occur once)"
                        }
                    },
                    "required": ["file_path", "old_string", "new_string"],
                    "additionalProperties": false
                }))
                .read_only(false)
                .concurrency_safe(false)
                .destructive(false)
                .permission_for(
                    PermissionLevel::WorkspaceWrite,
                    path_permission("file_path", PermissionLevel::WorkspaceWrite),
                )
                .concurrency_class(ConcurrencyClass::WriteExclusive)
                .interrupt_behavior(InterruptBehavior::Block)
                .max_result_size_chars(Some(20_000))
                .idempotent(false)
                .open_world(false),
        )?;
        Ok(EditFile { spec })
    }
}

#[async_trait]
impl Tool for EditFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check_path(input, "file_path", ctx)?;
        if string_field(input, "old_string") == string_field(input, "new_string") {
            return Err(ToolError::Validation(
                "old_string and new_string are the same; there is nothing to change".into(),
            ));
        }
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let location = Location::resolve(&input, "file_path", ctx)?;
        let request = EditRequest {
            old: string_field(&input, "old_string").to_owned(),
            new: string_field(&input, "new_string").to_owned(),
            replace_all: input
                .get("replace_all")
                .and_then(Value::as_bool)
                .unwrap_or(false),
        };
        let session = ctx.session.clone();
        blocking(move || edit(&location, &request, &*session)).await
    }
}

struct EditRequest {
    old: String,
    new: String,
    replace_all: bool,
}

fn edit(
    location: &Location,
    request: &EditRequest,
    session: &dyn SessionView,
) -> Result<ToolOutput, ToolError> {
    let path = &location.path;
    let Some(previous) = state::load(location, state::MAX_FILE_BYTES)? else {
        if !request.old.is_empty() {
            return Err(ToolError::Validation(format!(
                "\"{}\" does not exist; to create it give an empty old_string (or use write_file)",
                path.display()
            )));
        }
        let update = state::commit(location, request.new.as_bytes(), None)?;
        return Ok(ToolOutput::text(format!("Created \"{}\"", path.display()))
            .with_metadata("path", json!(path))
            .with_metadata("replacements", json!(0))
            .with_update(update));
    };
    let before = as_text(&previous.bytes, path)?;
    state::require_fresh(session, path, &previous, "read_file")?;
    let (after, replacements) = if request.old.is_empty() {
        if !before.is_empty() {
            return Err(ToolError::Validation(format!(
                "old_string is empty but \"{}\" is not; give the exact text to replace (an empty old_string only fills an empty file or creates a new one)",
                path.display()
            )));
        }
        (request.new.clone(), 1)
    } else {
        let replaced = replace(
            before,
            &request.old,
            &request.new,
            request.replace_all,
            WORDING,
            path,
        )?;
        (replaced.text, replaced.replacements)
    };
    let update = state::commit(location, after.as_bytes(), Some(&previous))?;
    let label = path.display().to_string();
    let diff = short_diff(label.trim_start_matches('/'), before, &after);
    let plural = if replacements == 1 { "" } else { "s" };
    Ok(ToolOutput::text(format!(
        "Edited \"{}\" ({replacements} replacement{plural}):\n{diff}",
        path.display()
    ))
    .with_metadata("path", json!(path))
    .with_metadata("replacements", json!(replacements))
    .with_update(update))
}
