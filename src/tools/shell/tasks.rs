//! `bash_output` (alias `BashOutput`), `write_stdin` (alias `WriteStdin`) and `kill_shell`
//! (alias `KillShell`): reading, feeding and stopping the session's background tasks. The
//! tasks themselves live in [`BackgroundShells`]; these tools only check input and word the
//! answer. `bash_output` and `write_stdin` take `wait_ms`: wait up to that long for output
//! when there is none yet, returning as soon as some arrives (or the task ends), so an agent
//! need not poll; at most [`MAX_WAIT_MS`].

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::background::{BackgroundShells, TaskReport, TaskStatus};
use super::bash::MAX_RESULT_CHARS;
use crate::tool::{
    BuildError, ConcurrencyClass, InterruptBehavior, PermissionLevel, PreviewStyle, Tool,
    ToolContext, ToolError, ToolOutput, ToolSpec,
};

/// The longest a read waits for output.
pub(crate) const MAX_WAIT_MS: u64 = 60_000;

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

/// [`task_schema`] with `wait_ms` (and, for `write_stdin`, `input`).
fn waiting_schema(purpose: &str, with_input: bool) -> Value {
    let mut schema = task_schema(purpose);
    schema["properties"]["wait_ms"] = json!({
        "type": "integer",
        "minimum": 0,
        "maximum": MAX_WAIT_MS,
        "description": "Wait up to this many milliseconds for output when none has arrived yet; returns as soon as some does or the task ends (default 0: return at once)."
    });
    if with_input {
        schema["properties"]["input"] = json!({
            "type": "string",
            "description": "The text to write to the task's stdin, as is (end a line with \"\\n\")."
        });
        schema["required"] = json!(["task_id", "input"]);
    }
    schema
}

fn wait_ms(input: &Value) -> Result<Duration, ToolError> {
    match input.get("wait_ms") {
        None | Some(Value::Null) => Ok(Duration::ZERO),
        Some(value) => crate::tools::input::whole_number(value)
            .filter(|ms| *ms <= MAX_WAIT_MS)
            .map(Duration::from_millis)
            .ok_or_else(|| {
                ToolError::Validation(format!(
                    "wait_ms {value} is out of range; give 0 to {MAX_WAIT_MS} milliseconds"
                ))
            }),
    }
}

fn stdin_input(input: &Value) -> Result<&str, ToolError> {
    input
        .get("input")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Validation("input must be a string".into()))
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
                 killed. Each read returns only new output. With `wait_ms` it waits up to that \
                 long for output and returns as soon as some arrives or the task ends, instead \
                 of returning \"(no new output)\" at once. Output over 30000 characters is \
                 stored and previewed (start and end) with a `result_id` for `read_result`.",
            )
            .input_schema(waiting_schema("the task to read", false))
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
        task_id(input)?;
        wait_ms(input).map(|_| ())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let report = self
            .shells
            .read_waiting(&ctx.session_id, task_id(&input)?, wait_ms(&input)?)
            .await?;
        Ok(report_output(report, "(no new output)"))
    }
}

/// `write_stdin {task_id, input, wait_ms?}`.
pub(crate) struct WriteStdinTool {
    spec: ToolSpec,
    shells: Arc<BackgroundShells>,
}

impl WriteStdinTool {
    pub(crate) fn new(shells: Arc<BackgroundShells>) -> Result<WriteStdinTool, BuildError> {
        let spec = ToolSpec::builder("write_stdin")
            .alias("WriteStdin")
            .description(
                "Writes `input` to the stdin of a background bash task (started with \
                 `run_in_background`): answer a prompt, drive a REPL (`python3 -i`), feed a \
                 program. The text is written as is, so end a line with \"\\n\". Then returns \
                 the task's new output like `bash_output`, waiting up to `wait_ms` for it to \
                 arrive.",
            )
            .input_schema(waiting_schema("the task to write to", true))
            // Input to a running program can make it do anything it can do (a REPL runs
            // code), so it is neither read-only nor safe to run beside other calls, and it
            // needs what running any command there needs (`input_permission`).
            .read_only(false)
            .concurrency_safe(false)
            .destructive(false)
            .permission_for(PermissionLevel::WorkspaceWrite, {
                let shells = shells.clone();
                move |input, ctx| {
                    let task = task_id(input).map_err(|err| err.message().to_owned())?;
                    Ok(shells.input_permission(&ctx.session_id, task))
                }
            })
            .concurrency_class(ConcurrencyClass::WriteExclusive)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .max_result_size_chars(Some(MAX_RESULT_CHARS))
            .preview_style(PreviewStyle::HeadAndTail)
            .idempotent(false)
            .open_world(false)
            .build()?;
        Ok(WriteStdinTool { spec, shells })
    }
}

#[async_trait]
impl Tool for WriteStdinTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        task_id(input)?;
        stdin_input(input)?;
        wait_ms(input).map(|_| ())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let task = task_id(&input)?;
        let text = stdin_input(&input)?;
        self.shells
            .write_stdin(&ctx.session_id, task, text.as_bytes())
            .await?;
        let report = self
            .shells
            .read_waiting(&ctx.session_id, task, wait_ms(&input)?)
            .await?;
        let written = format!("wrote {} bytes to {task}'s stdin", text.len());
        let output = report_output(report, "(no new output)");
        Ok(ToolOutput {
            text: format!("{written}\n\n{}", output.text),
            ..output
        })
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
