//! One sandbox per session: the daemon's side of a session's spawner ([`server`]).
//!
//! A session's first sandboxed shell call starts one long-lived process in the session's
//! sandbox (`bwrap … toold sandbox-spawner`, or `toold sandbox-spawner` with the Landlock
//! ruleset applied once), in a session of its own, dying with the daemon
//! (`PR_SET_PDEATHSIG`), joined to the session's cgroup when there is one. Every later
//! sandboxed call of that session, background shells included, is one request on its control
//! socket: the spawner forks and execs the command, so a call costs a fork and an exec rather
//! than new namespaces and mounts. The command's pid comes back as the kernel gives it to this
//! side (its credentials on the reply socket, in the daemon's pid namespace), so stopping a
//! process group works as for a shell the daemon started itself.
//! In a gVisor sandbox ([`super::gvisor`]) the spawner is only the sandbox's init, its control
//! socket on stdin the sandbox's lifeline: descriptors do not cross into gVisor, so each command
//! is a `runsc exec` the daemon starts itself ([`SessionSpawner::run`] does that there).
//!
//! Sessions never share a spawner ([`SpawnerSet`] keys them by session id). It ends with the
//! session ([`SpawnerSet::shut_down`], called where background shells are stopped) and with the
//! daemon. If it dies, the call in flight gets an error saying so, and the next call starts a
//! new one. Its stderr (where bubblewrap, and the spawner itself, say why they failed) is read
//! line by line into the daemon's log at `warn`, and its last lines are kept
//! ([`SpawnerStderr`]) for the error of a call it could not start: a sandbox that cannot start
//! its spawner must say why, not only that it ended. Deliberately absent: choosing the sandbox
//! (that is [`super::ShellSandbox`]).

pub(crate) mod server;

use std::collections::HashMap;
use std::ffi::OsString;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::process::ExitStatusExt;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard, Weak};
use std::time::Duration;

use tokio::io::Interest;
use tokio::io::unix::AsyncFd;
use tokio::process::{Child, Command};
use tokio::sync::watch;

use super::SandboxKind;
use super::limits::{CgroupLimits, ChildLimits, Exhaustion, SessionCgroup};
use super::wire::{self, REPLY_EXITED, REPLY_STARTED, Request};
use crate::tool::SessionView;

/// The descriptor the spawner finds its control socket on.
const CONTROL_FD: RawFd = 3;
/// How long closing a session waits for its spawner to go.
const SHUTDOWN_WAIT: Duration = Duration::from_secs(2);
/// How much of a spawner's stderr is kept for errors (its last bytes).
const STDERR_KEPT: usize = 2048;
/// How long a failed call waits for a dying spawner's last words on stderr.
const STDERR_WAIT: Duration = Duration::from_millis(500);

/// How to start a session's spawner, prepared by [`super::ShellSandbox`].
#[derive(Debug)]
pub(crate) struct SpawnerPlan {
    pub kind: SandboxKind,
    /// `bwrap` (its arguments in `args`, ending with `--` and the toold binary) or toold.
    pub program: OsString,
    pub args: Vec<OsString>,
    /// More flags of `toold sandbox-spawner` (an environment's Landlock tier: `--chroot …`).
    pub spawner_args: Vec<OsString>,
    /// Applied once, to the spawner, between fork and exec.
    pub landlock: Option<OwnedFd>,
    pub env: Vec<(OsString, OsString)>,
    pub cgroup: Option<SessionCgroup>,
    pub limits: ChildLimits,
    /// What the cgroup (if any) limits, for naming a limit a call met.
    pub cgroup_limits: CgroupLimits,
    /// `cgroup v2`, `cgroup v1` or `rlimits`: the result's `limits` metadata.
    pub limits_name: &'static str,
    /// The session's environment: commands' directories are its paths, `bash` is its shell,
    /// its variables are set (DESIGN §12).
    pub environment: Option<crate::tool::EnvironmentView>,
    /// The session's gVisor sandbox: `runsc run` is `program`, the spawner's command line is
    /// in its bundle, its control socket is its stdin, and commands are `runsc exec`.
    pub gvisor: Option<super::gvisor::GvisorSandbox>,
}

/// A running spawner of one session.
#[derive(Debug)]
pub(crate) struct SessionSpawner {
    kind: SandboxKind,
    limits_name: &'static str,
    /// `None` once shut down.
    control: Mutex<Option<OwnedFd>>,
    process: Mutex<Child>,
    stderr: Arc<SpawnerStderr>,
    cgroup: Option<SessionCgroup>,
    cgroup_limits: CgroupLimits,
    environment: Option<crate::tool::EnvironmentView>,
    gvisor: Option<super::gvisor::GvisorSandbox>,
}

/// The last [`STDERR_KEPT`] bytes a spawner wrote to stderr, and whether it closed it.
#[derive(Debug)]
struct SpawnerStderr {
    text: Mutex<String>,
    closed: watch::Sender<bool>,
}

impl SpawnerStderr {
    /// Reads `pipe` to its end in a task: each line to the log, the tail kept.
    fn read(pipe: tokio::process::ChildStderr, session_id: &str) -> Arc<SpawnerStderr> {
        use tokio::io::AsyncBufReadExt;
        let stderr = Arc::new(SpawnerStderr {
            text: Mutex::new(String::new()),
            closed: watch::Sender::new(false),
        });
        let keep = stderr.clone();
        let session = session_id.to_owned();
        tokio::spawn(async move {
            let mut lines = tokio::io::BufReader::new(pipe).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                tracing::warn!(session = %session, "sandbox spawner: {line}");
                let mut text = locked(&keep.text);
                if !text.is_empty() {
                    text.push_str("; ");
                }
                text.push_str(line.trim());
                if text.len() > STDERR_KEPT {
                    let mut cut = text.len() - STDERR_KEPT;
                    while !text.is_char_boundary(cut) {
                        cut += 1;
                    }
                    text.drain(..cut);
                }
            }
            keep.closed.send_replace(true);
        });
        stderr
    }

    /// What was written, once the pipe closed or [`STDERR_WAIT`] passed.
    async fn last_words(&self) -> String {
        let mut closed = self.closed.subscribe();
        let _ = tokio::time::timeout(STDERR_WAIT, closed.wait_for(|closed| *closed)).await;
        locked(&self.text).clone()
    }
}

fn locked<T>(mutex: &Mutex<T>) -> MutexGuard<'_, T> {
    // Each critical section is a single call; a panic cannot leave the value half-changed.
    mutex
        .lock()
        .unwrap_or_else(|poisoned| poisoned.into_inner())
}

impl SessionSpawner {
    /// Starts the spawner for `session_id` as `plan` says.
    pub(crate) fn start(plan: SpawnerPlan, session_id: &str) -> io::Result<SessionSpawner> {
        let (ours, theirs) = wire::seqpacket_pair()?;
        let mut command = Command::new(&plan.program);
        command.args(&plan.args);
        // Under gVisor the spawner's command line is in the bundle and only stdio crosses.
        let control_fd = if plan.gvisor.is_some() {
            0
        } else {
            command
                .args(["sandbox-spawner", "--control-fd", "3", "--limits"])
                .arg(plan.limits.to_arg())
                .args(["--session", session_id])
                .args(&plan.spawner_args);
            CONTROL_FD
        };
        command
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        super::super::process::clean_environment(&mut command);
        for (key, value) in &plan.env {
            command.env(key, value);
        }
        let theirs_fd = theirs.as_raw_fd();
        let landlock = plan.landlock.as_ref().map(AsRawFd::as_raw_fd);
        let procs = plan
            .cgroup
            .as_ref()
            .map(SessionCgroup::procs_fds)
            .unwrap_or_default();
        let daemon = std::process::id() as libc::pid_t;
        // SAFETY: only async-signal-safe system calls on integers prepared above (setsid,
        // prctl, getppid, write, landlock_restrict_self, dup2, fcntl); no allocation, no locks.
        unsafe {
            command
                .pre_exec(move || spawner_setup(daemon, (theirs_fd, control_fd), landlock, &procs));
        }
        let mut process = command.spawn()?;
        drop(command);
        drop(theirs);
        wire::set_nonblocking(ours.as_raw_fd(), true)?;
        let stderr = match process.stderr.take() {
            Some(pipe) => SpawnerStderr::read(pipe, session_id),
            // Piped above, so always there; an empty record otherwise.
            None => Arc::new(SpawnerStderr {
                text: Mutex::new(String::new()),
                closed: watch::Sender::new(true),
            }),
        };
        Ok(SessionSpawner {
            kind: plan.kind,
            limits_name: plan.limits_name,
            control: Mutex::new(Some(ours)),
            process: Mutex::new(process),
            stderr,
            cgroup: plan.cgroup,
            cgroup_limits: plan.cgroup_limits,
            environment: plan.environment,
            gvisor: plan.gvisor,
        })
    }

    /// The environment the spawner runs in, if any.
    pub(crate) fn environment(&self) -> Option<&crate::tool::EnvironmentView> {
        self.environment.as_ref()
    }

    pub(crate) fn kind(&self) -> SandboxKind {
        self.kind
    }

    pub(crate) fn limits_name(&self) -> &'static str {
        self.limits_name
    }

    /// The session cgroup's counters and what it limits (`None` without a cgroup).
    pub(crate) fn exhaustion(&self) -> Option<(Exhaustion, CgroupLimits)> {
        let cgroup = self.cgroup.as_ref()?;
        Some((cgroup.exhaustion(), self.cgroup_limits))
    }

    /// `gone(what)`, with what the spawner last wrote to stderr (bubblewrap's reason, say).
    async fn gone_saying(&self, what: &str) -> io::Error {
        let words = self.stderr.last_words().await;
        if words.is_empty() {
            return gone(what);
        }
        gone(&format!("{what} (its stderr: {words})"))
    }

    /// Whether the spawner still runs (and was not shut down).
    fn alive(&self) -> bool {
        locked(&self.control).is_some() && matches!(locked(&self.process).try_wait(), Ok(None))
    }

    /// Has the spawner start `argv` in `cwd` with `stdio` on 0–2 and `more` on 3 (the cwd
    /// report) and 4 (a spare's command pipe); returns once it runs.
    pub(crate) async fn run(
        &self,
        cwd: &Path,
        argv: Vec<OsString>,
        stdio: [OwnedFd; 3],
        more: Vec<OwnedFd>,
        env: &[(&str, String)],
    ) -> io::Result<SpawnedShell> {
        if more.len() > 2 {
            return Err(io::Error::other("at most two descriptors past stderr"));
        }
        let mut argv = argv;
        let mut variables: Vec<(OsString, OsString)> = Vec::new();
        let cwd = match &self.environment {
            Some(environment) => {
                if argv.first().is_some_and(|a| a == "bash") {
                    argv[0] = environment.shell.clone().into();
                }
                for entry in &environment.env {
                    let (name, value) = entry.split_once('=').unwrap_or((entry, ""));
                    variables.push((name.into(), value.into()));
                }
                environment.to_inside(cwd).ok_or_else(|| {
                    io::Error::other(format!(
                        "\"{}\" is not inside the session's environment",
                        cwd.display()
                    ))
                })?
            }
            None => cwd.to_owned(),
        };
        variables.extend(
            env.iter()
                .map(|(name, value)| (OsString::from(name), OsString::from(value))),
        );
        let request = Request {
            cwd,
            argv,
            report: !more.is_empty(),
            command: more.len() == 2,
            env: variables,
        };
        if let Some(gvisor) = &self.gvisor {
            if !self.alive() {
                return Err(self.gone_saying("is not running").await);
            }
            // Descriptors do not cross into gVisor: the cwd report goes through a file the
            // daemon copies into it (a spare's command pipe is never asked for here).
            let report = more.into_iter().next();
            return match gvisor
                .exec(&request.cwd, &request.argv, &request.env, stdio, report)
                .await
            {
                Err(err) if !self.alive() => Err(self.gone_saying(&err.to_string()).await),
                other => other,
            };
        }
        let (reply, reply_theirs) = wire::seqpacket_pair()?;
        wire::pass_credentials(reply.as_raw_fd())?;
        let mut fds = vec![reply_theirs.as_raw_fd()];
        fds.extend(stdio.iter().map(AsRawFd::as_raw_fd));
        fds.extend(more.iter().map(AsRawFd::as_raw_fd));
        let sent = {
            let control = locked(&self.control);
            let control = control.as_ref().ok_or_else(|| gone("was shut down"))?;
            wire::send_with_fds(control.as_raw_fd(), &request.encode(), &fds)
        };
        if let Err(err) = sent {
            return Err(self
                .gone_saying(&format!("does not take requests ({err})"))
                .await);
        }
        // The spawner holds its own copies now; ours must close so the pipes can end.
        drop((reply_theirs, stdio, more));
        wire::set_nonblocking(reply.as_raw_fd(), true)?;
        // SAFETY: `reply` is an open socket owned by the AsyncFd from here on.
        let reply = unsafe { AsyncFd::register_with_interest(reply, Interest::READABLE) }?;
        let mut buf = [0_u8; 256];
        let first = receive(&reply, &mut buf).await?;
        let message = &buf[..first.len];
        let pid = match (message.first(), first.pid) {
            (Some(&REPLY_STARTED), Some(pid)) => pid,
            (Some(b'E'), _) => {
                return Err(io::Error::other(format!(
                    "the session's sandbox could not start the command: {}",
                    String::from_utf8_lossy(&message[1..])
                )));
            }
            (Some(&REPLY_EXITED), _) => {
                return Err(io::Error::other(
                    "the command ended before it could exec (its descriptors could not be set up)",
                ));
            }
            _ => return Err(self.gone_saying("ended before the command started").await),
        };
        let (status_tx, status_rx) = watch::channel(None);
        tokio::spawn(async move {
            let mut buf = [0_u8; 64];
            let status = match receive(&reply, &mut buf).await {
                Ok(got) if got.len > 1 && buf[0] == REPLY_EXITED => std::str::from_utf8(&buf[1..got.len])
                    .ok()
                    .and_then(|s| s.parse::<i32>().ok())
                    .map(ExitStatus::from_raw)
                    .ok_or_else(|| "the spawner sent a malformed exit status".to_owned()),
                _ => Err("the session's sandbox (its spawner process) died while the command ran; the next call starts a new one".to_owned()),
            };
            status_tx.send_replace(Some(status));
        });
        Ok(SpawnedShell {
            pid,
            status: status_rx,
        })
    }

    /// Closes the control socket (the spawner then kills every command's group and exits)
    /// and waits up to [`SHUTDOWN_WAIT`] for it to go.
    pub(crate) async fn shut_down(&self) {
        drop(locked(&self.control).take());
        let deadline = tokio::time::Instant::now() + SHUTDOWN_WAIT;
        while matches!(locked(&self.process).try_wait(), Ok(None)) {
            if tokio::time::Instant::now() >= deadline {
                // SIGKILL then; under bubblewrap that takes the whole sandbox with it.
                let _ = locked(&self.process).start_kill();
                break;
            }
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
        if let Some(gvisor) = &self.gvisor {
            // `runsc run` ends with its sandbox; a killed one may leave it running.
            gvisor.remove().await;
        }
    }
}

impl Drop for SessionSpawner {
    fn drop(&mut self) {
        // Closing the control socket is the spawner's signal to stop everything and exit;
        // tokio reaps the process once it does.
        drop(locked(&self.control).take());
    }
}

fn gone(what: &str) -> io::Error {
    io::Error::other(format!(
        "the session's sandbox (its spawner process) {what}; the next call starts a new one"
    ))
}

async fn receive(socket: &AsyncFd<OwnedFd>, buf: &mut [u8]) -> io::Result<wire::Received> {
    loop {
        let mut ready = socket.readable().await?;
        match ready.try_io(|fd| wire::recv_with_fds(fd.as_raw_fd(), buf)) {
            Ok(result) => return result,
            Err(_would_block) => continue,
        }
    }
}

/// A command the spawner runs: its pid in the daemon's pid namespace (also its process group
/// id) and, once it ended, its wait status or why that is unknown.
#[derive(Debug)]
pub(crate) struct SpawnedShell {
    pub pid: libc::pid_t,
    status: watch::Receiver<Option<Result<ExitStatus, String>>>,
}

impl SpawnedShell {
    /// A command whose leader is `pid`, its end to come on `status`.
    pub(crate) fn new(
        pid: libc::pid_t,
        status: watch::Receiver<Option<Result<ExitStatus, String>>>,
    ) -> SpawnedShell {
        SpawnedShell { pid, status }
    }

    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        let status = self
            .status
            .wait_for(Option::is_some)
            .await
            .map_err(|_| gone("stopped answering"))?;
        status
            .clone()
            .unwrap_or_else(|| Err(String::new()))
            .map_err(io::Error::other)
    }

    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match &*self.status.borrow() {
            None => Ok(None),
            Some(Ok(status)) => Ok(Some(*status)),
            Some(Err(why)) => Err(io::Error::other(why.clone())),
        }
    }
}

/// In the spawner's process between fork and exec: a session of its own, SIGTERM at the
/// daemon's death, the session's cgroup, the Landlock ruleset, then the control socket on
/// [`CONTROL_FD`] (stdin under gVisor). The cgroup and the ruleset come before the `dup2`, which may reuse one of
/// their descriptor numbers.
///
/// The parent-death signal only covers a death after `prctl`: a daemon killed between the
/// fork and it left a child that would never be told (seen once: a bwrap outliving a
/// `kill -9`, blocked reading). So the child then checks that its parent is still `daemon`,
/// and gives up (the spawn fails) when it was re-parented already.
fn spawner_setup(
    daemon: libc::pid_t,
    (control, target): (RawFd, RawFd),
    landlock: Option<RawFd>,
    procs: &[RawFd],
) -> io::Result<()> {
    // SAFETY: plain system calls on integers.
    unsafe {
        if libc::setsid() == -1 {
            return Err(io::Error::last_os_error());
        }
        // SIGTERM, not SIGKILL: the spawner catches it and stops everything it started first.
        if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGTERM) != 0 {
            return Err(io::Error::last_os_error());
        }
        if libc::getppid() != daemon {
            return Err(io::Error::from_raw_os_error(libc::ESRCH));
        }
    }
    super::limits::join(procs)?;
    if let Some(ruleset) = landlock {
        super::landlock::restrict_self(ruleset)?;
    }
    // SAFETY: as above.
    unsafe {
        let result = if control == target {
            libc::fcntl(control, libc::F_SETFD, 0)
        } else {
            libc::dup2(control, target)
        };
        if result == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// The session a spawner serves, when known: once it is gone (dropped without being
/// closed), its spawner is too.
pub(crate) type Owner = Option<Weak<dyn SessionView>>;

/// The spawners of every session, at most one each.
#[derive(Debug, Default)]
pub(crate) struct SpawnerSet {
    sessions: Mutex<HashMap<String, (Owner, Arc<SessionSpawner>)>>,
}

impl SpawnerSet {
    /// The session's spawner, started (with `plan`) when it has none or its last one died.
    /// Spawners of sessions that are gone are dropped on the way (which ends them).
    pub(crate) fn get_or_start(
        &self,
        session_id: &str,
        owner: Owner,
        plan: impl FnOnce() -> io::Result<SpawnerPlan>,
    ) -> io::Result<Arc<SessionSpawner>> {
        let mut sessions = locked(&self.sessions);
        sessions.retain(|_, (owner, _)| owner.as_ref().is_none_or(|o| o.strong_count() > 0));
        if let Some((_, spawner)) = sessions.get(session_id)
            && spawner.alive()
        {
            return Ok(spawner.clone());
        }
        let spawner = Arc::new(SessionSpawner::start(plan()?, session_id)?);
        sessions.insert(session_id.to_owned(), (owner, spawner.clone()));
        Ok(spawner)
    }

    /// Ends the session's spawner, if it has one.
    pub(crate) async fn shut_down(&self, session_id: &str) {
        let spawner = locked(&self.sessions).remove(session_id);
        if let Some((_, spawner)) = spawner {
            spawner.shut_down().await;
        }
    }
}
