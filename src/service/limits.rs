//! Per-principal limits the service enforces for every door (DESIGN §10, `[limits]`): how
//! many batches a principal runs at once (`concurrent_batches_per_principal`) and how many
//! sessions it holds open (`sessions_per_principal`). The per-second request rate is the
//! gate's (`api::rate_limit`), the per-session shell limits the shell tools'
//! (`tools::shell::background`): each limit is enforced once, where what it counts is known.
//!
//! Decisions (DESIGN is silent):
//! - Over a limit is [`ErrorCode::LimitExceeded`]: HTTP 429 with `Retry-After: 1` (a slot
//!   frees when a batch ends or a session closes, which the daemon cannot foresee), gRPC
//!   `RESOURCE_EXHAUSTED` (`retry-after: 1` metadata), a JSON-RPC error on the MCP door. Nothing waits: a client over its
//!   limit learns it at once.
//! - What holds a slot is a [`LimitSlot`], released when it is dropped. A batch's slot lives
//!   in the batch's own future (or task), so it is released when the batch ends however it
//!   ends: completed, failed, panicked, or dropped by its client (the batch runs on to its end
//!   and keeps its slot until then, since it still runs). A session's slot lives in its
//!   [`super::LiveSession`], released when the session closes.
//! - A batch is counted from its admission (before it waits for its session's turn) to its
//!   end; a retried idempotent batch takes a slot like any other.
//! - Sessions count per daemon: a fleet of N daemons lets a principal hold N times the limit
//!   (each daemon knows only its own). Sessions restored after a restart, or adopted from a
//!   stopped daemon, count without being refused: they exist already.
//! - Limits apply to every principal, admins included (`local`, the caller of a daemon without
//!   tokens, is one principal).
//! - 0 means no limit, and then nothing is counted: no lock, no allocation on the path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use super::{ErrorCode, ServiceError};

/// The limits the service enforces; 0 = none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ServiceLimits {
    pub concurrent_batches_per_principal: usize,
    pub sessions_per_principal: usize,
}

/// What the service counts per principal.
#[derive(Default)]
pub(super) struct PrincipalLimits {
    pub batches: Arc<SlotCounter>,
    pub sessions: Arc<SlotCounter>,
}

impl PrincipalLimits {
    pub fn new(limits: ServiceLimits) -> PrincipalLimits {
        PrincipalLimits {
            batches: Arc::new(SlotCounter::new(
                limits.concurrent_batches_per_principal,
                "concurrent_batches_per_principal",
                "batches running",
            )),
            sessions: Arc::new(SlotCounter::new(
                limits.sessions_per_principal,
                "sessions_per_principal",
                "sessions open",
            )),
        }
    }
}

/// Slots of one limit, counted per principal.
#[derive(Default)]
pub(super) struct SlotCounter {
    /// 0: no limit, nothing counted.
    max: usize,
    /// The setting's key, named in refusals.
    key: &'static str,
    /// What a slot is, for refusals ("batches running").
    what: &'static str,
    /// Slots held, per principal; a principal holding none has no entry.
    held: Mutex<HashMap<Arc<str>, usize>>,
}

/// A slot held; released when dropped.
#[must_use = "the slot is released when dropped"]
pub(super) struct LimitSlot {
    counter: Arc<SlotCounter>,
    principal: Arc<str>,
}

impl SlotCounter {
    pub fn new(max: usize, key: &'static str, what: &'static str) -> SlotCounter {
        SlotCounter {
            max,
            key,
            what,
            held: Mutex::new(HashMap::new()),
        }
    }

    /// A slot for `principal`, or `limit_exceeded` when it holds the limit's worth already;
    /// `None` without a limit.
    pub fn acquire(
        self: &Arc<Self>,
        principal: &Arc<str>,
    ) -> Result<Option<LimitSlot>, ServiceError> {
        if self.max == 0 {
            return Ok(None);
        }
        {
            let mut held = self.lock();
            let count = held.entry(principal.clone()).or_default();
            if *count >= self.max {
                return Err(ServiceError::new(
                    ErrorCode::LimitExceeded,
                    format!(
                        "principal \"{principal}\" has {count} {} (limits.{} = {}); retry \
                         when one ends",
                        self.what, self.key, self.max
                    ),
                ));
            }
            *count += 1;
        }
        Ok(Some(self.slot(principal)))
    }

    /// A slot for `principal` whatever it holds already (what exists already counts but is
    /// not refused); `None` without a limit.
    pub fn count(self: &Arc<Self>, principal: &str) -> Option<LimitSlot> {
        if self.max == 0 {
            return None;
        }
        let principal: Arc<str> = principal.into();
        *self.lock().entry(principal.clone()).or_default() += 1;
        Some(self.slot(&principal))
    }

    /// How many slots `principal` holds.
    #[cfg(test)]
    pub fn held(&self, principal: &str) -> usize {
        self.lock().get(principal).copied().unwrap_or(0)
    }

    fn slot(self: &Arc<Self>, principal: &Arc<str>) -> LimitSlot {
        LimitSlot {
            counter: self.clone(),
            principal: principal.clone(),
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<Arc<str>, usize>> {
        // Each change under this lock is one counter's step; a panic cannot leave it half-done.
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }
}

impl Drop for LimitSlot {
    fn drop(&mut self) {
        let mut held = self.counter.lock();
        if let Some(count) = held.get_mut(&self.principal) {
            *count = count.saturating_sub(1);
            if *count == 0 {
                held.remove(&self.principal);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn counter(max: usize) -> Arc<SlotCounter> {
        Arc::new(SlotCounter::new(
            max,
            "concurrent_batches_per_principal",
            "batches running",
        ))
    }

    #[test]
    fn a_principal_at_its_limit_is_refused_and_others_are_not() {
        let counter = counter(2);
        let (a, b): (Arc<str>, Arc<str>) = ("a".into(), "b".into());
        let first = counter.acquire(&a).unwrap();
        let _second = counter.acquire(&a).unwrap();
        let refused = counter.acquire(&a).err().unwrap();
        assert_eq!(refused.code, ErrorCode::LimitExceeded);
        assert!(
            refused.message.contains("\"a\"")
                && refused
                    .message
                    .contains("limits.concurrent_batches_per_principal = 2"),
            "{}",
            refused.message
        );
        assert!(counter.acquire(&b).unwrap().is_some());
        drop(first);
        assert!(counter.acquire(&a).unwrap().is_some());
    }

    #[tokio::test]
    async fn a_batch_that_panics_inline_or_in_its_task_gives_its_slot_back() {
        let counter = counter(1);
        let a: Arc<str> = "a".into();
        // A whole batch runs in `RunToCompletion`, a streamed one in a task of its own; each
        // holds its slot in its future, as `batches` and `streams` do.
        let slot = counter.acquire(&a).unwrap();
        let whole = super::super::run_to_completion::RunToCompletion::new(async move {
            let _slot = slot;
            panic!("the batch panicked");
        });
        assert_eq!(whole.await, Err("the batch panicked".to_owned()));
        assert_eq!(counter.held("a"), 0);
        let slot = counter.acquire(&a).unwrap();
        let streamed = tokio::spawn(async move {
            let _slot = slot;
            panic!("the batch panicked");
        });
        assert!(streamed.await.unwrap_err().is_panic());
        assert_eq!(counter.held("a"), 0);
        assert!(counter.acquire(&a).unwrap().is_some());
    }

    #[test]
    fn without_a_limit_nothing_is_counted() {
        let counter = counter(0);
        let a: Arc<str> = "a".into();
        let slots: Vec<_> = (0..100).map(|_| counter.acquire(&a).unwrap()).collect();
        assert!(slots.iter().all(Option::is_none));
        assert!(counter.count("a").is_none());
        assert!(counter.lock().is_empty());
    }

    #[test]
    fn what_exists_already_counts_without_being_refused() {
        let counter = counter(1);
        let a: Arc<str> = "a".into();
        let restored = [counter.count("a"), counter.count("a")];
        assert_eq!(counter.held("a"), 2);
        assert!(counter.acquire(&a).is_err());
        drop(restored);
        assert!(counter.acquire(&a).unwrap().is_some());
    }
}
