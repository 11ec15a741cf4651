//! Retention: tasks that delete persisted events older than `[server] event_retention_hours`
//! ([`spawn`]) and audit rows older than `[server] audit_retention_days` ([`spawn_audit`]),
//! once at start and then every [`PRUNE_INTERVAL`].
//!
//! They only call `Store::prune_events` and `Store::prune_calls`; what "older" means (the
//! event's `ts`, the call's `started_at`) and the chunking are the store's. A retention of 0
//! keeps forever and starts no task. The two are independent (`docs/decisions/audit.md`).

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio_util::sync::CancellationToken;

use crate::store::{Store, StoreError};

/// How often the prune runs. Hourly is fine-grained enough for a retention counted in hours.
pub const PRUNE_INTERVAL: Duration = Duration::from_secs(3600);

/// Deletes the events older than `retention` before `now`; returns how many.
pub async fn prune_once(
    store: &dyn Store,
    retention: Duration,
    now: SystemTime,
) -> Result<u64, StoreError> {
    // A retention reaching before the epoch keeps everything.
    let Some(cutoff) = now.checked_sub(retention) else {
        return Ok(0);
    };
    store.prune_events(cutoff).await
}

/// Deletes the audit rows of calls started more than `retention` before `now`, with their
/// offloaded results; returns how many.
pub async fn prune_calls_once(
    store: &dyn Store,
    retention: Duration,
    now: SystemTime,
) -> Result<u64, StoreError> {
    let Some(cutoff) = now.checked_sub(retention) else {
        return Ok(0);
    };
    store.prune_calls(cutoff).await
}

/// Starts the periodic audit prune, until `stop`; `None` when audit retention is off (0).
pub fn spawn_audit(
    store: Arc<dyn Store>,
    retention: Duration,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if retention.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(PRUNE_INTERVAL);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match prune_calls_once(store.as_ref(), retention, SystemTime::now()).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "old audit rows pruned"),
                Err(err) => tracing::warn!(error = %err, "pruning old audit rows failed"),
            }
        }
    }))
}

/// Starts the periodic prune, until `stop`; `None` when retention is off (0).
pub fn spawn(
    store: Arc<dyn Store>,
    retention: Duration,
    stop: CancellationToken,
) -> Option<tokio::task::JoinHandle<()>> {
    if retention.is_zero() {
        return None;
    }
    Some(tokio::spawn(async move {
        let mut ticks = tokio::time::interval(PRUNE_INTERVAL);
        loop {
            tokio::select! {
                () = stop.cancelled() => return,
                _ = ticks.tick() => {}
            }
            match prune_once(store.as_ref(), retention, SystemTime::now()).await {
                Ok(0) => {}
                Ok(pruned) => tracing::info!(pruned, "old events pruned"),
                Err(err) => tracing::warn!(error = %err, "pruning old events failed"),
            }
        }
    }))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::event::{Event, EventType};
    use crate::store::{EventFilter, EventStore, SqliteStore};

    fn event(seq: u64, ts: SystemTime) -> Arc<Event> {
        Arc::new(Event {
            seq,
            ts,
            event_type: EventType::BatchStart,
            session_id: Arc::from("s1"),
            batch_id: None,
            call_id: None,
            tool: None,
            actor: None,
            data: crate::event::EventData::empty_object(),
        })
    }

    #[tokio::test]
    async fn one_prune_run_deletes_only_events_older_than_the_retention() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("toold.db");
        let store = SqliteStore::open(path.to_str().unwrap(), "node-test")
            .await
            .unwrap();
        let now = SystemTime::now();
        let hour = Duration::from_secs(3600);
        store
            .append_events(&[
                event(1, now - 3 * hour),
                event(2, now - hour / 2),
                event(3, now),
            ])
            .await
            .unwrap();
        assert_eq!(prune_once(&store, hour, now).await.unwrap(), 1);
        let left = store
            .read_events(&EventFilter::default(), 0, 10)
            .await
            .unwrap();
        assert_eq!(left.iter().map(|e| e.seq).collect::<Vec<_>>(), [2, 3]);
        // Off: no task.
        assert!(spawn(Arc::new(store), Duration::ZERO, CancellationToken::new()).is_none());
    }
}
