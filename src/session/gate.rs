//! The session's call gate: the one place that decides which of a session's calls execute
//! together, whichever request (batch) they came in.
//!
//! The seeds' rule, partition-then-gather, says concurrency-safe calls run together up to
//! `max_concurrency` and any other call runs alone. MCP clients send a model turn's parallel
//! calls as separate `tools/call` requests, one batch each, so a rule applied inside a batch
//! never sees them; a session used to run one batch at a time instead, and twenty parallel
//! `bash sleep 1` took twenty seconds. The gate applies the rule across batches: a readers-
//! writer discipline per session, where a concurrency-safe call enters shared (at most
//! `max_concurrency` at once) and any other call enters exclusive.
//!
//! Decisions:
//! - **Fair, first in first out.** A call waits in arrival order; an exclusive call at the
//!   head of the queue holds back every later call until it has run, so a stream of reads
//!   never starves a write, and a read sent after a write sees what the write did. This is
//!   `tokio::sync::RwLock` (its queue is FIFO and write-preferring) with its reader limit set
//!   to the cap, so the cap is the same semaphore as the readers-writer rule.
//! - **Entered at execution, after the decision.** The pipeline's execute phase enters the
//!   gate, after validation, permission and the pre-tool hooks, and leaves it when the tool
//!   returns (before post-tool hooks and offload). A call waiting for a human's approval
//!   therefore holds nothing: the session's reads go on meanwhile. A call waiting at the gate
//!   still honours its stop signals (close, sibling abort, an interrupt for `cancel` tools);
//!   its wait is bounded by the holders' own timeouts.
//! - **Inside a batch, the executor keeps request order** of the whole pipeline (a later
//!   call's validation sees an earlier write's effect), and its calls pass the same gate, so
//!   the rule has one owner: the executor never starts what the gate would keep apart, and the
//!   gate alone keeps batches apart.
//! - **A background `bash` never blocks anything**: it is concurrency-safe (its process runs
//!   detached; the gate could not order it anyway), so it enters shared only while being
//!   started.
//! - Not here: per-principal batch limits (`service::limits`), the foreground shell limit
//!   (`shell_calls_per_session`).

use std::sync::Arc;

use tokio::sync::{OwnedRwLockReadGuard, OwnedRwLockWriteGuard, RwLock};

/// How a call enters the gate.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum GateAccess {
    /// A concurrency-safe call: runs beside other shared ones, up to the cap.
    Shared,
    /// Any other call: runs alone.
    Exclusive,
}

impl GateAccess {
    pub fn for_call(concurrency_safe: bool) -> GateAccess {
        if concurrency_safe {
            GateAccess::Shared
        } else {
            GateAccess::Exclusive
        }
    }
}

/// One session's gate. Cheap to share; every call of the session enters the same one.
#[derive(Debug)]
pub struct CallGate {
    lock: Arc<RwLock<()>>,
}

/// A call's place inside the gate, held while it executes; leaving is dropping it.
#[derive(Debug)]
pub enum GatePass {
    Shared(OwnedRwLockReadGuard<()>),
    Exclusive(OwnedRwLockWriteGuard<()>),
}

/// Tokio's limit on readers (`RwLock::with_max_readers` panics above it).
const MAX_SHARED: usize = (u32::MAX >> 3) as usize;

impl CallGate {
    /// A gate letting at most `max_shared` shared calls in at once (at least one).
    pub fn new(max_shared: usize) -> CallGate {
        let max_shared = max_shared.clamp(1, MAX_SHARED);
        // In range by the clamp just above.
        let max_reads = u32::try_from(max_shared).unwrap_or(1);
        CallGate {
            lock: Arc::new(RwLock::with_max_readers((), max_reads)),
        }
    }

    /// Waits for the call's turn, in arrival order. Dropping the future leaves the queue.
    pub async fn enter(&self, access: GateAccess) -> GatePass {
        match access {
            GateAccess::Shared => GatePass::Shared(self.lock.clone().read_owned().await),
            GateAccess::Exclusive => GatePass::Exclusive(self.lock.clone().write_owned().await),
        }
    }
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
