//! `ShellProcess`: one `bash -c` child in a process group of its own, its output captured, and
//! the whole group stopped when it must stop.
//!
//! The child gets a new session (`setsid`, so also a new process group whose id is its pid),
//! stdin from `/dev/null`, and stdout and stderr on one pipe, so the output is interleaved
//! exactly as the command wrote it, as a terminal would show it. A reader task moves the
//! output into an [`OutputBuffer`] as it arrives, and for a foreground command into a
//! [`SpillWriter`] too (which moves it to a file once it outgrows memory), so a chatty
//! command never blocks on a full pipe and a background task needs nobody polling it.
//!
//! A foreground command runs inside a small wrapper that `eval`s it and then prints the
//! shell's final directory (`pwd -P`) on descriptor 3, which is closed while the command runs,
//! so nothing the command prints can be mistaken for it; that is how a `cd` persists. A
//! command that ends the shell itself (`exit`, `set -e` tripping, `exec`) reports no
//! directory and the previous one stays.
//!
//! Stopping means the process group, never just the child: SIGTERM, up to [`KILL_GRACE`] for
//! it to go, then SIGKILL and up to [`KILL_WAIT`] until it is gone, so grandchildren
//! (`sleep 300 &`) go too and are gone when the stop returns. When the shell exits on its own,
//! whatever it left running in its group is stopped the same way: a foreground call leaves
//! nothing behind (`run_in_background` is for processes that should outlive a call).
//! Processes that left the group themselves (`setsid`, daemons) are out of reach. The daemon's
//! own environment variables named `TOOLD_*` (auth tokens, database URLs) are not passed on,
//! nor `CDPATH`, so that a relative `cd` goes where the workspace check resolved it.

use std::future::Future;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStringExt;
use std::path::{Path, PathBuf};
use std::process::{ExitStatus, Stdio};
use std::sync::{Arc, Mutex, MutexGuard};
use std::time::Duration;

use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::task::JoinHandle;

use tokio_util::sync::CancellationToken;

use super::output::OutputBuffer;
use super::sandbox::{self, Confinement};
use super::spill::SpillWriter;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long a group gets to vanish after SIGKILL. Only a process stuck in the kernel
/// (uninterruptible I/O) takes longer; the stop then returns without it.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(2);
/// How long to wait for the last output (and the cwd report) once the shell is gone.
const DRAIN_WAIT: Duration = Duration::from_millis(200);
/// How often a stopping group is checked.
const POLL: Duration = Duration::from_millis(10);
/// The descriptor the wrapper reports the final directory on.
const REPORT_FD: RawFd = 3;

/// Runs the command (`$1`) with descriptor 3 closed, then reports the directory on 3 and
/// exits with the command's status. `set --` hides the command text from `$1`.
const WRAPPER: &str = "__toold_command=$1\nset --\neval \"$__toold_command\" 3>&-\n__toold_status=$?\nbuiltin pwd -P 2>/dev/null >&3\nexit \"$__toold_status\"\n";

/// A shared, capped output buffer. The lock is held only to copy bytes in or out.
#[derive(Clone, Debug)]
pub(crate) struct SharedOutput(Arc<Mutex<OutputBuffer>>);

impl SharedOutput {
    pub(crate) fn new(cap_bytes: usize) -> SharedOutput {
        SharedOutput(Arc::new(Mutex::new(OutputBuffer::new(cap_bytes))))
    }

    pub(crate) fn lock(&self) -> MutexGuard<'_, OutputBuffer> {
        // A panic while copying bytes leaves the buffer usable (each push is self-contained).
        self.0
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
    }
}

/// How the shell ended.
#[derive(Debug)]
pub(crate) struct Ended {
    /// `None` only if waiting for the child failed.
    pub status: Option<ExitStatus>,
    /// The directory the command left the shell in, when it was reported.
    pub cwd: Option<PathBuf>,
    /// The spill writer given to `spawn`, with everything the reader task saw.
    pub spill: Option<SpillWriter>,
}

pub(crate) struct ShellProcess {
    child: Child,
    pid: u32,
    pgid: libc::pid_t,
    reader: JoinHandle<Option<SpillWriter>>,
    /// Tells the reader task to stop listening (a process that left the group holds the pipe).
    stop_reading: CancellationToken,
    cwd_report: Option<pipe::Receiver>,
    guard: GroupGuard,
}

impl ShellProcess {
    /// Starts `bash -c` on `command` in `cwd`. With `report_cwd` the command runs in the
    /// wrapper that reports its final directory. The output goes to `output` and, when
    /// given, to `spill` (returned in [`Ended`]). `confinement` says which sandbox wraps it.
    pub(crate) fn spawn(
        command: &str,
        cwd: &Path,
        output: SharedOutput,
        spill: Option<SpillWriter>,
        report_cwd: bool,
        confinement: &Confinement,
    ) -> io::Result<ShellProcess> {
        let (out_read, out_write) = io::pipe()?;
        let err_write = out_write.try_clone()?;
        let report = if report_cwd { Some(io::pipe()?) } else { None };
        let report_fd = report.as_ref().map(|(_, write)| write.as_raw_fd());

        let mut shell = match confinement {
            Confinement::Bubblewrap { program, args } => {
                let mut bwrap = Command::new(program);
                bwrap.args(args).arg("bash");
                bwrap
            }
            Confinement::Landlock { temp, .. } => {
                let mut bash = Command::new("bash");
                bash.env("TMPDIR", temp);
                bash
            }
            Confinement::None => Command::new("bash"),
        };
        let landlock_fd = confinement.landlock_fd();
        if report_cwd {
            shell.arg("-c").arg(WRAPPER).arg("bash").arg(command);
        } else {
            shell.arg("-c").arg(command);
        }
        shell
            .current_dir(cwd)
            .stdin(Stdio::null())
            .stdout(out_write)
            .stderr(err_write)
            .kill_on_drop(false);
        for (key, _) in std::env::vars_os() {
            if key.to_string_lossy().starts_with("TOOLD_") {
                shell.env_remove(key);
            }
        }
        shell.env_remove("CDPATH");
        // SAFETY: `child_setup` runs between fork and exec and only makes async-signal-safe
        // calls (setsid, prctl, landlock_restrict_self, dup2, fcntl); it allocates nothing and
        // takes no locks. The Landlock ruleset was built before the fork.
        unsafe {
            shell.pre_exec(move || child_setup(report_fd, landlock_fd));
        }
        let child =
            crate::telemetry::time_sandbox_spawn(confinement.kind().as_str(), || shell.spawn())?;
        // The parent's copies of the write ends must close, or the reads never see EOF.
        drop(shell);
        let cwd_report = match report {
            Some((read, write)) => {
                drop(write);
                Some(pipe::Receiver::from_owned_fd(OwnedFd::from(read))?)
            }
            None => None,
        };
        let pid = child
            .id()
            .ok_or_else(|| io::Error::other("the shell exited before its pid was known"))?;
        let pgid = libc::pid_t::try_from(pid).map_err(io::Error::other)?;
        let receiver = pipe::Receiver::from_owned_fd(OwnedFd::from(out_read))?;
        let stop_reading = CancellationToken::new();
        let reader = tokio::spawn(pump(receiver, output, spill, stop_reading.clone()));
        Ok(ShellProcess {
            child,
            pid,
            pgid,
            reader,
            stop_reading,
            cwd_report,
            guard: GroupGuard { pgid, armed: true },
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Waits until the shell exits or `stop` completes, whichever is first; either way the
    /// process group is gone afterwards and the output drained. Returns `stop`'s value if it
    /// was the reason.
    pub(crate) async fn wait_or_stop<R>(
        mut self,
        stop: impl Future<Output = R>,
    ) -> (Option<R>, Ended) {
        let reason = tokio::select! {
            _ = self.child.wait() => None,
            reason = stop => Some(reason),
        };
        terminate_group(self.pgid, &mut self.child).await;
        let status = self.child.wait().await.ok();
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
        (reason, Ended { status, cwd, spill })
    }
}

/// Kills the group if the future driving a process is dropped before it finished (the
/// dispatcher gave up on the call).
struct GroupGuard {
    pgid: libc::pid_t,
    armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

/// In the child, between fork and exec: a new session (and process group), the Landlock
/// ruleset when there is one (before the dup2, which may reuse its descriptor number), and
/// the report pipe on descriptor 3 without close-on-exec.
fn child_setup(report_fd: Option<RawFd>, landlock_fd: Option<RawFd>) -> io::Result<()> {
    // SAFETY: plain syscalls on integers; async-signal-safe.
    unsafe {
        if libc::setsid() == -1 {
            return Err(io::Error::last_os_error());
        }
    }
    if let Some(ruleset) = landlock_fd {
        sandbox::restrict_self(ruleset)?;
    }
    // SAFETY: as above.
    unsafe {
        if let Some(fd) = report_fd {
            let result = if fd == REPORT_FD {
                libc::fcntl(fd, libc::F_SETFD, 0)
            } else {
                libc::dup2(fd, REPORT_FD)
            };
            if result == -1 {
                return Err(io::Error::last_os_error());
            }
        }
    }
    Ok(())
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

fn signal_group(pgid: libc::pid_t, signal: libc::c_int) -> bool {
    // SAFETY: kill(2) with a negative pid signals a process group; no memory is involved.
    unsafe { libc::kill(-pgid, signal) == 0 }
}

/// Whether a process of the group still lives. `kill(-pgid, 0)` answers ESRCH once the group
/// is empty, but it also counts zombies, and an orphaned grandchild stays a zombie until the
/// init process reaps it, which some container inits do late; a group of zombies runs
/// nothing, so then `/proc` decides. If `/proc` cannot be read, the group counts as alive.
fn group_alive(pgid: libc::pid_t) -> bool {
    signal_group(pgid, 0) && has_live_member(pgid).unwrap_or(true)
}

/// Whether `/proc` lists a process of group `pgid` that is not a zombie.
fn has_live_member(pgid: libc::pid_t) -> io::Result<bool> {
    for entry in std::fs::read_dir("/proc")? {
        let entry = entry?;
        let is_pid = entry
            .file_name()
            .to_str()
            .is_some_and(|name| name.bytes().all(|b| b.is_ascii_digit()));
        if !is_pid {
            continue;
        }
        // A process that exits between the listing and the read is simply not counted.
        let Ok(stat) = std::fs::read_to_string(entry.path().join("stat")) else {
            continue;
        };
        // After the parenthesised command name: state, ppid, pgrp, …
        let mut fields = stat
            .rsplit_once(')')
            .map(|(_, rest)| rest.split_whitespace())
            .into_iter()
            .flatten();
        let state = fields.next();
        let group = fields.nth(1).and_then(|g| g.parse::<libc::pid_t>().ok());
        if group == Some(pgid) && !matches!(state, Some("Z" | "X")) {
            return Ok(true);
        }
    }
    Ok(false)
}

/// SIGTERM to the group, up to [`KILL_GRACE`] for the shell to be reaped and the group to
/// empty, then SIGKILL and up to [`KILL_WAIT`] for it to be gone. Returns at once when the
/// group is already empty; otherwise returns once nothing of the group runs (or the wait ran
/// out, which only a process stuck in the kernel causes).
///
/// The shell is the group's leader and its pid is the group id; the kernel does not reuse the
/// id while any member lives (a zombie included), so the signals reach this group. (Only if
/// the last member went in the instant between the last check and SIGKILL and the pid space
/// wrapped around in that instant could the SIGKILL reach another group.)
pub(crate) async fn terminate_group(pgid: libc::pid_t, child: &mut Child) {
    if !group_alive(pgid) {
        return;
    }
    signal_group(pgid, libc::SIGTERM);
    if wait_until_gone(pgid, child, KILL_GRACE).await {
        return;
    }
    signal_group(pgid, libc::SIGKILL);
    wait_until_gone(pgid, child, KILL_WAIT).await;
}

/// Polls until the shell is reaped and nothing else of the group runs; `false` if `limit`
/// passed first.
async fn wait_until_gone(pgid: libc::pid_t, child: &mut Child, limit: Duration) -> bool {
    let deadline = tokio::time::Instant::now() + limit;
    loop {
        // `try_wait` reaps the shell once it exited; until then it is a member of the group.
        let leader_gone = !matches!(child.try_wait(), Ok(None));
        if leader_gone && !group_alive(pgid) {
            return true;
        }
        if tokio::time::Instant::now() >= deadline {
            return false;
        }
        tokio::time::sleep(POLL).await;
    }
}
