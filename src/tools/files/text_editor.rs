//! `str_replace_based_edit_tool`: Anthropic's text-editor tool (`view`, `create`,
//! `str_replace`, `insert`), the schema Claude models are trained on.
//!
//! Owns the command dispatch, `str_replace` (exactly one match, [`super::replace`]) and
//! `insert` (after line `insert_line`, 0 being the top). `view` is [`super::text_editor_view`];
//! `create` is `write_file`'s write. It shares the session's file-state cache with the other
//! file tools: a `view` is a read, and a change needs one. `undo_edit` (dropped from the tool
//! in Claude 4) is not offered. Relative paths are accepted and resolve against the working
//! directory, although the reference implementation asks for absolute ones.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::access::Location;
use super::replace::{Wording, replace};
use super::state::{self, blocking};
use super::text::{LineEnding, as_text, line_count, snippet};
use super::text_editor_view::{ViewRange, view};
use super::write::{exists, write};
use super::{build, check_path, optional_count, string_field};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, SessionView, Tool, ToolContext,
    ToolError, ToolOutput, ToolSpec,
};
use crate::tools::paths;

const WORDING: Wording = Wording {
    old_field: "old_str",
    several_hint: "give more surrounding context to make it unique (str_replace replaces exactly one match)",
};

/// Lines shown around a change in the snippet an edit returns.
const SNIPPET_CONTEXT: usize = 4;

const HOW_TO_READ: &str = "the view command";

const DESCRIPTION: &str = "A text editor for viewing, creating and editing files.\n\
* `view`: a file's lines numbered like `cat -n` (`view_range` [start, end] shows part of it, \
1-based and inclusive, end -1 meaning the last line), or a directory's non-hidden files and \
directories up to 2 levels deep.\n\
* `create`: writes `file_text` to `path`, creating parent directories. Replacing an existing \
file requires that you viewed it and it has not changed since.\n\
* `str_replace`: replaces `old_str` with `new_str` (empty or omitted deletes it). `old_str` \
must match exactly one place in the file, including whitespace; add surrounding lines to make \
it unique.\n\
* `insert`: inserts `new_str` (or `insert_text`) as whole lines after line `insert_line` (0 \
inserts at the top).\n\
Changing a file requires that you viewed it (or read it) in this session and that it has not \
changed since; your own edits keep it current. Paths are absolute or relative to the workspace root \
(a bash `cd` does not change it). Line endings follow the file's.";

/// The `str_replace_based_edit_tool` tool.
pub struct TextEditor {
    spec: ToolSpec,
}

fn command(input: &Value) -> Result<&str, String> {
    input
        .get("command")
        .and_then(Value::as_str)
        .ok_or_else(|| "command must be a string".to_owned())
}

impl TextEditor {
    pub fn new() -> Result<TextEditor, RegistryError> {
        let spec = build(
            ToolSpec::builder("str_replace_based_edit_tool")
                .description(DESCRIPTION)
                .input_schema(schema())
                .read_only_if(|input, _| Ok(command(input)? == "view"))
                .concurrency_safe_if(|input, _| Ok(command(input)? == "view"))
                .destructive_if(|input, session| {
                    Ok(command(input)? == "create" && exists(input, "path", session)?)
                })
                .permission_for(PermissionLevel::ReadOnly, |input, session| {
                    let inside = if command(input)? == "view" {
                        PermissionLevel::ReadOnly
                    } else {
                        PermissionLevel::WorkspaceWrite
                    };
                    paths::path_permission(input, "path", session, inside)
                })
                .concurrency_class(ConcurrencyClass::WriteExclusive)
                .interrupt_behavior(InterruptBehavior::Block)
                // Bounded by construction: views are capped like read_file, changes return a
                // short snippet or diff.
                .max_result_size_chars(None)
                .idempotent(false)
                .open_world(false),
        )?;
        Ok(TextEditor { spec })
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "command": {
                "type": "string",
                "enum": ["view", "create", "str_replace", "insert"],
                "description": "The command to run"
            },
            "path": {
                "type": "string",
                "description": "The file or directory, absolute or relative to the workspace root (a bash `cd` does not change it)"
            },
            "view_range": {
                "type": "array",
                "items": {"type": "integer"},
                "minItems": 2,
                "maxItems": 2,
                "description": "For view of a file: [start, end] lines, 1-based and inclusive; end -1 means the last line"
            },
            "file_text": {
                "type": "string",
                "description": "For create: the content of the file"
            },
            "old_str": {
                "type": "string",
                "description": "For str_replace: the exact text to replace (it must occur once)"
            },
            "new_str": {
                "type": "string",
                "description": "For str_replace: the replacement (omitted: delete old_str). For insert: the text to insert"
            },
            "insert_line": {
                "type": "integer",
                "minimum": 0,
                "description": "For insert: the line after which to insert (0 inserts at the top)"
            },
            "insert_text": {
                "type": "string",
                "description": "For insert: the text to insert (same as new_str)"
            }
        },
        "required": ["command", "path"],
        "additionalProperties": false
    })
}

#[async_trait]
impl Tool for TextEditor {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check_path(input, "path", ctx)?;
        let missing = |field: &str, command: &str| {
            ToolError::Validation(format!("{field} is required for the {command} command"))
        };
        match command(input).map_err(ToolError::Validation)? {
            "view" => {
                view_range(input)?;
            }
            "create" if input.get("file_text").is_none() => {
                return Err(missing("file_text", "create"));
            }
            "str_replace" => {
                let old = input.get("old_str").and_then(Value::as_str);
                match old {
                    None => return Err(missing("old_str", "str_replace")),
                    Some("") => {
                        return Err(ToolError::Validation(
                            "old_str must not be empty; use create for a new file or insert to add lines".into(),
                        ));
                    }
                    Some(old) if old == string_field(input, "new_str") => {
                        return Err(ToolError::Validation(
                            "old_str and new_str are the same; there is nothing to change".into(),
                        ));
                    }
                    Some(_) => {}
                }
            }
            "insert" => {
                if optional_count(input, "insert_line")?.is_none() {
                    return Err(missing("insert_line", "insert"));
                }
                insert_text(input)?;
            }
            _ => {}
        }
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let location = Location::resolve(&input, "path", ctx)?;
        let session = ctx.session.clone();
        match command(&input).map_err(ToolError::Validation)? {
            "view" => {
                let range = view_range(&input)?;
                let cancel = ctx.cancellation.clone();
                blocking(move || view(&location, range, &cancel)).await
            }
            "create" => {
                let text = string_field(&input, "file_text").to_owned();
                blocking(move || write(&location, &text, &*session, HOW_TO_READ)).await
            }
            "str_replace" => {
                let old = string_field(&input, "old_str").to_owned();
                let new = string_field(&input, "new_str").to_owned();
                blocking(move || {
                    change(&location, &*session, |before| {
                        let done = replace(before, &old, &new, false, WORDING, &location.path)?;
                        Ok((done.text, done.first_line, done.last_line))
                    })
                })
                .await
            }
            "insert" => {
                let after = optional_count(&input, "insert_line")?.unwrap_or(0);
                let text = insert_text(&input)?.to_owned();
                blocking(move || {
                    change(&location, &*session, |before| {
                        insert_lines(before, after, &text, &location.path)
                    })
                })
                .await
            }
            other => Err(ToolError::Validation(format!(
                "unknown command \"{other}\"; expected view, create, str_replace or insert"
            ))),
        }
    }
}

/// `view_range` as a window: `[start, end]`, 1-based, inclusive, `end` -1 for the last line.
fn view_range(input: &Value) -> Result<Option<ViewRange>, ToolError> {
    let Some(range) = input.get("view_range").filter(|v| !v.is_null()) else {
        return Ok(None);
    };
    let invalid = || {
        ToolError::Validation(format!(
            "view_range must be [start, end] with 1 <= start <= end, or end = -1 for the last line; got {range}"
        ))
    };
    let bounds: Vec<i64> = range
        .as_array()
        .ok_or_else(invalid)?
        .iter()
        .map(|v| v.as_i64().ok_or_else(invalid))
        .collect::<Result<_, _>>()?;
    let [start, end] = bounds[..] else {
        return Err(invalid());
    };
    let start = usize::try_from(start)
        .ok()
        .filter(|s| *s >= 1)
        .ok_or_else(invalid)?;
    let end = match end {
        -1 => None,
        end => Some(
            usize::try_from(end)
                .ok()
                .filter(|e| *e >= start)
                .ok_or_else(invalid)?,
        ),
    };
    Ok(Some(ViewRange { start, end }))
}

/// The text `insert` inserts: `new_str`, or `insert_text` (what Claude 4 models send).
fn insert_text(input: &Value) -> Result<&str, ToolError> {
    let new_str = input.get("new_str").and_then(Value::as_str);
    let insert_text = input.get("insert_text").and_then(Value::as_str);
    match (new_str, insert_text) {
        (Some(a), Some(b)) if a != b => Err(ToolError::Validation(
            "new_str and insert_text differ; give the text to insert once".into(),
        )),
        (Some(text), _) | (None, Some(text)) => Ok(text),
        (None, None) => Err(ToolError::Validation(
            "new_str (or insert_text) is required for the insert command".into(),
        )),
    }
}

/// Loads an existing text file the session may change, applies `edit` (which returns the new
/// text and the lines it changed), writes it, and shows the changed lines.
fn change(
    location: &Location,
    session: &dyn SessionView,
    edit: impl FnOnce(&str) -> Result<(String, usize, usize), ToolError>,
) -> Result<ToolOutput, ToolError> {
    let path = &location.path;
    let previous = state::load(location, state::MAX_FILE_BYTES)?
        .ok_or_else(|| ToolError::Validation(format!("\"{}\" does not exist", path.display())))?;
    let before = as_text(&previous.bytes, path)?;
    state::require_fresh(session, path, &previous, HOW_TO_READ)?;
    let (after, first, last) = edit(before)?;
    let update = state::commit(location, after.as_bytes(), Some(&previous))?;
    let shown = snippet(
        &after,
        first.saturating_sub(SNIPPET_CONTEXT).max(1),
        last + SNIPPET_CONTEXT,
    );
    Ok(ToolOutput::text(format!(
        "The file {} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n{shown}Review the changes and make sure they are as expected. Edit the file again if necessary.",
        path.display()
    ))
    .with_metadata("path", json!(path))
    .with_metadata("first_line", json!(first))
    .with_metadata("last_line", json!(last))
    .with_update(update))
}

/// `text` with `inserted` added as whole lines after line `after` (0: at the top). The
/// inserted lines take the file's line ending; the file keeps whether it ended with one.
fn insert_lines(
    text: &str,
    after: usize,
    inserted: &str,
    path: &std::path::Path,
) -> Result<(String, usize, usize), ToolError> {
    let total = line_count(text);
    if after > total {
        return Err(ToolError::Validation(format!(
            "insert_line {after} is past the end of \"{}\", which has {total} lines; use 0 to insert at the top or {total} to append",
            path.display()
        )));
    }
    let ending = LineEnding::detect(text).unwrap_or(LineEnding::Lf);
    let mut block = ending.apply(inserted).into_owned();
    if !block.ends_with('\n') {
        block.push_str(ending.as_str());
    }
    let added = line_count(&block);
    let mut result = String::with_capacity(text.len() + block.len() + 2);
    if after == total && !text.is_empty() && !text.ends_with('\n') {
        // Appending after a last line without a break: the break goes before the new lines,
        // and the file still ends without one.
        result.push_str(text);
        result.push_str(ending.as_str());
        result.push_str(block.strip_suffix(ending.as_str()).unwrap_or(&block));
    } else {
        let offset = if after == 0 {
            0
        } else {
            text.match_indices('\n')
                .nth(after - 1)
                .map_or(text.len(), |(at, _)| at + 1)
        };
        result.push_str(&text[..offset]);
        result.push_str(&block);
        result.push_str(&text[offset..]);
    }
    Ok((result, after + 1, after + added))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn insert_places_whole_lines() {
        let path = std::path::Path::new("/f");
        let cases = [
            ("a\nb\n", 0, "x", "x\na\nb\n"),
            ("a\nb\n", 1, "x\n", "a\nx\nb\n"),
            ("a\nb\n", 2, "x\ny", "a\nb\nx\ny\n"),
            ("a\nb", 2, "x", "a\nb\nx"),
            ("a\r\nb\r\n", 1, "x\ny", "a\r\nx\r\ny\r\nb\r\n"),
            ("", 0, "x", "x\n"),
        ];
        for (text, after, inserted, expected) in cases {
            let (result, ..) = insert_lines(text, after, inserted, path).unwrap();
            assert_eq!(result, expected, "{text:?} after {after}");
        }
        let err = insert_lines("a\n", 2, "x", path).unwrap_err();
        assert!(err.to_string().contains("which has 1 lines"), "{err}");
    }

    #[test]
    fn view_ranges() {
        let range = |v: Value| view_range(&json!({ "view_range": v }));
        assert_eq!(
            range(json!([2, -1])).unwrap(),
            Some(ViewRange {
                start: 2,
                end: None
            })
        );
        assert_eq!(
            range(json!([3, 3])).unwrap(),
            Some(ViewRange {
                start: 3,
                end: Some(3)
            })
        );
        for bad in [
            json!([0, 2]),
            json!([5, 2]),
            json!([1]),
            json!([1, -2]),
            json!("1,2"),
        ] {
            assert!(range(bad.clone()).is_err(), "{bad}");
        }
    }
}
