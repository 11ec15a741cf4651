//! `BackgroundShells`: commands started with `run_in_background`, per session, shared by
//! `bash`, `bash_output` and `kill_shell`.
//!
//! Each task is a [`ShellProcess`] watched by a supervisor task that records how it ended.
//! Tasks are keyed by session id and task id: another session's task id is an unknown task.
//! A task stays listed after it exits, so its last output and status can still be read, until
//! `kill_shell` removes it, the session closes ([`BackgroundShells::kill_session`]) or room is
//! needed for a new one (the oldest finished task goes first). When a session's state is
//! dropped without `kill_session`, its tasks are stopped within [`SESSION_CHECK`] anyway.
//! Background tasks have no timeout and do not move the session's working directory.
//!
//! Each task's stdin is a pipe: [`BackgroundShells::write_stdin`] writes to it, so an agent
//! can answer a prompt or drive a REPL. A read may wait ([`BackgroundShells::read_waiting`]):
//! it returns as soon as output arrives or the task ends, or at its deadline.
//!
//! This is also where a session's sandbox lives ([`SpawnerSet`], the session's spawner,
//! started by its first sandboxed call) and its spare shell ([`SpareSet`]): closing the
//! session ([`BackgroundShells::kill_session`]) ends them with the tasks.

use std::collections::{BTreeMap, HashMap};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::io::AsyncWriteExt;
use tokio::net::unix::pipe;
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use super::limits::{SessionSlots, ShellLimits};
use super::output::{BACKGROUND_CAP_BYTES, TakenOutput};
use super::process::{SharedOutput, ShellProcess, Stdin};
use super::sandbox::spawner::SpawnerSet;
use super::sandbox::{Confinement, ShellSandbox};
use super::spare::SpareSet;
use super::spill::SpillSettings;
use crate::tool::{PermissionLevel, SessionView, ToolError};

/// Tasks a session may hold at once (running or finished and unread).
pub const MAX_TASKS_PER_SESSION: usize = 32;
/// How often a supervisor checks that its session still exists.
const SESSION_CHECK: Duration = Duration::from_secs(2);

/// Where a background task stands.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskStatus {
    Running,
    Exited {
        code: Option<i32>,
        signal: Option<i32>,
    },
    /// Stopped by `kill_shell` or because its session closed.
    Killed,
}

impl TaskStatus {
    pub(crate) fn describe(self) -> String {
        match self {
            TaskStatus::Running => "running".to_owned(),
            TaskStatus::Exited {
                code: Some(code), ..
            } => format!("exited with code {code}"),
            TaskStatus::Exited {
                signal: Some(signal),
                ..
            } => format!("killed by signal {signal}"),
            TaskStatus::Exited { .. } => "exited".to_owned(),
            TaskStatus::Killed => "killed".to_owned(),
        }
    }

    pub(crate) fn exit_code(self) -> Option<i32> {
        match self {
            TaskStatus::Exited { code, .. } => code,
            _ => None,
        }
    }
}

struct BackgroundTask {
    command: String,
    pid: u32,
    output: SharedOutput,
    status: watch::Receiver<TaskStatus>,
    kill: CancellationToken,
    /// The writing end of the task's stdin; `None` once it broke.
    stdin: tokio::sync::Mutex<Option<pipe::Sender>>,
    /// Whether it runs in the session's sandbox.
    confined: bool,
}

impl BackgroundTask {
    fn status(&self) -> TaskStatus {
        *self.status.borrow()
    }

    /// Stops the task (if running) and waits until its process group is gone.
    async fn stop(&self) {
        self.kill.cancel();
        let mut status = self.status.clone();
        // An error means the supervisor is gone, which only happens after it recorded an end.
        let _ = status.wait_for(|s| *s != TaskStatus::Running).await;
    }
}

/// What a read or a kill hands back.
#[derive(Debug)]
pub(crate) struct TaskReport {
    pub task_id: String,
    pub command: String,
    pub status: TaskStatus,
    pub output: TakenOutput,
}

/// Background shell tasks of every session. Create one per daemon (per registry) and hand it
/// to the tools with [`BackgroundShells::tools`].
#[derive(Default)]
pub struct BackgroundShells {
    sessions: Mutex<HashMap<String, BTreeMap<u64, Arc<BackgroundTask>>>>,
    next_id: AtomicU64,
    /// Where `bash` puts foreground output too large for memory (shared here because this
    /// is what the three shell tools share).
    spill: SpillSettings,
    /// The sandbox every shell (foreground and background) runs in.
    sandbox: ShellSandbox,
    /// Each session's sandbox (its spawner).
    spawners: SpawnerSet,
    /// Each session's next foreground shell, started ahead.
    spares: Arc<SpareSet>,
    /// `[limits]` per session: shells running at once (`limits`).
    slots: SessionSlots,
}

impl std::fmt::Debug for BackgroundShells {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("BackgroundShells")
            .field("sessions", &self.lock().len())
            .finish()
    }
}

pub(crate) fn task_name(id: u64) -> String {
    format!("bash_{id}")
}

impl BackgroundShells {
    /// No tasks, and foreground output spilled as `spill` says (the daemon points
    /// `spill.directory` into its data directory).
    pub fn with_spill_settings(spill: SpillSettings) -> BackgroundShells {
        BackgroundShells {
            spill,
            ..BackgroundShells::default()
        }
    }

    /// No tasks; foreground output spilled as `spill` says, every shell run in `sandbox`.
    pub fn with_settings(spill: SpillSettings, sandbox: ShellSandbox) -> BackgroundShells {
        BackgroundShells {
            spill,
            sandbox,
            ..BackgroundShells::default()
        }
    }

    /// Enforces `limits` on every session's shells (see `limits`).
    pub fn with_limits(mut self, limits: ShellLimits) -> BackgroundShells {
        self.slots = SessionSlots::new(limits);
        self
    }

    /// A slot for a foreground `bash` call of `session_id` (`shell_calls_per_session`),
    /// waited for; held until dropped. `None` without that limit.
    pub(crate) async fn foreground_slot(
        &self,
        session_id: &str,
        cancellation: &CancellationToken,
    ) -> Result<Option<tokio::sync::OwnedSemaphorePermit>, ToolError> {
        self.slots.foreground(session_id, cancellation).await
    }

    pub(crate) fn spill_settings(&self) -> &SpillSettings {
        &self.spill
    }

    pub fn sandbox(&self) -> &ShellSandbox {
        &self.sandbox
    }

    fn lock(&self) -> MutexGuard<'_, HashMap<String, BTreeMap<u64, Arc<BackgroundTask>>>> {
        // Every change under this lock is a single insert or remove; a panic cannot leave it
        // half-done.
        self.sessions
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }

    /// Stops every background task of a session and forgets them; returns how many there
    /// were. The session-close path calls this; it returns once every process group is gone.
    pub async fn kill_session(&self, session_id: &str) -> usize {
        let tasks = self.lock().remove(session_id).unwrap_or_default();
        let count = tasks.len();
        futures::future::join_all(tasks.values().map(|task| task.stop())).await;
        self.spares.discard(session_id).await;
        self.spawners.shut_down(session_id).await;
        self.slots.forget(session_id);
        // The session's sandbox temporary directory (Landlock's TMPDIR) goes with it; it
        // usually does not exist.
        let _ = tokio::fs::remove_dir_all(self.sandbox.session_temp_dir(session_id)).await;
        count
    }

    /// The session's spare shells (see [`super::spare`]).
    pub(crate) fn spares(&self) -> &Arc<SpareSet> {
        &self.spares
    }

    /// The pid of the session's spare shell, once one is ready.
    pub fn spare_pid(&self, session_id: &str) -> Option<u32> {
        self.spares.pid(session_id)
    }

    /// How many tasks a session holds (running or finished).
    pub fn task_count(&self, session_id: &str) -> usize {
        self.lock().get(session_id).map_or(0, BTreeMap::len)
    }

    /// How a shell of `session` authorised at `authorized` is confined: by the session's
    /// spawner (started now if it has none) or not at all.
    pub(crate) fn confine(
        &self,
        session: &Arc<dyn SessionView>,
        authorized: PermissionLevel,
    ) -> Result<Confinement, ToolError> {
        self.sandbox.confine(
            &self.spawners,
            (session.id(), Some(Arc::downgrade(session))),
            session.working_directory(),
            authorized,
            session.network_requested(),
            session.environment(),
        )
    }

    /// Starts `command` in `cwd` for `session`, confined as `confinement` says; returns the
    /// task id and the shell's pid.
    pub(crate) async fn start(
        self: &Arc<Self>,
        session: &Arc<dyn SessionView>,
        command: &str,
        cwd: &Path,
        confinement: &Confinement,
    ) -> Result<(String, u32), ToolError> {
        self.make_room(session.id())?;
        // Held by the task's supervisor while the shell runs (`background_shells_per_session`).
        let slot = self.slots.background(session.id())?;
        let output = SharedOutput::new(BACKGROUND_CAP_BYTES);
        let mut process = ShellProcess::spawn(
            command,
            cwd,
            output.clone(),
            None,
            false,
            confinement,
            Stdin::Pipe,
        )
        .await
        .map_err(|err| {
            ToolError::Execution(format!(
                "could not start bash in \"{}\": {err}",
                cwd.display()
            ))
        })?;
        let stdin = process.take_stdin();
        let id = self.next_id.fetch_add(1, Ordering::Relaxed) + 1;
        let pid = process.pid();
        let (status_tx, status_rx) = watch::channel(TaskStatus::Running);
        let kill = CancellationToken::new();
        let task = Arc::new(BackgroundTask {
            command: command.to_owned(),
            pid,
            output,
            status: status_rx,
            kill: kill.clone(),
            stdin: tokio::sync::Mutex::new(stdin),
            confined: matches!(confinement, Confinement::Spawner(_)),
        });
        self.lock()
            .entry(session.id().to_owned())
            .or_default()
            .insert(id, task);
        tokio::spawn(supervise(
            process,
            status_tx,
            kill,
            Arc::downgrade(session),
            Arc::downgrade(self),
            session.id().to_owned(),
            slot,
        ));
        Ok((task_name(id), pid))
    }

    /// Drops the oldest finished task when the session is at its limit.
    fn make_room(&self, session_id: &str) -> Result<(), ToolError> {
        let mut sessions = self.lock();
        let Some(tasks) = sessions.get_mut(session_id) else {
            return Ok(());
        };
        if tasks.len() < MAX_TASKS_PER_SESSION {
            return Ok(());
        }
        let finished = tasks
            .iter()
            .find(|(_, task)| task.status() != TaskStatus::Running)
            .map(|(id, _)| *id);
        match finished {
            Some(id) => {
                tasks.remove(&id);
                Ok(())
            }
            None => Err(ToolError::Execution(format!(
                "this session already runs {MAX_TASKS_PER_SESSION} background tasks; stop one with kill_shell first"
            ))),
        }
    }

    fn find(
        &self,
        session_id: &str,
        task_id: &str,
    ) -> Result<(u64, Arc<BackgroundTask>), ToolError> {
        let sessions = self.lock();
        let tasks = sessions.get(session_id);
        let found = task_id
            .strip_prefix("bash_")
            .and_then(|n| n.parse::<u64>().ok())
            .and_then(|id| {
                tasks
                    .and_then(|t| t.get(&id))
                    .map(|task| (id, task.clone()))
            });
        found.ok_or_else(|| {
            let known: Vec<String> = tasks
                .map(|t| t.keys().map(|id| task_name(*id)).collect())
                .unwrap_or_default();
            let listing = if known.is_empty() {
                "this session has no background tasks".to_owned()
            } else {
                format!("this session's tasks: {}", known.join(", "))
            };
            ToolError::Validation(format!("unknown task \"{task_id}\"; {listing}"))
        })
    }

    /// The output since the last read, and the status.
    pub(crate) fn read(&self, session_id: &str, task_id: &str) -> Result<TaskReport, ToolError> {
        let (id, task) = self.find(session_id, task_id)?;
        // Status first: once it says ended, all output is already in the buffer.
        let status = task.status();
        let output = task.output.lock().take(status == TaskStatus::Running);
        Ok(TaskReport {
            task_id: task_name(id),
            command: task.command.clone(),
            status,
            output,
        })
    }

    /// [`BackgroundShells::read`], after waiting up to `wait` for output to arrive (or the
    /// task to end) when there is none yet.
    pub(crate) async fn read_waiting(
        &self,
        session_id: &str,
        task_id: &str,
        wait: Duration,
    ) -> Result<TaskReport, ToolError> {
        let (_, task) = self.find(session_id, task_id)?;
        let deadline = tokio::time::Instant::now() + wait;
        let mut status = task.status.clone();
        while !wait.is_zero() {
            let arrived = task.output.arrivals().notified();
            tokio::pin!(arrived);
            // Registered before the check, so an arrival between the two is not missed.
            arrived.as_mut().enable();
            if task.output.lock().has_unread() || task.status() != TaskStatus::Running {
                break;
            }
            tokio::select! {
                () = &mut arrived => {}
                _ = status.changed() => {}
                () = tokio::time::sleep_until(deadline) => break,
            }
        }
        self.read(session_id, task_id)
    }

    /// What writing to a task's stdin needs: input can make a program do anything it can
    /// (`sed -f -` writes files, a REPL runs code), so `workspace_write` for a task in the
    /// session's sandbox, which confines it to the workspace, and `danger_full_access` for
    /// one that runs unconfined (or is unknown: fail closed).
    pub(crate) fn input_permission(&self, session_id: &str, task_id: &str) -> PermissionLevel {
        match self.find(session_id, task_id) {
            Ok((_, task)) if task.confined => PermissionLevel::WorkspaceWrite,
            _ => PermissionLevel::DangerFullAccess,
        }
    }

    /// Writes `input` to a running task's stdin; returns the task's id.
    pub(crate) async fn write_stdin(
        &self,
        session_id: &str,
        task_id: &str,
        input: &[u8],
    ) -> Result<String, ToolError> {
        let (id, task) = self.find(session_id, task_id)?;
        if task.status() != TaskStatus::Running {
            return Err(ToolError::Execution(format!(
                "task \"{task_id}\" has {}; its stdin takes no more input",
                task.status().describe()
            )));
        }
        let mut stdin = task.stdin.lock().await;
        let pipe = stdin.as_mut().ok_or_else(|| {
            ToolError::Execution(format!(
                "task \"{task_id}\" closed its stdin; it reads no more input"
            ))
        })?;
        if let Err(err) = pipe.write_all(input).await {
            *stdin = None;
            return Err(ToolError::Execution(format!(
                "task \"{task_id}\" does not read its stdin any more: {err}"
            )));
        }
        Ok(task_name(id))
    }

    /// Stops a task, removes it, and hands back its unread output and how it ended.
    pub(crate) async fn kill(
        &self,
        session_id: &str,
        task_id: &str,
    ) -> Result<TaskReport, ToolError> {
        let (id, task) = self.find(session_id, task_id)?;
        task.stop().await;
        if let Some(tasks) = self.lock().get_mut(session_id) {
            tasks.remove(&id);
        }
        let output = task.output.lock().take(false);
        Ok(TaskReport {
            task_id: task_name(id),
            command: task.command.clone(),
            status: task.status(),
            output,
        })
    }

    /// The pid of a task's shell (the process group id), for tests and diagnostics.
    pub fn task_pid(&self, session_id: &str, task_id: &str) -> Option<u32> {
        self.find(session_id, task_id)
            .ok()
            .map(|(_, task)| task.pid)
    }
}

/// Waits for the task to exit, be killed, or lose its session, and records the end.
async fn supervise(
    process: ShellProcess,
    status: watch::Sender<TaskStatus>,
    kill: CancellationToken,
    session: Weak<dyn SessionView>,
    shells: Weak<BackgroundShells>,
    session_id: String,
    slot: Option<tokio::sync::OwnedSemaphorePermit>,
) {
    let session_gone = async {
        while session.strong_count() > 0 {
            tokio::time::sleep(SESSION_CHECK).await;
        }
    };
    let stop = async {
        tokio::select! {
            () = kill.cancelled() => false,
            () = session_gone => true,
        }
    };
    let (reason, ended) = process.wait_or_stop(stop).await;
    let end = match reason {
        None => TaskStatus::Exited {
            code: ended.status.and_then(|s| s.code()),
            signal: ended.status.and_then(|s| s.signal()),
        },
        Some(_) => TaskStatus::Killed,
    };
    // Its slot is free once it no longer runs, before anyone can read that it ended.
    drop(slot);
    status.send_replace(end);
    if reason == Some(true)
        && let Some(shells) = shells.upgrade()
    {
        shells.lock().remove(&session_id);
    }
}
