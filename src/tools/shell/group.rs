//! A shell's process group: its leader (a child of the daemon, or of the session's sandbox
//! spawner), and stopping the whole group.
//!
//! Stopping means the process group, never just the leader: SIGTERM, up to [`KILL_GRACE`] for
//! it to go, then SIGKILL and up to [`KILL_WAIT`] until it is gone, so grandchildren
//! (`sleep 300 &`) go too and are gone when the stop returns. A shell started by a spawner is
//! addressed by the pid the daemon's `/proc` gives it (the spawner passes a pidfd), so the
//! same signals and checks apply inside a sandbox's pid namespace; its exit status comes from
//! the spawner, which reaps it.

use std::io;
use std::process::ExitStatus;
use std::time::Duration;

use super::direct::DirectChild;
use super::sandbox::spawner::SpawnedShell;

/// How long a stopped process group gets between SIGTERM and SIGKILL.
pub(crate) const KILL_GRACE: Duration = Duration::from_millis(500);
/// How long a group gets to vanish after SIGKILL. Only a process stuck in the kernel
/// (uninterruptible I/O) takes longer; the stop then returns without it.
pub(crate) const KILL_WAIT: Duration = Duration::from_secs(2);
/// How often a stopping group is checked.
const POLL: Duration = Duration::from_millis(10);

/// The shell at the head of a group.
#[derive(Debug)]
pub(crate) enum Leader {
    /// Started by the daemon (unsandboxed).
    Direct(DirectChild),
    /// Started by the session's spawner.
    Spawned(SpawnedShell),
}

impl Leader {
    /// Its pid in the daemon's pid namespace, which is also its process group id.
    pub(crate) fn pid(&self) -> libc::pid_t {
        match self {
            Leader::Direct(child) => child.pid(),
            Leader::Spawned(shell) => shell.pid,
        }
    }

    pub(crate) async fn wait(&mut self) -> io::Result<ExitStatus> {
        match self {
            Leader::Direct(child) => child.wait().await,
            Leader::Spawned(shell) => shell.wait().await,
        }
    }

    /// `Ok(None)` while it runs; an error when its end cannot be known (it then counts as
    /// gone).
    pub(crate) fn try_wait(&mut self) -> io::Result<Option<ExitStatus>> {
        match self {
            Leader::Direct(child) => child.try_wait(),
            Leader::Spawned(shell) => shell.try_wait(),
        }
    }
}

/// Kills the group if the future driving a process is dropped before it finished (the
/// dispatcher gave up on the call).
#[derive(Debug)]
pub(crate) struct GroupGuard {
    pub pgid: libc::pid_t,
    pub armed: bool,
}

impl Drop for GroupGuard {
    fn drop(&mut self) {
        if self.armed {
            signal_group(self.pgid, libc::SIGKILL);
        }
    }
}

pub(crate) fn signal_group(pgid: libc::pid_t, signal: libc::c_int) -> bool {
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
pub(crate) async fn terminate_group(pgid: libc::pid_t, child: &mut Leader) {
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
async fn wait_until_gone(pgid: libc::pid_t, child: &mut Leader, limit: Duration) -> bool {
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
