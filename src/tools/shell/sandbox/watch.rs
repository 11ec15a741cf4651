//! Whether a call met its session's limits (DESIGN §12: "a process over a limit is stopped,
//! its call ends with `resource_exhausted` naming the limit").
//!
//! The kernel records it in the session's cgroup and nowhere else a daemon can see: the OOM
//! killer kills one process of the cgroup (`oom_kill` goes up), a fork over `pids.max` fails
//! with EAGAIN (`max` in `pids.events` goes up). A [`LimitWatch`] reads the counters when a
//! call starts and polls them while it runs ([`POLL`]); once one has gone up, the call is
//! stopped like a timed-out one (its whole process group killed: what the OOM killer left of
//! it, or a fork bomb that would otherwise run on at its limit until the timeout) and
//! answered as `resource_exhausted`. The counters are the session's, not the call's: a
//! background shell of the same session over a limit while a foreground call runs is blamed
//! on that call too (they share the one cgroup and its limit). Without a cgroup (rlimits)
//! nothing is watched: the command sees its failed allocation or fork itself.

use std::sync::Arc;
use std::time::Duration;

use super::limits::Exhaustion;
use super::spawner::SessionSpawner;

/// How often a running call's counters are read.
const POLL: Duration = Duration::from_millis(50);

/// The session's counters when a call started.
#[derive(Debug)]
pub(crate) struct LimitWatch {
    spawner: Arc<SessionSpawner>,
    before: Exhaustion,
}

/// A limit a call met.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct LimitMet {
    /// The limit's name (`memory_mb`, `pids`): the metric's label.
    pub limit: &'static str,
    /// The call's last line: `memory_mb = 64 reached: the process group was killed`.
    pub message: String,
}

impl super::Confinement {
    /// A watch on the session's cgroup counters from now on (`None` without a cgroup).
    pub(crate) fn limit_watch(&self) -> Option<LimitWatch> {
        match self {
            super::Confinement::None => None,
            super::Confinement::Spawner(spawner) => LimitWatch::start(spawner.clone()),
        }
    }
}

impl LimitWatch {
    /// Reads the counters of `spawner`'s cgroup; `None` when it has none.
    pub(crate) fn start(spawner: Arc<SessionSpawner>) -> Option<LimitWatch> {
        let (before, _) = spawner.exhaustion()?;
        Some(LimitWatch { spawner, before })
    }

    /// The limit met since the watch started, if any (memory first: an OOM kill is the
    /// harder stop).
    pub(crate) fn met(&self) -> Option<LimitMet> {
        let (now, limits) = self.spawner.exhaustion()?;
        let own = self
            .spawner
            .environment()
            .map(|e| e.limits)
            .unwrap_or_default();
        if now.oom_kills > self.before.oom_kills {
            let name = if own.memory_mb > 0 {
                format!("memory_mb = {}", own.memory_mb)
            } else {
                format!("[sandbox] memory_bytes = {}", limits.memory_bytes)
            };
            return Some(LimitMet {
                limit: "memory_mb",
                message: format!(
                    "{name} reached: the kernel killed a process for memory, and the process group was killed"
                ),
            });
        }
        if now.pids_max > self.before.pids_max {
            let name = if own.pids > 0 {
                format!("pids = {}", own.pids)
            } else {
                format!("[sandbox] pids = {}", limits.pids)
            };
            return Some(LimitMet {
                limit: "pids",
                message: format!("{name} reached: a fork failed, and the process group was killed"),
            });
        }
        None
    }

    /// Resolves once a limit is met (never, if none is).
    pub(crate) async fn until_met(&self) -> LimitMet {
        loop {
            if let Some(met) = self.met() {
                return met;
            }
            tokio::time::sleep(POLL).await;
        }
    }
}
