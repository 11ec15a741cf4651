//! Approvals: a call waiting for a person, and the person's answer reaching it.
//!
//! [`Approvals::wait`] records a pending approval in the store, publishes `permission:ask`
//! and waits for whichever comes first: a resolution ([`Approvals::resolve`], which the
//! service calls for every door), the timeout, or the call being cancelled (interrupt, session
//! closed). The store is the arbiter: an approval is settled by the one
//! `resolve_approval` that changes its row, so of two resolutions, or a resolution racing the
//! timeout, exactly one wins and the loser learns it lost. Deciding *when* to ask and what an
//! answer means for the call is the policy's ([`super::policy`]).
//!
//! The store is reached through [`ApprovalLedger`], a port this module defines and the store
//! implements (`store::StoreApprovals` is `Approvals` over the store), so permission sits
//! below the store and names none of it; the policy reaches approvals through
//! [`ApprovalWait`], so it does not care which ledger keeps them.

use std::collections::HashMap;
use std::fmt;
use std::sync::Mutex;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use futures::future::BoxFuture;
use serde_json::{Value, json};
use tokio::sync::oneshot;
use tracing::Instrument;

use crate::event::{EventBus, EventDraft, EventType};

/// A pending approval as the ledger records it.
#[derive(Clone, Copy, Debug)]
pub struct NewApproval<'a> {
    pub id: &'a str,
    pub session_id: &'a str,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub input: &'a Value,
    pub reason: &'a str,
    pub created_at: SystemTime,
}

/// Where approvals are recorded and settled: the arbiter of races (of two settlements of one
/// approval exactly one returns `true`). The store implements it.
#[async_trait]
pub trait ApprovalLedger: Send + Sync + 'static {
    type Error: fmt::Display + Send + Sync + 'static;

    /// Records a pending approval.
    async fn insert_approval(&self, approval: NewApproval<'_>) -> Result<(), Self::Error>;

    /// The ids of a session's unresolved approvals, oldest first.
    async fn pending_approval_ids(&self, session_id: &str) -> Result<Vec<String>, Self::Error>;

    /// Settles a pending approval; `false` if it was unknown or already settled.
    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, Self::Error>;
}

/// What the policy needs of approvals: record an ask, announce it, wait for its end
/// ([`Approvals::wait`]). Object-safe, so the policy holds any ledger's approvals.
#[async_trait]
pub trait ApprovalWait: Send + Sync + 'static {
    /// [`Approvals::wait`], with the cancellation future boxed.
    async fn wait_for(
        &self,
        ask: &ApprovalAsk<'_>,
        timeout: Duration,
        cancelled: BoxFuture<'_, ()>,
    ) -> (String, WaitOutcome);
}

/// Who resolved an approval: the door and, when the daemon checks tokens, which token.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approver {
    /// `http` or `grpc`.
    pub door: String,
    /// A fingerprint of the bearer token (never the token), `None` without auth.
    pub token_id: Option<String>,
}

impl Approver {
    /// The approver behind `door`, authenticated with `token` (if the daemon checks tokens):
    /// the token is kept only as `sha256:` and the first 12 hex digits of its SHA-256, enough
    /// to tell configured tokens apart in the audit log without recording a secret.
    pub fn new(door: &str, token: Option<&str>) -> Approver {
        use sha2::{Digest, Sha256};
        let token_id = token.map(|token| {
            let digest = Sha256::digest(token.as_bytes());
            let hex: String = digest[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("sha256:{hex}")
        });
        Approver {
            door: door.to_owned(),
            token_id,
        }
    }
}

impl fmt::Display for Approver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match &self.token_id {
            Some(token) => write!(f, "{} token {token}", self.door),
            None => write!(f, "{} (no token)", self.door),
        }
    }
}

/// A person's answer to an approval.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Resolution {
    pub allow: bool,
    pub reason: Option<String>,
    /// Apply the answer to the same call for the rest of the session.
    pub remember: bool,
    pub approver: Approver,
}

/// How a wait ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WaitOutcome {
    Resolved(Resolution),
    TimedOut,
    /// The call was cancelled while it waited.
    Cancelled,
    /// The approval could not be recorded or settled.
    Failed(String),
}

/// What a pending approval is about.
#[derive(Clone, Debug)]
pub struct ApprovalAsk<'a> {
    pub session_id: &'a str,
    pub batch_id: &'a str,
    pub actor: Option<&'a str>,
    pub call_id: &'a str,
    pub tool: &'a str,
    pub input: &'a Value,
    pub reason: &'a str,
}

/// Why a resolution was refused; `E` is the ledger's error.
#[derive(Debug, thiserror::Error)]
pub enum ResolveError<E> {
    #[error("approval \"{0}\" was already resolved")]
    AlreadyResolved(String),
    #[error("{0}")]
    Ledger(E),
}

/// Pending approvals and the calls waiting on them. One per daemon, shared by the policy
/// (which waits) and the service (which resolves).
pub struct Approvals<L: ApprovalLedger> {
    store: L,
    events: EventBus,
    waiting: Mutex<HashMap<String, oneshot::Sender<Resolution>>>,
}

/// Removes a waiter however its wait ends (including the call's future being dropped).
struct Waiting<'a, L: ApprovalLedger> {
    approvals: &'a Approvals<L>,
    id: String,
}

impl<L: ApprovalLedger> Drop for Waiting<'_, L> {
    fn drop(&mut self) {
        self.approvals.waiters().remove(&self.id);
    }
}

/// How long a waiter that lost the race to settle (its timeout against a resolution) waits
/// for the winner's answer, which follows the store's commit at once.
const WINNER_GRACE: Duration = Duration::from_secs(10);

impl<L: ApprovalLedger> Approvals<L> {
    pub fn new(store: impl Into<L>, events: EventBus) -> Approvals<L> {
        Approvals {
            store: store.into(),
            events,
            waiting: Mutex::new(HashMap::new()),
        }
    }

    fn waiters(&self) -> std::sync::MutexGuard<'_, HashMap<String, oneshot::Sender<Resolution>>> {
        // Only inserts and removes happen under this lock; a panic cannot leave it half-done.
        self.waiting.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records an approval for `ask`, publishes `permission:ask` and waits for its end, in a
    /// span of its own (the call's `approval wait`).
    pub async fn wait(
        &self,
        ask: &ApprovalAsk<'_>,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
    ) -> (String, WaitOutcome) {
        let span = crate::tool::trace::child(tracing::info_span!(
            target: crate::tool::trace::TARGET,
            "approval",
            otel.name = "approval wait",
            toold.approval.id = tracing::field::Empty,
            toold.approval.outcome = tracing::field::Empty,
        ));
        let (id, outcome) = self
            .wait_in_span(ask, timeout, cancelled)
            .instrument(span.clone())
            .await;
        span.record("toold.approval.id", id.as_str());
        let label = match &outcome {
            WaitOutcome::Resolved(_) => "resolved",
            WaitOutcome::TimedOut => "timed_out",
            WaitOutcome::Cancelled => "cancelled",
            WaitOutcome::Failed(_) => "failed",
        };
        span.record("toold.approval.outcome", label);
        (id, outcome)
    }

    async fn wait_in_span(
        &self,
        ask: &ApprovalAsk<'_>,
        timeout: Duration,
        cancelled: impl Future<Output = ()>,
    ) -> (String, WaitOutcome) {
        let id = format!("appr_{}", uuid::Uuid::now_v7().simple());
        let (sender, receiver) = oneshot::channel();
        // Registered before the row exists, so no resolution can find the row but no waiter.
        self.waiters().insert(id.clone(), sender);
        let _waiting = Waiting {
            approvals: self,
            id: id.clone(),
        };
        let record = NewApproval {
            id: &id,
            session_id: ask.session_id,
            call_id: ask.call_id,
            tool: ask.tool,
            input: ask.input,
            reason: ask.reason,
            created_at: SystemTime::now(),
        };
        if let Err(err) = self.store.insert_approval(record).await {
            return (
                id,
                WaitOutcome::Failed(format!("the approval could not be recorded: {err}")),
            );
        }
        self.events.publish(
            EventDraft::new(EventType::PermissionAsk, ask.session_id)
                .acted_by(ask.actor.map(std::sync::Arc::from))
                .batch(ask.batch_id)
                .call(ask.call_id, ask.tool)
                .data(json!({
                    "approval_id": id,
                    "call_id": ask.call_id,
                    "tool": ask.tool,
                    "input": ask.input,
                    "reason": ask.reason,
                    "timeout_ms": u64::try_from(timeout.as_millis()).unwrap_or(u64::MAX),
                })),
        );
        let mut receiver = receiver;
        let unanswered = tokio::select! {
            answer = &mut receiver => match answer {
                Ok(resolution) => return (id, WaitOutcome::Resolved(resolution)),
                Err(_) => return (id, WaitOutcome::Failed("the approval's waiter was dropped".to_owned())),
            },
            () = tokio::time::sleep(timeout) => ("deny", "timeout", WaitOutcome::TimedOut),
            () = cancelled => ("deny", "cancelled", WaitOutcome::Cancelled),
        };
        let (decision, decided_by, outcome) = unanswered;
        match self.store.resolve_approval(&id, decision, decided_by).await {
            Ok(true) => (id, outcome),
            // A resolution settled it first; its answer is on the way.
            Ok(false) => match tokio::time::timeout(WINNER_GRACE, receiver).await {
                Ok(Ok(resolution)) => (id, WaitOutcome::Resolved(resolution)),
                _ => (
                    id,
                    WaitOutcome::Failed("the approval's resolution was lost".to_owned()),
                ),
            },
            Err(err) => (
                id,
                WaitOutcome::Failed(format!("the approval could not be settled: {err}")),
            ),
        }
    }

    /// Settles approval `id` with `resolution` and hands it to the waiting call. Of two
    /// concurrent resolutions exactly one succeeds; the other gets `AlreadyResolved`.
    /// Returns whether a call was waiting (it is not after a restart).
    pub async fn resolve(
        &self,
        id: &str,
        resolution: Resolution,
    ) -> Result<bool, ResolveError<L::Error>> {
        let decision = if resolution.allow { "allow" } else { "deny" };
        let settled = self
            .store
            .resolve_approval(id, decision, &resolution.approver.to_string())
            .await
            .map_err(ResolveError::Ledger)?;
        if !settled {
            return Err(ResolveError::AlreadyResolved(id.to_owned()));
        }
        let waiter = self.waiters().remove(id);
        Ok(waiter.is_some_and(|sender| sender.send(resolution).is_ok()))
    }

    /// Denies the session's pending approvals that no call waits for (left by a restart).
    pub async fn settle_orphans(&self, session_id: &str) -> Result<usize, L::Error> {
        let mut settled = 0;
        for approval_id in self.store.pending_approval_ids(session_id).await? {
            if self.waiters().contains_key(&approval_id) {
                continue;
            }
            if self
                .store
                .resolve_approval(&approval_id, "deny", "restart")
                .await?
            {
                settled += 1;
            }
        }
        Ok(settled)
    }
}

#[async_trait]
impl<L: ApprovalLedger> ApprovalWait for Approvals<L> {
    async fn wait_for(
        &self,
        ask: &ApprovalAsk<'_>,
        timeout: Duration,
        cancelled: BoxFuture<'_, ()>,
    ) -> (String, WaitOutcome) {
        self.wait(ask, timeout, cancelled).await
    }
}
