//! The file tools: `read_file` (`Read`), `write_file` (`Write`), `edit_file` (`Edit`),
//! `notebook_edit` (`NotebookEdit`) and `str_replace_based_edit_tool` (Anthropic's text
//! editor), and what they share.
//!
//! Shared: [`access`] opens paths without leaving what the call was authorised for (the
//! kernel's `RESOLVE_BENEATH` inside the workspace) and writes atomically; [`state`] keeps the
//! rule that a file is changed only after this session read it and while it is unchanged,
//! judged by content hash; [`text`] numbers lines like `cat -n` and knows binary files and
//! line endings; [`replace`] is the exact-match edit both edit tools perform; [`diff`] is the
//! short diff they return. Searching files (`glob_search`, `grep_search`) and the shell are
//! other tools' business; so is anything binary (images, PDFs), which these tools refuse.
//!
//! Flags: reads are read-only and concurrency-safe; every change is serial. Destructive means
//! irreversible: overwriting an existing file (`write_file`, the editor's `create`) and
//! deleting a notebook cell are; an exact edit is not, since the returned diff undoes it.

pub(super) mod access;
mod diff;
mod edit;
mod notebook;
mod notebook_json;
mod read;
mod replace;
mod state;
mod text;
mod text_editor;
mod text_editor_view;
mod write;

use std::sync::Arc;

use serde_json::Value;

pub use edit::EditFile;
pub use notebook::NotebookEdit;
pub use read::ReadFile;
pub use text_editor::TextEditor;
pub use write::WriteFile;

use crate::registry::{RegistryError, ToolRegistry};
use crate::tool::{PermissionLevel, ToolContext, ToolError, ToolSpec, ToolSpecBuilder};
use crate::tools::paths;

/// Registers the five file tools.
pub fn register(registry: &mut ToolRegistry) -> Result<(), RegistryError> {
    registry.register(Arc::new(ReadFile::new()?))?;
    registry.register(Arc::new(WriteFile::new()?))?;
    registry.register(Arc::new(EditFile::new()?))?;
    registry.register(Arc::new(NotebookEdit::new()?))?;
    registry.register(Arc::new(TextEditor::new()?))?;
    Ok(())
}

/// Builds a spec, reporting a missing piece of metadata as a registration error.
fn build(builder: ToolSpecBuilder) -> Result<ToolSpec, RegistryError> {
    Ok(builder.build()?)
}

/// The permission `input[field]` needs: `inside` in the workspace, else
/// `danger_full_access` (a path that cannot be resolved fails closed the same way).
fn path_permission(
    field: &'static str,
    inside: PermissionLevel,
) -> impl Fn(&Value, &ToolContext) -> Result<PermissionLevel, String> + Send + Sync + 'static {
    move |input, ctx| paths::path_permission(input, field, ctx, inside)
}

/// Refuses, before permission is asked, a path that is empty, holds a NUL byte, loops or is not
/// UTF-8: such a path is bad input, not a question of access. The resolution is kept for the
/// permission check, on the call's context ([`paths::check_input`]).
fn check_path(input: &Value, field: &str, ctx: &ToolContext) -> Result<(), ToolError> {
    paths::check_input(input, field, ctx)?;
    Ok(())
}

/// An optional non-negative whole number (`3` or `3.0`) at `input[field]`.
fn optional_count(input: &Value, field: &str) -> Result<Option<usize>, ToolError> {
    let Some(value) = input.get(field).filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    crate::tools::input::whole_number(value)
        .map(|n| Some(usize::try_from(n).unwrap_or(usize::MAX)))
        .ok_or_else(|| {
            ToolError::Validation(format!(
                "{field} must be a non-negative whole number, not {value}"
            ))
        })
}

/// The string at `input[field]`, or `""` when absent (the schema requires the fields a tool
/// cannot do without).
fn string_field<'a>(input: &'a Value, field: &str) -> &'a str {
    input.get(field).and_then(Value::as_str).unwrap_or_default()
}
