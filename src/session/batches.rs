//! A session's batches, each interruptible alone (see the session's header): the
//! [`BatchInterrupt`] a running batch holds, registered under its id while it runs
//! ([`RunningBatch`]) and, before that, while it waits for its turn ([`QueuedBatch`]), so
//! [`SessionState::cancel_batch`] reaches it either way. A queued batch's entry has a token of
//! its own, not a child of the session's: a session interrupt stops what runs now, and
//! batches waiting for their turn start as before; one cancelled alone while queued starts
//! cancelled, naming its canceller. A queued batch also names who asked for it (its
//! `actor`, a principal's name), which its calls' audit rows record.

use std::collections::HashMap;
use std::sync::{Arc, MutexGuard, OnceLock};

use tokio_util::sync::CancellationToken;

use super::SessionState;

/// A running batch's interrupt.
#[derive(Clone, Debug)]
pub struct BatchInterrupt {
    token: CancellationToken,
    /// Set when the batch was cancelled alone, before its token fired.
    cancelled_by: Arc<OnceLock<String>>,
    /// Who asked for the batch (the principal's name), when it was queued by a request.
    actor: Option<Arc<str>>,
}

impl BatchInterrupt {
    /// An interrupt of no session's batch (tests, tools run outside a batch).
    pub fn detached(token: CancellationToken) -> BatchInterrupt {
        BatchInterrupt {
            token,
            cancelled_by: Arc::new(OnceLock::new()),
            actor: None,
        }
    }

    /// Who asked for the batch: the principal whose request queued it.
    pub fn actor(&self) -> Option<&Arc<str>> {
        self.actor.as_ref()
    }

    pub fn token(&self) -> &CancellationToken {
        &self.token
    }

    pub fn is_cancelled(&self) -> bool {
        self.token.is_cancelled()
    }

    pub async fn cancelled(&self) {
        self.token.cancelled().await;
    }

    /// Who cancelled the batch alone; `None` while it runs on or when the session's own
    /// interrupt (or close) fired it.
    pub fn cancelled_by(&self) -> Option<&str> {
        self.cancelled_by.get().map(String::as_str)
    }
}

/// A batch registered with its session; unregistered when dropped.
#[derive(Debug)]
pub struct RunningBatch {
    session: Arc<SessionState>,
    batch_id: Arc<str>,
    pub interrupt: BatchInterrupt,
}

impl Drop for RunningBatch {
    fn drop(&mut self) {
        self.session.running_batches().remove(&self.batch_id);
    }
}

/// A batch not started yet (its calls then wait for their turns in the session's call gate,
/// `gate`), registered so that it can be cancelled before it starts; unregistered when
/// dropped.
#[derive(Debug)]
pub struct QueuedBatch {
    session: Arc<SessionState>,
    batch_id: Arc<str>,
}

impl Drop for QueuedBatch {
    fn drop(&mut self) {
        self.session.queued_batches().remove(&self.batch_id);
    }
}

impl SessionState {
    /// Registers a batch that waits for its turn, so [`SessionState::cancel_batch`] reaches
    /// it before it starts (it then starts cancelled: none of its calls runs); `actor` is who
    /// asked for it, carried into its running interrupt.
    pub fn queue_batch(self: &Arc<Self>, batch_id: &str, actor: Option<Arc<str>>) -> QueuedBatch {
        let batch_id: Arc<str> = Arc::from(batch_id);
        let mut interrupt = BatchInterrupt::detached(CancellationToken::new());
        interrupt.actor = actor;
        self.queued_batches().insert(batch_id.clone(), interrupt);
        QueuedBatch {
            session: self.clone(),
            batch_id,
        }
    }

    /// A starting batch's interrupt: fires with the session's next interrupt or when the
    /// batch is cancelled alone (already, if it was cancelled while queued). Registered until
    /// the returned guard is dropped.
    pub fn start_batch(self: &Arc<Self>, batch_id: &Arc<str>) -> RunningBatch {
        let queued = self.queued_batches().remove(batch_id);
        let interrupt = BatchInterrupt {
            token: self.interrupt_token().child_token(),
            cancelled_by: queued
                .as_ref()
                .map_or_else(|| Arc::new(OnceLock::new()), |q| q.cancelled_by.clone()),
            actor: queued.as_ref().and_then(|q| q.actor.clone()),
        };
        if queued.is_some_and(|q| q.is_cancelled()) {
            interrupt.token.cancel();
        }
        self.running_batches()
            .insert(batch_id.clone(), interrupt.clone());
        RunningBatch {
            session: self.clone(),
            batch_id: batch_id.clone(),
            interrupt,
        }
    }

    /// Interrupts batch `batch_id` alone, running or queued, recording `by` as who did
    /// (unless something stopped it already); whether it was running or queued.
    pub fn cancel_batch(&self, batch_id: &str, by: &str) -> bool {
        let found = self.running_batches().get(batch_id).cloned();
        let Some(interrupt) = found.or_else(|| self.queued_batches().get(batch_id).cloned()) else {
            return false;
        };
        // The first canceller is the one recorded; a session interrupt that came first is
        // not this canceller's doing.
        if !interrupt.token.is_cancelled() {
            let _ = interrupt.cancelled_by.set(by.to_owned());
        }
        interrupt.token.cancel();
        true
    }

    fn queued_batches(&self) -> MutexGuard<'_, HashMap<Arc<str>, BatchInterrupt>> {
        // Only inserts and removes happen under this lock.
        self.queued.lock().unwrap_or_else(|p| p.into_inner())
    }

    pub(super) fn running_batches(&self) -> MutexGuard<'_, HashMap<Arc<str>, BatchInterrupt>> {
        // Only inserts and removes happen under this lock.
        self.batches.lock().unwrap_or_else(|p| p.into_inner())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::permission::PermissionSession;
    use crate::session::SessionConfig;

    fn session() -> SessionState {
        SessionState::new(SessionConfig::new("s1", "/ws"))
    }

    #[test]
    fn a_batch_is_cancelled_alone_and_by_the_session_interrupt() {
        let session = Arc::new(session());
        let (one, two): (Arc<str>, Arc<str>) = (Arc::from("b1"), Arc::from("b2"));
        let first = session.start_batch(&one);
        let second = session.start_batch(&two);
        assert!(session.cancel_batch("b1", "mcp_client"));
        assert!(first.interrupt.is_cancelled());
        assert_eq!(first.interrupt.cancelled_by(), Some("mcp_client"));
        assert!(PermissionSession::batch_interrupt_token(&*session, "b1").is_cancelled());
        assert!(!second.interrupt.is_cancelled());
        assert!(!session.interrupt_token().is_cancelled());
        session.interrupt();
        assert!(second.interrupt.is_cancelled());
        assert_eq!(second.interrupt.cancelled_by(), None);
        drop(first);
        assert!(
            !session.cancel_batch("b1", "mcp_client"),
            "ended batches are forgotten"
        );
        // Cancelling a batch the session's interrupt stopped first names no canceller.
        assert!(session.cancel_batch("b2", "mcp_client"));
        assert_eq!(second.interrupt.cancelled_by(), None);
    }

    #[test]
    fn a_queued_batch_cancelled_alone_starts_cancelled_and_a_session_interrupt_spares_it() {
        let session = Arc::new(session());
        let (one, two): (Arc<str>, Arc<str>) = (Arc::from("q1"), Arc::from("q2"));
        let queued_one = session.queue_batch("q1", None);
        let queued_two = session.queue_batch("q2", None);
        assert!(session.cancel_batch("q1", "mcp_client"));
        // What is running now is interrupted; batches waiting for their turn start as before.
        session.interrupt();
        let first = session.start_batch(&one);
        assert!(first.interrupt.is_cancelled());
        assert_eq!(first.interrupt.cancelled_by(), Some("mcp_client"));
        let second = session.start_batch(&two);
        assert!(!second.interrupt.is_cancelled());
        drop((queued_one, queued_two, first, second));
        assert!(!session.cancel_batch("q1", "mcp_client"));
        let abandoned = session.queue_batch("q3", None);
        drop(abandoned);
        assert!(
            !session.cancel_batch("q3", "mcp_client"),
            "a batch that never started is forgotten"
        );
    }
}
