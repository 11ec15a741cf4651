//! `todo_write` (alias `TodoWrite`): the session's task list, replaced whole on every call.
//!
//! Owns the list's rules (at most one task in progress, no blank text) and the summary the
//! model reads back. The list itself lives in the session (`ContextUpdate::Todos`); this tool
//! never reads files or keeps state of its own.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tool::{
    BuildError, ConcurrencyClass, ContextUpdate, InterruptBehavior, PermissionLevel, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec,
};

const MAX_TODOS: usize = 200;
const MAX_TEXT_CHARS: usize = 2_000;

/// The `todo_write` tool.
pub struct TodoWriteTool {
    spec: ToolSpec,
}

impl TodoWriteTool {
    pub fn new() -> Result<TodoWriteTool, BuildError> {
        let text = |what: &str| json!({"type": "string", "minLength": 1, "maxLength": MAX_TEXT_CHARS, "description": what});
        let spec = ToolSpec::builder("todo_write")
            .alias("TodoWrite")
            .description(
                "Replaces this session's task list with the list given. Use it to plan and \
                 track multi-step work: write the steps as tasks, mark one `in_progress` \
                 before starting it, and mark it `completed` as soon as it is done. Every call \
                 sends the whole list (tasks left out are dropped; an empty list clears it). \
                 At most one task may be `in_progress` at a time. Each task has `content` (what \
                 to do, imperative: \"Run the tests\") and `activeForm` (the same, as it is \
                 being done: \"Running the tests\").",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "todos": {
                        "type": "array",
                        "description": "The complete, updated task list",
                        "maxItems": MAX_TODOS,
                        "items": {
                            "type": "object",
                            "properties": {
                                "content": text("What to do, in the imperative"),
                                "status": {
                                    "type": "string",
                                    "enum": ["pending", "in_progress", "completed"]
                                },
                                "activeForm": text("What is being done, in the present continuous")
                            },
                            "required": ["content", "status", "activeForm"],
                            "additionalProperties": false
                        }
                    }
                },
                "required": ["todos"],
                "additionalProperties": false
            }))
            // It changes the session's list, nothing outside the session; calls stay in request
            // order so the last list given is the one kept.
            .read_only(false)
            .concurrency_safe(false)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::WriteExclusive)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(true)
            .open_world(false)
            .max_result_size_chars(None)
            .build()?;
        Ok(TodoWriteTool { spec })
    }
}

/// A task, as checked.
struct Todo<'a> {
    content: &'a str,
    status: &'a str,
    active_form: &'a str,
}

/// The list, checked beyond what the schema says: no blank text, at most one in progress.
fn parse_todos(input: &Value) -> Result<Vec<Todo<'_>>, ToolError> {
    let items = input
        .get("todos")
        .and_then(Value::as_array)
        .ok_or_else(|| ToolError::Validation("\"todos\" must be an array".into()))?;
    if items.len() > MAX_TODOS {
        return Err(ToolError::Validation(format!(
            "at most {MAX_TODOS} tasks are kept, got {}",
            items.len()
        )));
    }
    let mut todos = Vec::with_capacity(items.len());
    for (index, item) in items.iter().enumerate() {
        let field = |name: &str| {
            item.get(name)
                .and_then(Value::as_str)
                .filter(|text| !text.trim().is_empty())
                .filter(|text| text.chars().count() <= MAX_TEXT_CHARS)
                .ok_or_else(|| {
                    ToolError::Validation(format!(
                        "todos[{index}].{name} must be non-blank text of at most {MAX_TEXT_CHARS} characters"
                    ))
                })
        };
        let status = field("status")?;
        if !matches!(status, "pending" | "in_progress" | "completed") {
            return Err(ToolError::Validation(format!(
                "todos[{index}].status \"{status}\" is not one of pending, in_progress, completed"
            )));
        }
        todos.push(Todo {
            content: field("content")?,
            status,
            active_form: field("activeForm")?,
        });
    }
    let in_progress: Vec<String> = todos
        .iter()
        .enumerate()
        .filter(|(_, todo)| todo.status == "in_progress")
        .map(|(index, todo)| format!("todos[{index}] \"{}\"", todo.content))
        .collect();
    if in_progress.len() > 1 {
        return Err(ToolError::Validation(format!(
            "at most one task may be in_progress, got {}: {}",
            in_progress.len(),
            in_progress.join(", ")
        )));
    }
    Ok(todos)
}

#[async_trait]
impl Tool for TodoWriteTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        parse_todos(input).map(drop)
    }

    async fn execute(&self, input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let todos = parse_todos(&input)?;
        let count = |status: &str| todos.iter().filter(|t| t.status == status).count();
        let (completed, in_progress, pending) =
            (count("completed"), count("in_progress"), count("pending"));
        let mut text = format!(
            "Task list updated: {} tasks ({completed} completed, {in_progress} in progress, {pending} pending).",
            todos.len()
        );
        if let Some(current) = todos.iter().find(|t| t.status == "in_progress") {
            text.push_str(&format!(" Now: {}.", current.active_form));
        } else if pending > 0 {
            text.push_str(
                " No task is in progress; mark the next one in_progress when you start it.",
            );
        }
        let list = input.get("todos").cloned().unwrap_or_else(|| json!([]));
        Ok(ToolOutput::text(text)
            .with_metadata("completed", json!(completed))
            .with_metadata("in_progress", json!(in_progress))
            .with_metadata("pending", json!(pending))
            .with_structured(json!({ "todos": list }))
            .with_update(ContextUpdate::Todos { todos: list }))
    }
}
