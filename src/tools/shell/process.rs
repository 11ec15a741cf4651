//! `ShellProcess`: one `bash -c` child in a process group of its own, its output captured, and
//! the whole group stopped when it must stop.
//!
//! Unsandboxed, the daemon starts the shell itself ([`DirectChild`]); sandboxed, the session's spawner (see
//! [`super::sandbox::spawner`]) starts it inside the session's sandbox from the same argument
//! list and descriptors. A foreground shell may instead be the session's spare
//! ([`super::spare`]): started ahead the same way, handed its command, and put together here
//! ([`ShellProcess::assemble`]). Either way the child gets a new session (`setsid`, so also a new
//! process group whose id is its pid), stdin from `/dev/null` (or, for a background task, a
//! pipe [`super::tasks`]' `write_stdin` writes to), and stdout and stderr on one pipe, so the
//! output is interleaved exactly as the command wrote it, as a terminal would show it. A reader
//! task moves the output into an [`OutputBuffer`] as it arrives (waking whoever waits for
//! output), and for a foreground command into a [`SpillWriter`] too (which moves it to a file
//! once it outgrows memory), so a chatty command never blocks on a full pipe and a background
//! task needs nobody polling it.
//!
//! A foreground command runs inside a small wrapper that `eval`s it and then prints the
//! shell's final directory (`pwd -P`) on descriptor 3, which is closed while the command runs,
//! so nothing the command prints can be mistaken for it; that is how a `cd` persists. A
//! command that ends the shell itself (`exit`, `set -e` tripping, `exec`) reports no
//! directory and the previous one stays.
//!
//! Stopping is [`super::group`]'s: the whole group. When the shell exits on its own, whatever
//! it left running in its group is stopped the same way: a foreground call leaves nothing
//! behind (`run_in_background` is for processes that should outlive a call). Processes that
//! left the group themselves (`setsid`, daemons) are out of reach. The daemon's own
//! environment variables named `TOOLD_*` (auth tokens, database URLs) are not passed on, nor
//! `CDPATH`, so that a relative `cd` goes where the workspace check resolved it. The call's
//! trace context is (`TRACEPARENT`, `TRACESTATE`, naming the spawn's span), per command,
//! whoever starts it.

use std::ffi::OsString;
use std::future::Future;
use std::io;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::ExitStatus;
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::Command;
use tokio::sync::Notify;
use tokio::task::JoinHandle;

use tokio_util::sync::CancellationToken;
use tracing::Instrument;

use super::direct::DirectChild;
use super::group::{GroupGuard, Leader, terminate_group};
use super::output::OutputBuffer;
use super::sandbox::Confinement;
use super::spill::SpillWriter;
use crate::tool::trace;

/// How long to wait for the last output (and the cwd report) once the shell is gone.
const DRAIN_WAIT: Duration = Duration::from_millis(200);

/// Runs the command (`$1`) with descriptor 3 closed, then reports the directory on 3 and
/// exits with the command's status. `set --` hides the command text from `$1`.
const WRAPPER: &str = "__toold_command=$1\nset --\neval \"$__toold_command\" 3>&-\n__toold_status=$?\nbuiltin pwd -P 2>/dev/null >&3\nexit \"$__toold_status\"\n";

/// A shared, capped output buffer, and a signal for those waiting on new output. The lock is
/// held only to copy bytes in or out.
#[derive(Clone, Debug)]
pub(crate) struct SharedOutput(Arc<(Mutex<OutputBuffer>, Notify)>);

impl SharedOutput {
    pub(crate) fn new(cap_bytes: usize) -> SharedOutput {
        SharedOutput(Arc::new((
            Mutex::new(OutputBuffer::new(cap_bytes)),
            Notify::new(),
        )))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, OutputBuffer> {
        // A panic while copying bytes leaves the buffer usable (each push is self-contained).
        self.0
            .0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Woken after each arrival (register with `enable` before checking the buffer).
    pub(crate) fn arrivals(&self) -> &Notify {
        &self.0.1
    }
}

/// Where a shell's stdin comes from.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stdin {
    Null,
    /// A pipe whose writing end [`ShellProcess::take_stdin`] hands out.
    Pipe,
}

/// How the shell ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// `None` only if waiting for the child failed.
    pub status: Option<ExitStatus>,
    /// Why the status is unknown, when the session's sandbox died under the command.
    pub lost: Option<String>,
    /// The directory the command left the shell in, when it was reported.
    pub cwd: Option<PathBuf>,
    /// The spill writer given to `spawn`, with everything the reader task saw.
    pub spill: Option<SpillWriter>,
}

pub(crate) struct ShellProcess {
    leader: Leader,
    pid: u32,
    pgid: libc::pid_t,
    reader: JoinHandle<Option<SpillWriter>>,
    /// Tells the reader task to stop listening (a process that left the group holds the pipe).
    stop_reading: CancellationToken,
    cwd_report: Option<pipe::Receiver>,
    stdin: Option<pipe::Sender>,
    guard: GroupGuard,
}

/// The argument list of the shell: `bash -c` on the command, in the wrapper when the final
/// directory is reported.
fn bash_arguments(command: &str, report_cwd: bool) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec!["bash".into(), "-c".into()];
    if report_cwd {
        argv.extend([WRAPPER.into(), "bash".into()]);
    }
    argv.push(command.into());
    argv
}

/// Takes the daemon's `TOOLD_*` variables and `CDPATH` out of a child's environment (the
/// spawner's; [`DirectChild`] builds its environment the same way).
pub(crate) fn clean_environment(command: &mut Command) {
    for (key, _) in std::env::vars_os() {
        if key.to_string_lossy().starts_with("TOOLD_") {
            command.env_remove(key);
        }
    }
    command.env_remove("CDPATH");
    // A context the daemon itself was started with is not a call's: each command gets its
    // own, or none.
    command.env_remove(trace::TRACEPARENT_ENV);
    command.env_remove(trace::TRACESTATE_ENV);
}

/// The `process` span of a shell's start (DESIGN §9) on `backend`; `spare`: the shell was the
/// session's spare, started ahead and handed its command. The pid is recorded once known.
pub(crate) fn process_span(backend: &str, spare: bool) -> tracing::Span {
    trace::child(tracing::info_span!(
        target: trace::TARGET,
        "process",
        otel.name = %format_args!("process spawn {backend}"),
        toold.sandbox.backend = backend,
        toold.shell.spare = spare,
        process.pid = tracing::field::Empty,
        otel.status_description = tracing::field::Empty,
    ))
}

impl ShellProcess {
    /// Starts `bash -c` on `command` in `cwd`. With `report_cwd` the command runs in the
    /// wrapper that reports its final directory. The output goes to `output` and, when
    /// given, to `spill` (returned in [`Ended`]). `confinement` says who starts it.
    pub(crate) async fn spawn(
        command: &str,
        cwd: &Path,
        output: SharedOutput,
        spill: Option<SpillWriter>,
        report_cwd: bool,
        confinement: &Confinement,
        stdin: Stdin,
    ) -> io::Result<ShellProcess> {
        let (out_read, out_write) = io::pipe()?;
        let err_write = out_write.try_clone()?;
        let report = if report_cwd { Some(io::pipe()?) } else { None };
        let (stdin_read, stdin_write) = match stdin {
            Stdin::Null => (std::fs::File::open("/dev/null")?.into(), None),
            Stdin::Pipe => {
                let (read, write) = io::pipe()?;
                (OwnedFd::from(read), Some(write))
            }
        };
        let argv = bash_arguments(command, report_cwd);
        let (report_read, report_write) = match report {
            Some((read, write)) => (Some(read), vec![OwnedFd::from(write)]),
            None => (None, Vec::new()),
        };
        let stdio = [stdin_read, out_write.into(), err_write.into()];
        // Timed for `toold_sandbox_spawn_seconds`, failed spawns too: for a spawner, the request
        // until the command is about to exec.
        let started = std::time::Instant::now();
        let backend = confinement.kind().as_str();
        let span = process_span(backend, false);
        let leader = async {
            // Read inside the span: the shell's context names it.
            let env = trace::current()
                .map(|context| context.environment())
                .unwrap_or_default();
            match confinement {
                Confinement::Spawner(spawner) => spawner
                    .run(cwd, argv, stdio, report_write, &env)
                    .await
                    .map(Leader::Spawned),
                Confinement::None => {
                    DirectChild::spawn(cwd, &argv, stdio, report_write, &env).map(Leader::Direct)
                }
            }
        }
        .instrument(span.clone())
        .await;
        crate::telemetry::record_sandbox_spawn(backend, started.elapsed());
        if let Err(err) = &leader {
            span.record("otel.status_description", err.to_string().as_str());
        }
        let leader = leader?;
        span.record("process.pid", leader.pid());
        ShellProcess::assemble(leader, out_read, report_read, stdin_write, output, spill)
    }

    /// A `ShellProcess` around `leader`, which already runs (started here or a spare handed
    /// its command): `out` is the reading end of its stdout and stderr, `report` of its
    /// descriptor 3, `stdin` the writing end of its stdin pipe. Its group is killed if this
    /// fails.
    pub(crate) fn assemble(
        leader: Leader,
        out: io::PipeReader,
        report: Option<io::PipeReader>,
        stdin: Option<io::PipeWriter>,
        output: SharedOutput,
        spill: Option<SpillWriter>,
    ) -> io::Result<ShellProcess> {
        let pgid = leader.pid();
        let guard = GroupGuard { pgid, armed: true };
        let pid = u32::try_from(pgid).map_err(io::Error::other)?;
        let cwd_report = report
            .map(|read| pipe::Receiver::from_owned_fd(OwnedFd::from(read)))
            .transpose()?;
        let stdin = stdin
            .map(|write| pipe::Sender::from_owned_fd(OwnedFd::from(write)))
            .transpose()?;
        let receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(out))?;
        let stop_reading = CancellationToken::new();
        let reader = tokio::spawn(pump(receiver, output, spill, stop_reading.clone()));
        Ok(ShellProcess {
            leader,
            pid,
            pgid,
            reader,
            stop_reading,
            cwd_report,
            stdin,
            guard,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The writing end of the shell's stdin, when it was started with [`Stdin::Pipe`].
    pub(crate) fn take_stdin(&mut self) -> Option<pipe::Sender> {
        self.stdin.take()
    }

    /// Waits until the shell exits or `stop` completes, whichever is first; either way the
    /// process group is gone afterwards and the output drained. Returns `stop`'s value if it
    /// was the reason.
    pub(crate) async fn wait_or_stop<R>(
        mut self,
        stop: impl Future<Output = R>,
    ) -> (Option<R>, Ended) {
        let reason = tokio::select! {
            _ = self.leader.wait() => None,
            reason = stop => Some(reason),
        };
        terminate_group(self.pgid, &mut self.leader).await;
        let (status, lost) = match self.leader.wait().await {
            Ok(status) => (Some(status), None),
            Err(err) => (None, Some(err.to_string())),
        };
        self.guard.armed = false;
        let spill = match tokio::time::timeout(DRAIN_WAIT, &mut self.reader).await {
            Ok(done) => done.ok().flatten(),
            Err(_) => {
                // A process that escaped the group still holds the pipe; stop listening to it.
                // The reader stops at its next read and hands back the spill it wrote.
                self.stop_reading.cancel();
                (&mut self.reader).await.ok().flatten()
            }
        };
        let cwd = match (&reason, self.cwd_report.take()) {
            (None, Some(report)) => read_report(report).await,
            _ => None,
        };
        let ended = Ended {
            status,
            lost,
            cwd,
            spill,
        };
        (reason, ended)
    }
}

/// Copies the pipe into the buffer (and the spill) until EOF or `stop`.
async fn pump(
    mut receiver: pipe::Receiver,
    output: SharedOutput,
    mut spill: Option<SpillWriter>,
    stop: CancellationToken,
) -> Option<SpillWriter> {
    let mut chunk = vec![0_u8; 64 * 1024];
    loop {
        let read = tokio::select! {
            // Checked first: output that never ends must not keep the reader going.
            biased;
            () = stop.cancelled() => break,
            read = receiver.read(&mut chunk) => read,
        };
        match read {
            Ok(0) => break,
            Ok(read) => {
                output.lock().push(&chunk[..read]);
                output.arrivals().notify_waiters();
                if let Some(spill) = &mut spill {
                    spill.write(&chunk[..read]).await;
                }
            }
            Err(err) if err.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => break,
        }
    }
    spill
}

/// The directory the wrapper reported: `pwd -P` output ending in a newline.
async fn read_report(mut report: pipe::Receiver) -> Option<PathBuf> {
    let mut bytes = Vec::new();
    tokio::time::timeout(DRAIN_WAIT, report.read_to_end(&mut bytes))
        .await
        .ok()?
        .ok()?;
    let path = bytes.strip_suffix(b"\n")?;
    if path.first() != Some(&b'/') {
        return None;
    }
    Some(PathBuf::from(std::ffi::OsString::from_vec(path.to_vec())))
}
