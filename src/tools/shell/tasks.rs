//! `bash_output` (alias `BashOutput`) and `kill_shell` (alias `KillShell`): reading and
//! stopping the session's background tasks. The tasks themselves live in
//! [`BackgroundShells`]; these tools only check input and word the answer.

use std::sync::Arc;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::background::{BackgroundShells, TaskReport, TaskStatus};
use super::bash::MAX_RESULT_CHARS;
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, PreviewStyle, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec,
};

fn task_schema(purpose: &str) -> Value {
    json!({
        "type": "object",
        "properties": {
            "task_id": {
                "type": "string",
                "description": format!("The id `bash` returned when it started the task in the background (e.g. \"bash_3\"); {purpose}.")
            }
        },
        "required": ["task_id"],
        "additionalProperties": false
    })
}

fn task_id(input: &Value) -> Result<&str, ToolError> {
    let id = input
        .get("task_id")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Validation("task_id must be a string".into()))?;
    if id.trim().is_empty() {
        return Err(ToolError::Validation(
            "task_id is empty; give the id bash returned".into(),
        ));
    }
    Ok(id)
}

fn report_output(report: TaskReport, empty: &str) -> ToolOutput {
    let mut text = if report.output.text.is_empty() {
        empty.to_owned()
    } else {
        report.output.text
    };
    if !text.ends_with('\n') {
        text.push('\n');
    }
    text.push_str(&format!("\nstatus: {}", report.status.describe()));
    let code = report.status.exit_code();
    let status = match report.status {
        TaskStatus::Running => "running",
        TaskStatus::Exited { .. } => "exited",
        TaskStatus::Killed => "killed",
    };
    ToolOutput::text(text)
        .with_metadata("task_id", json!(report.task_id))
        .with_metadata("command", json!(report.command))
        .with_metadata("status", json!(status))
        .with_metadata("exit_code", json!(code))
        .with_metadata("omitted_bytes", json!(report.output.omitted_bytes))
}

/// `bash_output {task_id}`.
pub(crate) struct BashOutputTool {
    spec: ToolSpec,
    shells: Arc<BackgroundShells>,
}

impl BashOutputTool {
    pub(crate) fn new(shells: Arc<BackgroundShells>) -> Result<BashOutputTool, BuildError> {
        let spec = ToolSpec::builder("bash_output")
            .alias("BashOutput")
            .description(
                "Returns the output a background bash task (started with `run_in_background`) \
                 wrote since the last read, then its status: running, exited with its code, or \
                 killed. Each read returns only new output; call it again later for more. Output \
                 over 30000 characters is stored and previewed (start and end) with a \
                 `result_id` for `read_result`.",
            )
            .input_schema(task_schema("the task to read"))
            // Reading moves the task's "read so far" mark, bookkeeping of this tool like the
            // shell's cwd is for `cd`: still read-only, but two reads in parallel would split
            // the new output between them at random, so not concurrency-safe.
            .read_only(true)
            .concurrency_safe(false)
            .destructive(false)
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::ReadOnly)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .max_result_size_chars(Some(MAX_RESULT_CHARS))
            .preview_style(PreviewStyle::HeadAndTail)
            .idempotent(false)
            .open_world(false)
            .build()?;
        Ok(BashOutputTool { spec, shells })
    }
}

#[async_trait]
impl Tool for BashOutputTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        task_id(input).map(|_| ())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let report = self.shells.read(&ctx.session_id, task_id(&input)?)?;
        Ok(report_output(report, "(no new output)"))
    }
}

/// `kill_shell {task_id}`.
pub(crate) struct KillShellTool {
    spec: ToolSpec,
    shells: Arc<BackgroundShells>,
}

impl KillShellTool {
    pub(crate) fn new(shells: Arc<BackgroundShells>) -> Result<KillShellTool, BuildError> {
        let spec = ToolSpec::builder("kill_shell")
            .alias("KillShell")
            .description(
                "Stops a background bash task (started with `run_in_background`) and every \
                 process it started, and forgets it. Returns the output not read yet and how the \
                 task ended. Stopping a task that already exited just forgets it.",
            )
            .input_schema(task_schema("the task to stop"))
            .read_only(false)
            .concurrency_safe(false)
            // It kills processes, which is what makes `kill` destructive to the classifier:
            // whatever the task was doing (a build, a migration) stops half-way.
            .destructive(true)
            // A read-only session may start a read-only background task (`tail -f`), so it
            // must be able to stop it.
            .permission(PermissionLevel::ReadOnly)
            .concurrency_class(ConcurrencyClass::WriteExclusive)
            .interrupt_behavior(InterruptBehavior::Block)
            .max_result_size_chars(Some(MAX_RESULT_CHARS))
            .preview_style(PreviewStyle::HeadAndTail)
            .idempotent(false)
            .open_world(false)
            .build()?;
        Ok(KillShellTool { spec, shells })
    }
}

#[async_trait]
impl Tool for KillShellTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        task_id(input).map(|_| ())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let report = self.shells.kill(&ctx.session_id, task_id(&input)?).await?;
        let heading = format!("task {} stopped and removed", report.task_id);
        let output = report_output(report, "(no unread output)");
        Ok(ToolOutput {
            text: format!("{heading}\n\n{}", output.text),
            ..output
        })
    }
}
