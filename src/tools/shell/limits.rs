//! The per-session shell limits of `[limits]` (DESIGN §10): `shell_calls_per_session`
//! (foreground `bash` calls running at once) and `background_shells_per_session` (background
//! shells running at once). [`super::BackgroundShells`] holds them, since it is what the shell
//! tools of every session share.
//!
//! Decisions (DESIGN is silent):
//! - Over `shell_calls_per_session`, a `bash` call *waits* for a slot rather than failing:
//!   only read-only calls run in parallel, and the model asked for all of them, so making
//!   some fail would only make it ask again. The wait counts towards the call's timeout and
//!   ends with the call if it is interrupted, aborted or its session closes.
//! - Over `background_shells_per_session`, starting another background shell is that call's
//!   error result (kind `execution`): nothing can be foreseen to free a slot, and the model
//!   can stop one with `kill_shell`. A shell holds its slot while it runs; a finished one
//!   (still listed for its output) does not.
//! - A slot is a semaphore permit, given back when dropped: a call that ends, fails, panics
//!   or is dropped gives its slot back.
//! - 0 = no limit: nothing is looked up or allocated on the call's path.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;

use crate::tool::ToolError;

/// `[limits]` per session for shells; 0 = none.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct ShellLimits {
    /// `shell_calls_per_session`: foreground `bash` calls running at once.
    pub calls_per_session: usize,
    /// `background_shells_per_session`: background shells running at once.
    pub background_per_session: usize,
}

/// Each session's slots, made on its first shell when a limit is set.
#[derive(Debug, Default)]
pub(super) struct SessionSlots {
    limits: ShellLimits,
    foreground: Mutex<HashMap<String, Arc<Semaphore>>>,
    background: Mutex<HashMap<String, Arc<Semaphore>>>,
}

impl SessionSlots {
    pub fn new(limits: ShellLimits) -> SessionSlots {
        SessionSlots {
            limits,
            ..SessionSlots::default()
        }
    }

    /// A slot for a foreground call of `session_id`, waited for; `None` without a limit.
    /// Fails only if `cancellation` fires first.
    pub async fn foreground(
        &self,
        session_id: &str,
        cancellation: &CancellationToken,
    ) -> Result<Option<OwnedSemaphorePermit>, ToolError> {
        let max = self.limits.calls_per_session;
        if max == 0 {
            return Ok(None);
        }
        let semaphore = semaphore(&self.foreground, session_id, max);
        tokio::select! {
            permit = semaphore.acquire_owned() => permit
                .map(Some)
                .map_err(|_| ToolError::Execution("the session's shell slots are closed".to_owned())),
            () = cancellation.cancelled() => Err(ToolError::Execution(format!(
                "stopped while waiting for one of the session's {max} shell slots \
                 (limits.shell_calls_per_session)"
            ))),
        }
    }

    /// A slot for a background shell of `session_id`, or that call's error when all are
    /// taken; `None` without a limit.
    pub fn background(&self, session_id: &str) -> Result<Option<OwnedSemaphorePermit>, ToolError> {
        let max = self.limits.background_per_session;
        if max == 0 {
            return Ok(None);
        }
        semaphore(&self.background, session_id, max)
            .try_acquire_owned()
            .map(Some)
            .map_err(|_| {
                ToolError::Execution(format!(
                    "this session already runs {max} background shells \
                     (limits.background_shells_per_session = {max}); stop one with kill_shell \
                     or wait for one to finish"
                ))
            })
    }

    /// Forgets a closed session's slots (held permits keep their semaphore alive).
    pub fn forget(&self, session_id: &str) {
        for slots in [&self.foreground, &self.background] {
            lock(slots).remove(session_id);
        }
    }
}

fn semaphore(
    slots: &Mutex<HashMap<String, Arc<Semaphore>>>,
    session_id: &str,
    max: usize,
) -> Arc<Semaphore> {
    let mut slots = lock(slots);
    if let Some(semaphore) = slots.get(session_id) {
        return semaphore.clone();
    }
    let semaphore = Arc::new(Semaphore::new(max));
    slots.insert(session_id.to_owned(), semaphore.clone());
    semaphore
}

fn lock(
    slots: &Mutex<HashMap<String, Arc<Semaphore>>>,
) -> std::sync::MutexGuard<'_, HashMap<String, Arc<Semaphore>>> {
    // Single inserts and removes; a panic cannot leave the map half-changed.
    slots.lock().unwrap_or_else(|p| p.into_inner())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_foreground_call_over_the_limit_waits_for_a_slot() {
        let slots = SessionSlots::new(ShellLimits {
            calls_per_session: 1,
            background_per_session: 0,
        });
        let never = CancellationToken::new();
        let first = slots.foreground("s1", &never).await.unwrap();
        assert!(first.is_some());
        // Another session is not limited by this one.
        assert!(slots.foreground("s2", &never).await.unwrap().is_some());
        let waiting = slots.foreground("s1", &never);
        tokio::pin!(waiting);
        assert!(futures::poll!(waiting.as_mut()).is_pending());
        drop(first);
        assert!(waiting.await.unwrap().is_some());
    }

    #[tokio::test]
    async fn a_wait_ends_with_its_call() {
        let slots = SessionSlots::new(ShellLimits {
            calls_per_session: 1,
            background_per_session: 0,
        });
        let never = CancellationToken::new();
        let _held = slots.foreground("s1", &never).await.unwrap();
        let stop = CancellationToken::new();
        stop.cancel();
        let err = slots.foreground("s1", &stop).await.unwrap_err();
        assert!(err.message().contains("shell_calls_per_session"), "{err}");
    }

    #[test]
    fn a_background_shell_over_the_limit_is_refused_until_one_ends() {
        let slots = SessionSlots::new(ShellLimits {
            calls_per_session: 0,
            background_per_session: 2,
        });
        let first = slots.background("s1").unwrap();
        let _second = slots.background("s1").unwrap();
        let err = slots.background("s1").unwrap_err();
        assert!(
            err.message()
                .contains("limits.background_shells_per_session = 2"),
            "{err}"
        );
        assert!(slots.background("s2").unwrap().is_some());
        drop(first);
        assert!(slots.background("s1").unwrap().is_some());
    }

    #[tokio::test]
    async fn without_limits_nothing_is_counted() {
        let slots = SessionSlots::new(ShellLimits::default());
        let never = CancellationToken::new();
        for _ in 0..10 {
            assert!(slots.foreground("s1", &never).await.unwrap().is_none());
            assert!(slots.background("s1").unwrap().is_none());
        }
        assert!(lock(&slots.foreground).is_empty() && lock(&slots.background).is_empty());
    }
}
