//! `send_user_message`: delivers a message to the session's user while the agent works.
//!
//! The message travels as a progress report (`{"user_message": …}`), which reaches the
//! session's event subscribers (`tool:progress`) and a streaming batch's client at once. The
//! tool needs a user: the dispatcher refuses it in a non-interactive session (kind
//! `requires_interaction`), and the tool refuses too when run without a dispatcher. It does
//! not wait for, or return, an answer.

use async_trait::async_trait;
use serde_json::{Value, json};

use super::string_field;
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};

const MAX_MESSAGE_CHARS: usize = 10_000;

/// The `send_user_message` tool.
pub struct SendUserMessageTool {
    spec: ToolSpec,
}

impl SendUserMessageTool {
    pub fn new() -> Result<SendUserMessageTool, BuildError> {
        let spec = ToolSpec::builder("send_user_message")
            .description(
                "Sends a message to the user of this session right away, while you keep \
                 working: a status update, a finding, or a heads-up about something that needs \
                 their attention. It does not wait for a reply. Only available in interactive \
                 sessions.",
            )
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "message": {
                        "type": "string",
                        "description": "The message, in markdown",
                        "minLength": 1,
                        "maxLength": MAX_MESSAGE_CHARS
                    }
                },
                "required": ["message"],
                "additionalProperties": false
            }))
            .requires_user_interaction(true)
            .read_only(true)
            // Messages keep the order the model sent them in.
            .concurrency_safe(false)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .idempotent(false)
            .open_world(false)
            .max_result_size_chars(None)
            .build()?;
        Ok(SendUserMessageTool { spec })
    }
}

fn message(input: &Value) -> Result<&str, ToolError> {
    let message = string_field(input, "message")?;
    if message.trim().is_empty() {
        return Err(ToolError::Validation("\"message\" is blank".into()));
    }
    let chars = message.chars().count();
    if chars > MAX_MESSAGE_CHARS {
        return Err(ToolError::Validation(format!(
            "\"message\" is at most {MAX_MESSAGE_CHARS} characters, got {chars}"
        )));
    }
    Ok(message)
}

#[async_trait]
impl Tool for SendUserMessageTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        message(input).map(drop)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let message = message(&input)?;
        if !ctx.interactive {
            return Err(ToolError::RequiresInteraction(
                "this session is not interactive; there is no user to send a message to".into(),
            ));
        }
        ctx.progress.report(json!({ "user_message": message }));
        let chars = message.chars().count();
        Ok(ToolOutput::text(format!(
            "Message delivered to the user ({chars} characters)."
        ))
        .with_metadata("delivered_chars", json!(chars)))
    }
}
