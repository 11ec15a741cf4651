//! `structured_output`: hands the agent's final answer back as structured data.
//!
//! The input is the data: it comes back unchanged in the result's `structured` field. When the
//! session supplies an output schema, the input must satisfy it (a mismatch is a
//! `ValidationError` naming the fields); otherwise any JSON object is accepted. The tool's own
//! input schema is therefore an open object. It stores nothing.

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};

/// Problems quoted in a mismatch message (the rest are counted).
const PROBLEMS_SHOWN: usize = 5;
const PROBLEM_CHARS: usize = 300;

/// The `structured_output` tool.
pub struct StructuredOutputTool {
    spec: ToolSpec,
}

impl StructuredOutputTool {
    pub fn new() -> Result<StructuredOutputTool, BuildError> {
        let spec = ToolSpec::builder("structured_output")
            .description(
                "Returns your final answer as structured data. Call it once, at the end, with \
                 the answer as the input object; when this session expects a particular shape \
                 the input is checked against it and any mismatch is reported so you can call \
                 again with corrected data.",
            )
            .input_schema(json!({
                "type": "object",
                "description": "The structured answer, in the shape this session asks for",
                "additionalProperties": true
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
        Ok(StructuredOutputTool { spec })
    }
}

/// Checks `input` against the session's output schema, if it has one.
fn check(input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
    let Some(schema) = ctx.session.output_schema() else {
        return Ok(());
    };
    let validator = jsonschema::validator_for(schema).map_err(|err| {
        ToolError::Execution(format!(
            "the session's output schema does not compile: {err}"
        ))
    })?;
    let problems: Vec<String> = validator
        .iter_errors(input)
        .map(|err| {
            let path = err.instance_path().to_string();
            let problem = if path.is_empty() {
                err.to_string()
            } else {
                format!("at {path}: {err}")
            };
            let (cut, was_cut) = super::cut_chars(&problem, PROBLEM_CHARS);
            if was_cut {
                format!("{cut}…")
            } else {
                problem
            }
        })
        .collect();
    if problems.is_empty() {
        return Ok(());
    }
    let more = problems.len().saturating_sub(PROBLEMS_SHOWN);
    let mut message = format!(
        "the output does not match the session's output schema: {}",
        problems[..problems.len() - more].join("; ")
    );
    if more > 0 {
        message.push_str(&format!(" (and {more} more)"));
    }
    Err(ToolError::Validation(message))
}

#[async_trait]
impl Tool for StructuredOutputTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check(input, ctx)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        if !input.is_object() {
            let kind = match input {
                Value::Array(_) => "an array",
                Value::String(_) => "a string",
                Value::Number(_) => "a number",
                Value::Bool(_) => "a boolean",
                _ => "null",
            };
            return Err(ToolError::Validation(format!(
                "the structured output must be a JSON object, got {kind}"
            )));
        }
        check(&input, ctx)?;
        let checked = ctx.session.output_schema().is_some();
        Ok(ToolOutput::text(if checked {
            "Structured output accepted (it matches the session's output schema)."
        } else {
            "Structured output accepted."
        })
        .with_metadata("schema_checked", json!(checked))
        .with_structured(input))
    }
}
