//! `sleep`: waits a given time, returning early when the call is cancelled.
//!
//! Owns only the wait. An interrupt cancels it (interrupt behaviour `cancel`); when the
//! call's cancellation token fires, it returns at once with how long it actually slept, which
//! the dispatcher appends to the `cancelled` (or `timeout`, `aborted`) result.

use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};

use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError,
    ToolOutput, ToolSpec,
};

const MAX_DURATION_MS: u64 = 300_000;

/// The `sleep` tool.
pub struct SleepTool {
    spec: ToolSpec,
}

impl SleepTool {
    pub fn new() -> Result<SleepTool, BuildError> {
        let spec = ToolSpec::builder("sleep")
            .description(format!(
                "Waits for `duration_ms` milliseconds (at most {MAX_DURATION_MS}, i.e. 5 \
                 minutes), then returns. Use it to give a background process time to make \
                 progress before checking on it, or to back off before retrying something. An \
                 interrupt ends the wait early."
            ))
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "duration_ms": {
                        "type": "integer",
                        "description": "How long to wait, in milliseconds",
                        "minimum": 0,
                        "maximum": MAX_DURATION_MS
                    }
                },
                "required": ["duration_ms"],
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
        Ok(SleepTool { spec })
    }
}

fn duration_ms(input: &Value) -> Result<u64, ToolError> {
    let value = input.get("duration_ms");
    let ms = value
        .and_then(crate::tools::input::whole_number)
        .ok_or_else(|| {
            ToolError::Validation(format!(
                "\"duration_ms\" must be a non-negative integer, got {}",
                value.map_or_else(|| "nothing".to_owned(), Value::to_string)
            ))
        })?;
    if ms > MAX_DURATION_MS {
        return Err(ToolError::Validation(format!(
            "\"duration_ms\" is at most {MAX_DURATION_MS}, got {ms}"
        )));
    }
    Ok(ms)
}

#[async_trait]
impl Tool for SleepTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        duration_ms(input).map(drop)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let requested = duration_ms(&input)?;
        let started = Instant::now();
        tokio::select! {
            () = tokio::time::sleep(Duration::from_millis(requested)) => {
                Ok(ToolOutput::text(format!("Slept {requested} ms."))
                    .with_metadata("slept_ms", json!(requested)))
            }
            () = ctx.cancellation.cancelled() => {
                let slept = u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX);
                Ok(ToolOutput::failure(format!(
                    "The sleep was stopped after {slept} of {requested} ms."
                ))
                .with_metadata("slept_ms", json!(slept))
                .with_metadata("cancelled", json!(true)))
            }
        }
    }
}
