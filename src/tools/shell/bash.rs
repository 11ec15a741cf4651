//! `bash` (alias `Bash`): runs a command line in the session's shell directory.
//!
//! Owns input checking, the timeout, the permission a command needs, turning the process's
//! end into the result text and metadata, and the `cd` that persists
//! ([`ContextUpdate::ShellCwd`]). Running the process is [`super::process`], judging the
//! command is [`crate::shell_syntax`], the workspace boundary is [`super::boundary`], background
//! tasks are [`super::background`]. The result's text is the output as written (stdout and
//! stderr interleaved), then one line for anything but a clean exit: `exit code: N`,
//! `killed by signal N`, or the timeout or cancellation; the same facts are in the metadata.
//! In an environment, a call whose session went over its `memory_mb` or `pids` while it ran
//! (the sandbox's [`super::sandbox::LimitMet`]) is stopped like a timed-out one and ends as
//! `resource_exhausted`, its last line naming the limit.

use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};

use super::background::BackgroundShells;
use super::boundary;
use super::output::TakenOutput;
use super::process::{Ended, SharedOutput};
use super::spill::SpillWriter;
use crate::shell_syntax::{Analysis, analyze};
use crate::tool::{
    ConcurrencyClass, ContextUpdate, ErrorKind, InterruptBehavior, PermissionLevel, PreviewStyle,
    SessionView, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

pub(crate) const DEFAULT_TIMEOUT_MS: u64 = 120_000;
pub(crate) const MAX_TIMEOUT_MS: u64 = 600_000;
/// Commands travel as one argument to bash; Linux caps one argument at 128 KiB.
pub(crate) const MAX_COMMAND_BYTES: usize = 100_000;
/// Output longer than this is offloaded with a head-and-tail preview.
pub(crate) const MAX_RESULT_CHARS: usize = 30_000;
/// The dispatcher's limit for a call: the shell's own longest timeout plus room to stop the
/// process group and return the partial output, so the shell's timeout always fires first.
const CALL_TIMEOUT: Duration = Duration::from_millis(MAX_TIMEOUT_MS + 30_000);

const DESCRIPTION: &str = "Runs a command line in bash and returns its output: stdout and stderr \
interleaved as they were written, then `exit code: N` when the exit code is not 0.

- The working directory persists between calls: after `cd sub`, the next call starts in `sub`. \
Other shell state (variables, functions, `set` options) does not persist. It starts in the \
session's workspace.
- stdin is /dev/null: nothing can answer a prompt, so pass non-interactive flags (`--yes`, \
`--no-edit`, `git --no-pager`).
- `timeout` is in milliseconds: default 120000 (2 minutes) unless the session's `config` \
setting `bash_default_timeout_ms` changes it, at most 600000 (10 minutes). On timeout the \
command and every process it started are killed and the output so far is returned.
- Processes the command leaves running when it ends are stopped. For servers, watchers and \
other long-running commands set `run_in_background: true`: you get a task id at once, read new \
output with `bash_output` and stop the task with `kill_shell`.
- Output over 30000 characters is stored; you see its start and its end and a `result_id` to \
page through the rest with `read_result`.
- For files prefer the dedicated tools (`read_file`, `write_file`, `edit_file`, \
`glob_search`, `grep_search`): they are faster and track what you have read.
- Quote paths that contain spaces. Chain dependent steps with `&&`; for independent commands \
make several calls in the same turn and they may run in parallel.
- Read-only commands (ls, cat, grep, find, git status/log/diff, …) that stay inside the \
workspace need only read permission and run in parallel with other read-only calls; any \
other command, one naming a path outside the workspace (absolute, `..`, `~`, `$HOME`) and \
any command while the shell's directory is outside the workspace need full access. When the \
daemon runs the shell in a sandbox (the result's `sandbox` metadata says which), other \
commands inside the workspace need only workspace write access; the sandbox lets them write \
only inside the workspace (and a private temporary directory, `$TMPDIR`).";

/// A checked `bash` input.
#[derive(Debug)]
pub(crate) struct BashInput {
    pub command: String,
    pub timeout_ms: u64,
    pub run_in_background: bool,
    /// For people watching (progress events); never run.
    pub description: Option<String>,
}

/// Checks what the schema cannot: an empty or NUL-bearing command, its size, the timeout's
/// range (also whole-number floats like `1000.0`, which some clients send).
pub(crate) fn parse_input(input: &Value) -> Result<BashInput, ToolError> {
    let command = input
        .get("command")
        .and_then(Value::as_str)
        .ok_or_else(|| ToolError::Validation("command must be a string".into()))?;
    if command.trim().is_empty() {
        return Err(ToolError::Validation(
            "command is empty; give a shell command to run".into(),
        ));
    }
    if command.contains('\0') {
        return Err(ToolError::Validation("command contains a NUL byte".into()));
    }
    if command.len() > MAX_COMMAND_BYTES {
        return Err(ToolError::Validation(format!(
            "command is {} bytes long; the limit is {MAX_COMMAND_BYTES} bytes (write a long script to a file and run the file)",
            command.len()
        )));
    }
    let timeout_ms = match input.get("timeout") {
        None | Some(Value::Null) => DEFAULT_TIMEOUT_MS,
        Some(value) => crate::tools::input::whole_number(value)
            .filter(|ms| (1..=MAX_TIMEOUT_MS).contains(ms))
            .ok_or_else(|| {
                ToolError::Validation(format!(
                    "timeout {value} is out of range; give 1 to {MAX_TIMEOUT_MS} milliseconds"
                ))
            })?,
    };
    let run_in_background = match input.get("run_in_background") {
        None | Some(Value::Null) => false,
        Some(Value::Bool(flag)) => *flag,
        Some(other) => {
            return Err(ToolError::Validation(format!(
                "run_in_background must be true or false, not {other}"
            )));
        }
    };
    let description = input
        .get("description")
        .and_then(Value::as_str)
        .map(str::to_owned);
    Ok(BashInput {
        command: command.to_owned(),
        timeout_ms,
        run_in_background,
        description,
    })
}

/// The classifier's analysis of an input's command; `Err` (fail closed) when there is none.
fn analyze_input(input: &Value) -> Result<Analysis, String> {
    let command = input
        .get("command")
        .and_then(Value::as_str)
        .ok_or_else(|| "command must be a string".to_owned())?;
    if command.len() > MAX_COMMAND_BYTES {
        // Refused at validation anyway; do not spend a parse on it first.
        return Err(format!("command is longer than {MAX_COMMAND_BYTES} bytes"));
    }
    analyze(command)
}

/// What a command needs: `read_only` for a read-only command that stays inside the
/// workspace; `workspace_write` for any other command inside it when a sandbox `confines`
/// the shell to the workspace; otherwise `danger_full_access`.
fn required_permission(
    input: &Value,
    session: &dyn SessionView,
    confines: bool,
) -> Result<PermissionLevel, String> {
    let analysis = analyze_input(input)?;
    if session.environment().is_some() {
        // In an environment a read anywhere is a read (it holds nothing of the host), and the
        // sandbox itself keeps writes to `workdir` unless the session has full access (its
        // root is then bound writable): DESIGN §12.
        return Ok(if analysis.classification.read_only {
            PermissionLevel::ReadOnly
        } else {
            PermissionLevel::WorkspaceWrite
        });
    }
    let cwd = boundary::starting_directory(session);
    let inside = boundary::check(&analysis.paths, session, &cwd).is_ok();
    Ok(
        match (analysis.classification.read_only, inside, confines) {
            (true, true, _) => PermissionLevel::ReadOnly,
            (false, true, true) => PermissionLevel::WorkspaceWrite,
            _ => PermissionLevel::DangerFullAccess,
        },
    )
}

pub(crate) struct BashTool {
    spec: ToolSpec,
    shells: Arc<BackgroundShells>,
}

impl BashTool {
    pub(crate) fn new(shells: Arc<BackgroundShells>) -> Result<BashTool, crate::tool::BuildError> {
        let confines = shells.sandbox().confines();
        let spec = ToolSpec::builder("bash")
            .alias("Bash")
            .description(DESCRIPTION)
            .input_schema(json!({
                "type": "object",
                "properties": {
                    "command": {
                        "type": "string",
                        "description": "The command line to run with `bash -c`."
                    },
                    "timeout": {
                        "type": "integer",
                        "minimum": 1,
                        "maximum": MAX_TIMEOUT_MS,
                        "description": "Milliseconds before the command and its processes are killed (default 120000 unless the session's `bash_default_timeout_ms` setting changes it; at most 600000). Ignored with run_in_background."
                    },
                    "description": {
                        "type": "string",
                        "description": "What the command does, in 5 to 10 words (shown to people watching, not run)."
                    },
                    "run_in_background": {
                        "type": "boolean",
                        "description": "Start the command and return a task id at once; read its output with bash_output and stop it with kill_shell."
                    }
                },
                "required": ["command"],
                "additionalProperties": false
            }))
            .read_only_if(|input, _| Ok(analyze_input(input)?.classification.read_only))
            .concurrency_safe_if(|input, _| {
                // A background command's process runs detached, so only its start is the
                // call's, and that conflicts with nothing: it never holds the session's call
                // gate exclusive (`session::gate`).
                let background = input.get("run_in_background") == Some(&Value::Bool(true));
                Ok(analyze_input(input)?.classification.concurrency_safe || background)
            })
            .destructive_if(|input, _| Ok(analyze_input(input)?.classification.destructive))
            // Without a sandbox nothing confines the shell: anything that is not read-only, or
            // reaches outside the workspace, needs full access. With one, a command inside the
            // workspace needs only workspace_write (the sandbox enforces the boundary the
            // static check can only estimate).
            .permission_for(PermissionLevel::ReadOnly, move |input, ctx| {
                required_permission(input, &*ctx.session, confines)
            })
            .concurrency_class(ConcurrencyClass::Unsafe)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .aborts_siblings_on_failure(true)
            .max_result_size_chars(Some(MAX_RESULT_CHARS))
            .preview_style(PreviewStyle::HeadAndTail)
            .timeout(CALL_TIMEOUT)
            .idempotent(false)
            .open_world(true)
            .build()?;
        Ok(BashTool { spec, shells })
    }
}

/// Why a running command was stopped.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Stop {
    Timeout,
    Cancelled,
    /// It went over one of its environment's limits (DESIGN §12).
    Limit(super::sandbox::LimitMet),
}

#[async_trait]
impl Tool for BashTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        parse_input(input).map(|_| ())
    }

    async fn execute(&self, raw: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let mut input = parse_input(&raw)?;
        if raw.get("timeout").is_none_or(Value::is_null) {
            // The session's default, as set with the `config` tool.
            input.timeout_ms =
                crate::tools::runtime_setting_u64(&*ctx.session, "bash_default_timeout_ms")
                    .unwrap_or(DEFAULT_TIMEOUT_MS);
        }
        let (cwd, note) = starting_directory(ctx).await;
        check_boundary_again(&input.command, &cwd, ctx)?;
        let confinement = self.shells.confine(&ctx.session, ctx.authorized)?;
        let sandbox = json!(confinement.kind().as_str());
        // In an environment, the shell commands run in (`/bin/sh` when the image has no bash).
        let shell = json!(
            ctx.session
                .environment()
                .map_or_else(|| "bash".to_owned(), |e| e.shell.display().to_string())
        );
        let limits = json!(confinement.limits_name());
        if input.run_in_background {
            let (task_id, pid) = self
                .shells
                .start(&ctx.session, &input.command, &cwd, &confinement)
                .await?;
            return Ok(background_started(&task_id, pid, note)
                .with_metadata("sandbox", sandbox)
                .with_metadata("shell", shell)
                .with_metadata("limits", limits));
        }
        // Held until the call returns (`shell_calls_per_session`; over it, the call waits).
        let _slot = self
            .shells
            .foreground_slot(ctx.session.id(), &ctx.cancellation)
            .await?;
        let settings = self.shells.spill_settings().clone();
        // Output up to the spill threshold is kept whole here; past it the spill has it all.
        let output = SharedOutput::new(settings.memory_bytes);
        let prefix = note.as_ref().map(|n| format!("{n}\n")).unwrap_or_default();
        let spill = SpillWriter::new(settings, prefix.as_bytes());
        let process = super::spare::start_foreground(
            self.shells.spares(),
            &ctx.session,
            &input.command,
            &cwd,
            output.clone(),
            Some(spill),
            &confinement,
        )
        .await
        .map_err(|err| {
            ToolError::Execution(format!(
                "could not start bash in \"{}\": {err}",
                cwd.display()
            ))
        })?;
        ctx.progress
            .report(json!({"pid": process.pid(), "description": input.description}));
        let timeout = Duration::from_millis(input.timeout_ms);
        // An environment's limits are watched (its counters read from the call's start): a
        // process over one stops the call.
        let watch = ctx
            .session
            .environment()
            .and_then(|_| confinement.limit_watch());
        let over_limit = async {
            match &watch {
                Some(watch) => watch.until_met().await,
                None => std::future::pending().await,
            }
        };
        let stop = async {
            tokio::select! {
                () = tokio::time::sleep(timeout) => Stop::Timeout,
                () = ctx.cancellation.cancelled() => Stop::Cancelled,
                met = over_limit => Stop::Limit(met),
            }
        };
        let (mut stopped, mut ended) = process.wait_or_stop(stop).await;
        if stopped.is_none() {
            // What the OOM killer left may have ended before the next poll saw the counter.
            stopped = watch.as_ref().and_then(|w| w.met()).map(Stop::Limit);
        }
        if let Some(Stop::Limit(met)) = &stopped {
            crate::telemetry::record_limit_kill(met.limit);
        }
        if let Some(environment) = ctx.session.environment() {
            // The shell reported the environment's path; the session keeps the host's.
            ended.cwd = ended.cwd.and_then(|inside| environment.to_host(&inside));
        }
        if let Some(moved) = ended.cwd.as_deref().filter(|moved| *moved != cwd) {
            // The spare started beside this call waits in the old directory.
            self.shells
                .spares()
                .refill(&ctx.session, moved, &confinement);
        }
        if let Some(why) = ended.lost {
            return Err(ToolError::Execution(why));
        }
        let (taken, total_bytes) = {
            let mut buffer = output.lock();
            (buffer.take(false), buffer.total_bytes())
        };
        let finished = Finished {
            taken,
            total_bytes,
            ended,
            stopped,
            timeout_ms: input.timeout_ms,
            note,
            cwd,
        };
        Ok(finished
            .into_output(&*ctx.session)
            .await
            .with_metadata("sandbox", sandbox)
            .with_metadata("shell", shell)
            .with_metadata("limits", limits))
    }
}

/// A call authorised below full access was judged to stay inside the workspace; judged again
/// from where it now starts, it must still (the shell's directory may have gone, or a symlink
/// changed, since the check). Like the path tools' check at execution.
fn check_boundary_again(command: &str, cwd: &Path, ctx: &ToolContext) -> Result<(), ToolError> {
    if ctx.authorized >= PermissionLevel::DangerFullAccess || ctx.session.environment().is_some() {
        return Ok(());
    }
    analyze(command)
        .and_then(|analysis| boundary::check(&analysis.paths, &*ctx.session, cwd))
        .map_err(|why| {
            ToolError::Validation(format!(
                "{why}; the call was authorised only for the workspace (did the filesystem change after the check?)"
            ))
        })
}

/// The directory a call starts in: the session's shell directory, or the workspace (with a
/// note) when that directory is gone.
async fn starting_directory(ctx: &ToolContext) -> (PathBuf, Option<String>) {
    let stored = ctx.session.shell_cwd();
    // One stat on the async thread: a `spawn_blocking` round trip costs more than the call
    // itself, and the shell about to start in that directory would wait on it anyway.
    match std::fs::metadata(&stored) {
        Ok(metadata) if metadata.is_dir() => (stored, None),
        _ => {
            let workspace = ctx.session.working_directory().to_path_buf();
            let note = format!(
                "note: the shell's working directory \"{}\" no longer exists; this command ran in the workspace \"{}\"",
                stored.display(),
                workspace.display()
            );
            (workspace, Some(note))
        }
    }
}

fn background_started(task_id: &str, pid: u32, note: Option<String>) -> ToolOutput {
    let mut text = note.map(|n| n + "\n").unwrap_or_default();
    text.push_str(&format!(
        "started background task {task_id} (pid {pid}). Read its output with bash_output {{\"task_id\": \"{task_id}\"}}; stop it with kill_shell {{\"task_id\": \"{task_id}\"}}."
    ));
    ToolOutput::text(text)
        .with_metadata("task_id", json!(task_id))
        .with_metadata("pid", json!(pid))
}

/// Everything known once a foreground command is over.
struct Finished {
    taken: TakenOutput,
    total_bytes: u64,
    ended: Ended,
    stopped: Option<Stop>,
    timeout_ms: u64,
    note: Option<String>,
    /// Where it started.
    cwd: PathBuf,
}

impl Finished {
    async fn into_output(mut self, session: &dyn SessionView) -> ToolOutput {
        let code = self.ended.status.and_then(|s| s.code());
        let signal = self.ended.status.and_then(|s| s.signal());
        let last_line = match (self.stopped.clone(), code, signal) {
            (Some(Stop::Timeout), _, _) => Some(format!(
                "command timed out after {} ms; it and every process it started were killed",
                self.timeout_ms
            )),
            (Some(Stop::Cancelled), _, _) => {
                Some("command was cancelled; it and every process it started were killed".into())
            }
            (Some(Stop::Limit(met)), _, _) => Some(met.message),
            (None, Some(0), _) => None,
            (None, Some(code), _) => Some(format!("exit code: {code}")),
            (None, None, Some(signal)) => Some(format!("killed by signal {signal}")),
            (None, None, None) => Some("the exit status could not be read".into()),
        };
        let spill = self.ended.spill.take();
        let spill_failure = spill
            .as_ref()
            .and_then(|spill| spill.failure().map(str::to_owned));
        let mut omitted_bytes = self.taken.omitted_bytes;
        let (mut output, text) = match spill.filter(SpillWriter::spilled) {
            Some(spill) => {
                omitted_bytes = spill.omitted_bytes();
                let suffix = match &last_line {
                    Some(line) if spill.ends_with_newline() => line.clone(),
                    Some(line) => format!("\n{line}"),
                    None => String::new(),
                };
                match spill.finish(&suffix).await {
                    Some(spilled) => {
                        let text = format!(
                            "{}\n[… {} bytes of output in all; the middle is not shown here …]\n{}",
                            spilled.head, spilled.bytes, spilled.tail
                        );
                        (ToolOutput::default().with_spill(spilled), text)
                    }
                    None => (
                        ToolOutput::default(),
                        self.memory_text(last_line.as_deref()),
                    ),
                }
            }
            None => (
                ToolOutput::default(),
                self.memory_text(last_line.as_deref()),
            ),
        };
        output.text = text;
        output.is_error = last_line.is_some();
        // Its own timeout is kind `timeout` (DESIGN §3). A cancellation is the dispatcher's
        // stop, which names the kind itself.
        output.error_kind = match &self.stopped {
            Some(Stop::Timeout) => Some(ErrorKind::Timeout),
            Some(Stop::Limit(_)) => Some(ErrorKind::ResourceExhausted),
            _ => None,
        };
        let final_cwd = self.ended.cwd.clone().unwrap_or(self.cwd);
        output = output
            .with_metadata("exit_code", json!(code))
            .with_metadata("signal", json!(signal))
            .with_metadata("timed_out", json!(self.stopped == Some(Stop::Timeout)))
            .with_metadata("cancelled", json!(self.stopped == Some(Stop::Cancelled)));
        if let Some(Stop::Limit(met)) = &self.stopped {
            output = output.with_metadata("limit", json!(met.limit));
        }
        output = output
            .with_metadata("output_bytes", json!(self.total_bytes))
            .with_metadata("omitted_bytes", json!(omitted_bytes))
            .with_metadata("cwd", json!(final_cwd.to_string_lossy()));
        if let Some(why) = spill_failure {
            output = output.with_metadata("spill_error", json!(why));
        }
        if final_cwd != session.shell_cwd() {
            output = output.with_update(ContextUpdate::ShellCwd { path: final_cwd });
        }
        output
    }

    /// The result's text from the output kept in memory: the note, the output, the last line.
    fn memory_text(&mut self, last_line: Option<&str>) -> String {
        let mut text = self.note.take().map(|n| n + "\n").unwrap_or_default();
        text.push_str(&self.taken.text);
        if let Some(line) = last_line {
            if !text.is_empty() && !text.ends_with('\n') {
                text.push('\n');
            }
            text.push_str(line);
        }
        if text.is_empty() {
            text.push_str("(no output)");
        }
        text
    }
}

#[cfg(test)]
#[path = "bash_tests.rs"]
mod tests;
