//! `notebook_edit` (alias `NotebookEdit`): replaces, inserts or deletes one cell of a Jupyter
//! notebook (`.ipynb`).
//!
//! The notebook's text is spliced, not re-serialised: only the bytes of the changed cell (or
//! of the changed `source`, `outputs` and `execution_count` values) are rewritten, in the
//! notebook's own indentation, so a diff of the file shows the edit and nothing else. A code
//! cell whose source is replaced loses its outputs and execution count (they described the
//! old source). The read-before-change rule and the atomic write are shared with the other
//! file tools; how the notebook runs is not this tool's business.

use async_trait::async_trait;
use serde_json::{Map, Value, json};

use super::access::Location;
use super::notebook_json::{ScanError, elements, indentation_at, members, value_at};
use super::state::{self, blocking};
use super::text::as_text;
use super::{build, check_path, path_permission, string_field};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, SessionView, Tool, ToolContext,
    ToolError, ToolOutput, ToolSpec,
};

const DESCRIPTION: &str = "Edits one cell of a Jupyter notebook (.ipynb). `edit_mode` is \
`replace` (default: the cell `cell_id` gets `new_source`; giving `cell_type` also changes its \
type), `insert` (a new cell of `cell_type` with `new_source` goes after the cell `cell_id`, or \
at the top when no `cell_id` is given) or `delete` (the cell `cell_id` is removed; \
`new_source` is ignored). `cell_id` is a cell's `id`, or `cell-N` for the N-th cell counting \
from 0. You must have read the notebook in this session (read_file) and it must not have \
changed since. Replacing a code cell's source clears its outputs. Everything else in the file \
is kept byte for byte.";

/// The `notebook_edit` tool.
pub struct NotebookEdit {
    spec: ToolSpec,
}

impl NotebookEdit {
    pub fn new() -> Result<NotebookEdit, RegistryError> {
        let spec = build(
            ToolSpec::builder("notebook_edit")
                .alias("NotebookEdit")
                .description(DESCRIPTION)
                .input_schema(json!({
                    "type": "object",
                    "properties": {
                        "notebook_path": {
                            "type": "string",
                            "description": "The .ipynb file, absolute or relative to the workspace root (a bash `cd` does not change it)"
                        },
                        "cell_id": {
                            "type": "string",
                            "description": "The cell to replace or delete, or after which to insert: its id, or cell-N (0-based position)"
                        },
                        "new_source": {
                            "type": "string",
                            "description": "The new source of the cell"
                        },
                        "cell_type": {
                            "type": "string",
                            "enum": ["code", "markdown"],
                            "description": "The cell's type; required for insert"
                        },
                        "edit_mode": {
                            "type": "string",
                            "enum": ["replace", "insert", "delete"],
                            "description": "What to do (default replace)"
                        }
                    },
                    "required": ["notebook_path", "new_source"],
                    "additionalProperties": false
                }))
                .read_only(false)
                .concurrency_safe(false)
                .destructive_if(|input, _| Ok(edit_mode(input) == "delete"))
                .permission_for(
                    PermissionLevel::WorkspaceWrite,
                    path_permission("notebook_path", PermissionLevel::WorkspaceWrite),
                )
                .concurrency_class(ConcurrencyClass::WriteExclusive)
                .interrupt_behavior(InterruptBehavior::Block)
                .max_result_size_chars(Some(20_000))
                .idempotent(false)
                .open_world(false),
        )?;
        Ok(NotebookEdit { spec })
    }
}

fn edit_mode(input: &Value) -> &str {
    input
        .get("edit_mode")
        .and_then(Value::as_str)
        .unwrap_or("replace")
}

#[async_trait]
impl Tool for NotebookEdit {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check_path(input, "notebook_path", ctx)?;
        let path = string_field(input, "notebook_path");
        if !path.ends_with(".ipynb") {
            return Err(ToolError::Validation(format!(
                "notebook_path \"{path}\" is not a Jupyter notebook (.ipynb); use edit_file for other files"
            )));
        }
        let mode = edit_mode(input);
        if mode != "insert" && input.get("cell_id").is_none() {
            return Err(ToolError::Validation(format!(
                "cell_id is required to {mode} a cell"
            )));
        }
        if mode == "insert" && input.get("cell_type").is_none() {
            return Err(ToolError::Validation(
                "cell_type (code or markdown) is required to insert a cell".into(),
            ));
        }
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let location = Location::resolve(&input, "notebook_path", ctx)?;
        let session = ctx.session.clone();
        blocking(move || edit_notebook(&location, &input, &*session)).await
    }
}

fn edit_notebook(
    location: &Location,
    input: &Value,
    session: &dyn SessionView,
) -> Result<ToolOutput, ToolError> {
    let path = &location.path;
    let previous = state::load(location, state::MAX_FILE_BYTES)?
        .ok_or_else(|| ToolError::Validation(format!("\"{}\" does not exist", path.display())))?;
    let text = as_text(&previous.bytes, path)?;
    state::require_fresh(session, path, &previous, "read_file")?;
    let notebook = Notebook::parse(text).map_err(|problem| {
        ToolError::Validation(format!(
            "\"{}\" is not a notebook: {problem}",
            path.display()
        ))
    })?;
    let cell_id = input.get("cell_id").and_then(Value::as_str);
    let index = cell_id.map(|id| notebook.find(id, path)).transpose()?;
    let source = string_field(input, "new_source");
    let cell_type = input.get("cell_type").and_then(Value::as_str);
    let shown_id = cell_id.unwrap_or_default();
    let edited = match (edit_mode(input), index) {
        ("insert", at) => {
            let cell_type = cell_type.unwrap_or("code");
            let (text, id) = notebook.insert(at.map_or(0, |i| i + 1), cell_type, source);
            let place = match cell_id {
                Some(after_id) => format!("after cell \"{after_id}\""),
                None => "at the top".to_owned(),
            };
            Ok((
                text,
                format!("Inserted a {cell_type} cell \"{id}\" {place}"),
            ))
        }
        ("delete", Some(index)) => notebook
            .delete(index)
            .map(|text| (text, format!("Deleted cell \"{shown_id}\""))),
        (_, Some(index)) => notebook
            .replace(index, source, cell_type)
            .map(|text| (text, format!("Replaced the source of cell \"{shown_id}\""))),
        (mode, None) => {
            return Err(ToolError::Validation(format!(
                "cell_id is required to {mode} a cell"
            )));
        }
    };
    let (after, summary) =
        edited.map_err(|err| ToolError::Validation(format!("cannot edit the notebook: {err}")))?;
    let update = state::commit(location, after.as_bytes(), Some(&previous))?;
    Ok(
        ToolOutput::text(format!("{summary} in \"{}\"", path.display()))
            .with_metadata("path", json!(path))
            .with_update(update),
    )
}

/// A parsed notebook with the byte spans of its cells.
struct Notebook<'a> {
    text: &'a str,
    cells: Vec<Value>,
    /// Span of the `cells` array and of each element.
    array: std::ops::Range<usize>,
    spans: Vec<std::ops::Range<usize>>,
    /// One indentation step (`None`: the file is on one line).
    unit: Option<String>,
    /// Whether new cells get ids (nbformat 4.5 and later, or ids already in use).
    with_ids: bool,
}

impl<'a> Notebook<'a> {
    fn parse(text: &'a str) -> Result<Notebook<'a>, String> {
        let document: Value = serde_json::from_str(text).map_err(|err| err.to_string())?;
        let cells = document
            .get("cells")
            .and_then(Value::as_array)
            .cloned()
            .ok_or("it has no \"cells\" array")?;
        let bytes = text.as_bytes();
        let scan = |err: ScanError| err.to_string();
        let root = value_at(bytes, 0).map_err(scan)?;
        let array = members(bytes, root)
            .map_err(scan)?
            .into_iter()
            .rev()
            .find(|member| member.key == "cells")
            .ok_or("it has no \"cells\" array")?
            .value;
        let spans = elements(bytes, array.clone()).map_err(scan)?;
        if spans.len() != cells.len() {
            return Err("its cells could not be located in the text".into());
        }
        let minor = document.get("nbformat_minor").and_then(Value::as_u64);
        let major = document.get("nbformat").and_then(Value::as_u64);
        let with_ids =
            (major, minor) >= (Some(4), Some(5)) || cells.iter().any(|c| c.get("id").is_some());
        Ok(Notebook {
            text,
            cells,
            array,
            spans,
            unit: indent_unit(text),
            with_ids,
        })
    }

    /// The index of the cell `id` (or `cell-N`).
    fn find(&self, id: &str, path: &std::path::Path) -> Result<usize, ToolError> {
        if let Some(index) = self
            .cells
            .iter()
            .position(|cell| cell.get("id").and_then(Value::as_str) == Some(id))
        {
            return Ok(index);
        }
        if let Some(index) = id
            .strip_prefix("cell-")
            .and_then(|n| n.parse::<usize>().ok())
            .filter(|n| *n < self.cells.len())
        {
            return Ok(index);
        }
        let known: Vec<String> = self
            .cells
            .iter()
            .enumerate()
            .take(30)
            .map(|(i, cell)| match cell.get("id").and_then(Value::as_str) {
                Some(id) => id.to_owned(),
                None => format!("cell-{i}"),
            })
            .collect();
        Err(ToolError::Validation(format!(
            "\"{}\" has no cell \"{id}\"; its cells are: {}",
            path.display(),
            if known.is_empty() {
                "none".to_owned()
            } else {
                known.join(", ")
            }
        )))
    }

    /// Replaces cell `index`'s source (and its type when `cell_type` differs).
    fn replace(
        &self,
        index: usize,
        source: &str,
        cell_type: Option<&str>,
    ) -> Result<String, String> {
        let cell = &self.cells[index];
        let span = self.spans[index].clone();
        let current_type = cell
            .get("cell_type")
            .and_then(Value::as_str)
            .unwrap_or("code");
        let new_type = cell_type.unwrap_or(current_type);
        if cell.get("source").is_none() {
            return Err("the cell has no source".into());
        }
        let source_value = source_value(source, cell.get("source").is_some_and(Value::is_string));
        if new_type != current_type {
            let rebuilt = new_cell(
                new_type,
                cell.get("id").cloned(),
                cell.get("metadata").cloned(),
                source_value,
                cell,
            );
            return Ok(self.splice(span.clone(), &self.render(&rebuilt, span.start)));
        }
        let bytes = self.text.as_bytes();
        let mut edits: Vec<(std::ops::Range<usize>, Value)> = Vec::new();
        for member in members(bytes, span).map_err(|e| e.to_string())? {
            let value = match member.key.as_str() {
                "source" => source_value.clone(),
                "outputs" if new_type == "code" => json!([]),
                "execution_count" if new_type == "code" => Value::Null,
                _ => continue,
            };
            edits.push((member.value, value));
        }
        let mut out = self.text.to_owned();
        edits.sort_by_key(|(range, _)| std::cmp::Reverse(range.start));
        for (range, value) in edits {
            let rendered = self.render(&value, range.start);
            out.replace_range(range, &rendered);
        }
        Ok(out)
    }

    /// Inserts a new cell at position `at` (0..=len); returns the text and the new cell's id.
    fn insert(&self, at: usize, cell_type: &str, source: &str) -> (String, String) {
        let id = self.fresh_id();
        let cell = new_cell(
            cell_type,
            self.with_ids.then(|| json!(id)),
            Some(json!({})),
            source_value(source, false),
            &Value::Null,
        );
        let bytes = self.text.as_bytes();
        let shown_id = if self.with_ids {
            id
        } else {
            format!("cell-{at}")
        };
        if self.spans.is_empty() {
            let closing =
                String::from_utf8_lossy(indentation_at(bytes, self.array.start)).into_owned();
            let replacement = match &self.unit {
                None => format!("[{}]", self.render(&cell, self.array.start)),
                Some(unit) => {
                    let indent = format!("{closing}{unit}");
                    format!("[\n{indent}{}\n{closing}]", render_at(&cell, unit, &indent))
                }
            };
            return (self.splice(self.array.clone(), &replacement), shown_id);
        }
        let separator = if self.spans.len() > 1 {
            self.text[self.spans[0].end..self.spans[1].start].to_owned()
        } else {
            format!(",{}", &self.text[self.array.start + 1..self.spans[0].start])
        };
        let rendered = self.render(&cell, self.spans[0].start);
        let result = if at < self.spans.len() {
            let start = self.spans[at].start;
            self.splice(start..start, &format!("{rendered}{separator}"))
        } else {
            let end = self.spans[self.spans.len() - 1].end;
            self.splice(end..end, &format!("{separator}{rendered}"))
        };
        (result, shown_id)
    }

    /// Removes cell `index` and one separator next to it.
    fn delete(&self, index: usize) -> Result<String, String> {
        let last = self.spans.len() - 1;
        let range = if self.spans.len() == 1 {
            return Ok(self.splice(self.array.clone(), "[]"));
        } else if index < last {
            self.spans[index].start..self.spans[index + 1].start
        } else {
            self.spans[index - 1].end..self.spans[index].end
        };
        Ok(self.splice(range, ""))
    }

    fn splice(&self, range: std::ops::Range<usize>, with: &str) -> String {
        let mut out = String::with_capacity(self.text.len() + with.len());
        out.push_str(&self.text[..range.start]);
        out.push_str(with);
        out.push_str(&self.text[range.end..]);
        out
    }

    /// `value` rendered in the notebook's style for a value starting at byte `at`.
    fn render(&self, value: &Value, at: usize) -> String {
        match &self.unit {
            None => value.to_string(),
            Some(unit) => {
                let indent =
                    String::from_utf8_lossy(indentation_at(self.text.as_bytes(), at)).into_owned();
                render_at(value, unit, &indent)
            }
        }
    }

    /// An id no cell has: eight hex digits, like Jupyter's.
    fn fresh_id(&self) -> String {
        loop {
            let uuid = uuid::Uuid::now_v7().simple().to_string();
            // The last digits of a v7 uuid are random; the first are a timestamp.
            let id = uuid[uuid.len() - 8..].to_owned();
            if !self
                .cells
                .iter()
                .any(|c| c.get("id").and_then(Value::as_str) == Some(&id))
            {
                return id;
            }
        }
    }
}

/// A cell with keys in nbformat's (sorted) order; `old` lends its attachments to markdown.
fn new_cell(
    cell_type: &str,
    id: Option<Value>,
    metadata: Option<Value>,
    source: Value,
    old: &Value,
) -> Value {
    let mut cell = Map::new();
    if cell_type == "markdown"
        && let Some(attachments) = old.get("attachments")
    {
        cell.insert("attachments".into(), attachments.clone());
    }
    cell.insert("cell_type".into(), json!(cell_type));
    if cell_type == "code" {
        cell.insert("execution_count".into(), Value::Null);
    }
    if let Some(id) = id {
        cell.insert("id".into(), id);
    }
    cell.insert("metadata".into(), metadata.unwrap_or_else(|| json!({})));
    if cell_type == "code" {
        cell.insert("outputs".into(), json!([]));
    }
    cell.insert("source".into(), source);
    Value::Object(cell)
}

/// A cell source as nbformat writes it: a list of lines (each keeping its `\n`), or one
/// string when the notebook used one.
fn source_value(source: &str, as_string: bool) -> Value {
    if as_string {
        return json!(source);
    }
    Value::Array(
        source
            .split_inclusive('\n')
            .map(|line| json!(line))
            .collect(),
    )
}

/// Pretty JSON with `unit` per level, every line after the first indented by `indent`.
fn render_at(value: &Value, unit: &str, indent: &str) -> String {
    use serde::Serialize;
    let mut out = Vec::new();
    let formatter = serde_json::ser::PrettyFormatter::with_indent(unit.as_bytes());
    let mut serializer = serde_json::Serializer::with_formatter(&mut out, formatter);
    if value.serialize(&mut serializer).is_err() {
        return value.to_string();
    }
    let pretty = String::from_utf8_lossy(&out).into_owned();
    pretty.replace('\n', &format!("\n{indent}"))
}

/// The notebook's indentation step: the whitespace starting its second line (`None` for a
/// notebook on one line).
fn indent_unit(text: &str) -> Option<String> {
    let newline = text.find('\n')?;
    let unit: String = text[newline + 1..]
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    Some(if unit.is_empty() {
        " ".to_owned()
    } else {
        unit
    })
}

#[cfg(test)]
#[path = "notebook_tests.rs"]
mod tests;
