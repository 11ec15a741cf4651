//! Batches this daemon ran lately, kept in memory: the running ones (so `GET .../batches/{id}`
//! answers before anything is stored) and the completed ones with their results, until a
//! byte budget pushes the oldest out. A running batch's completion can be awaited
//! ([`RecentBatches::watch`]): a door that answered before the batch ended (an MCP call
//! waiting for an approval its client answers on a later request) collects the result there.
//!
//! Why memory and not the store: a batch's results are its outputs, often kilobytes per call;
//! writing every output to SQLite again, beside the audit row, would make the store's write
//! volume the ceiling of the whole service. The store keeps results only where a client asked
//! for durability, with an idempotency key; the audit log keeps every call's record. See
//! `docs/decisions/service-and-store.md`, "Batch results".
//!
//! Deliberately absent: persistence (a restart forgets this), and sharing across daemons.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use tokio::sync::watch;

use crate::store::{BatchRecord, BatchStatus};
use crate::tool::ToolResult;

/// Completed batches' results kept in memory at most (outputs plus a fixed cost per result).
const RESULT_BYTES: usize = 64 * 1024 * 1024;

/// Completed batches kept at most, whatever their size.
const COMPLETED_BATCHES: usize = 10_000;

/// What a result costs besides its output (ids, names, the struct).
const RESULT_OVERHEAD_BYTES: usize = 256;

#[derive(Default)]
pub struct RecentBatches {
    inner: Mutex<Inner>,
}

#[derive(Default)]
struct Inner {
    batches: HashMap<String, Entry>,
    /// Completed batch ids, oldest first: the eviction order.
    completed: VecDeque<String>,
    bytes: usize,
}

/// A batch's completion: `None` while it runs, then its results.
pub type BatchDone = watch::Receiver<Option<Arc<[ToolResult]>>>;

/// A batch's record (kept without results) and, once completed, its results, shared with the
/// answer that carried them. Dropping the entry (eviction) ends every watch of it.
struct Entry {
    record: BatchRecord,
    results: watch::Sender<Option<Arc<[ToolResult]>>>,
}

impl Entry {
    fn results(&self) -> Option<Arc<[ToolResult]>> {
        self.results.borrow().clone()
    }
}

impl RecentBatches {
    fn inner(&self) -> std::sync::MutexGuard<'_, Inner> {
        // Every critical section leaves the map and the queue consistent before it can panic.
        self.inner.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Records `record` (status running) as started.
    pub fn started(&self, record: &BatchRecord) {
        let mut inner = self.inner();
        let entry = Entry {
            record: record.clone(),
            results: watch::Sender::new(None),
        };
        inner.batches.insert(record.batch_id.clone(), entry);
    }

    /// Marks a started batch completed with its results; returns its record as completed,
    /// without the results.
    pub fn completed(&self, batch_id: &str, results: Arc<[ToolResult]>) -> Option<BatchRecord> {
        let mut inner = self.inner();
        let entry = inner.batches.get_mut(batch_id)?;
        entry.record.status = BatchStatus::Completed;
        entry.record.completed_at = Some(SystemTime::now());
        let completed = entry.record.clone();
        let bytes = cost(&results);
        // `send_replace` stores the results whether or not anyone watches.
        entry.results.send_replace(Some(results));
        inner.bytes += bytes;
        inner.completed.push_back(batch_id.to_owned());
        inner.evict();
        Some(completed)
    }

    /// The batch with its results, if it is `session_id`'s and still remembered.
    pub fn get(&self, session_id: &str, batch_id: &str) -> Option<BatchRecord> {
        let inner = self.inner();
        let entry = inner
            .batches
            .get(batch_id)
            .filter(|entry| entry.record.session_id == session_id)?;
        Some(BatchRecord {
            results: entry.results().as_deref().map(<[ToolResult]>::to_vec),
            ..entry.record.clone()
        })
    }

    /// The completion of `session_id`'s batch `batch_id`, if it is still remembered: already
    /// done when completed, else done when it completes.
    pub fn watch(&self, session_id: &str, batch_id: &str) -> Option<BatchDone> {
        let inner = self.inner();
        let entry = inner
            .batches
            .get(batch_id)
            .filter(|entry| entry.record.session_id == session_id)?;
        Some(entry.results.subscribe())
    }
}

impl Inner {
    /// Evicts the oldest completed batches while over budget, never the one just completed
    /// (its answer is on its way; a `GET` right after must find it).
    fn evict(&mut self) {
        while (self.bytes > RESULT_BYTES || self.completed.len() > COMPLETED_BATCHES)
            && self.completed.len() > 1
        {
            let Some(oldest) = self.completed.pop_front() else {
                return;
            };
            if let Some(entry) = self.batches.remove(&oldest) {
                self.bytes -= entry.results().as_deref().map_or(0, cost);
            }
        }
    }
}

fn cost(results: &[ToolResult]) -> usize {
    results
        .iter()
        .map(|result| result.output.len() + RESULT_OVERHEAD_BYTES)
        .sum()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn record(id: &str) -> BatchRecord {
        BatchRecord {
            batch_id: id.to_owned(),
            session_id: "s1".to_owned(),
            format: crate::registry::calls::BatchFormat::Toold,
            idempotency_key: None,
            request_hash: String::new(),
            status: BatchStatus::Running,
            call_count: 1,
            results: None,
            created_at: SystemTime::now(),
            completed_at: None,
        }
    }

    fn result(bytes: usize) -> ToolResult {
        ToolResult {
            id: "c1".to_owned(),
            name: "read_file".to_owned(),
            output: "x".repeat(bytes),
            is_error: false,
            error_kind: None,
            duration_ms: 0.0,
            offloaded: None,
            structured: None,
            metadata: Default::default(),
        }
    }

    #[test]
    fn a_batch_is_running_then_completed_and_only_its_session_sees_it() {
        let recent = RecentBatches::default();
        recent.started(&record("b1"));
        assert_eq!(
            recent.get("s1", "b1").map(|r| r.status),
            Some(BatchStatus::Running)
        );
        assert!(recent.get("s2", "b1").is_none());
        recent.completed("b1", vec![result(10)].into());
        let done = recent.get("s1", "b1").expect("remembered");
        assert_eq!(done.status, BatchStatus::Completed);
        assert_eq!(done.results.map(|r| r.len()), Some(1));
    }

    #[tokio::test]
    async fn a_watch_sees_a_running_batch_complete_and_a_completed_one_at_once() {
        let recent = RecentBatches::default();
        recent.started(&record("b1"));
        assert!(recent.watch("s2", "b1").is_none(), "another session's");
        let mut running = recent.watch("s1", "b1").expect("remembered");
        assert!(running.borrow().is_none());
        recent.completed("b1", vec![result(3)].into());
        let done = running.wait_for(Option::is_some).await.expect("completed");
        assert_eq!(done.as_deref().map(<[ToolResult]>::len), Some(1));
        let later = recent.watch("s1", "b1").expect("still kept");
        assert!(later.borrow().is_some());
        assert!(recent.watch("s1", "unknown").is_none());
    }

    #[test]
    fn the_oldest_completed_batches_leave_first_when_over_budget() {
        let recent = RecentBatches::default();
        // Four fit but for their fixed costs: the fourth pushes the first out.
        let big = RESULT_BYTES / 4;
        for id in ["b1", "b2", "b3", "b4"] {
            recent.started(&record(id));
            recent.completed(id, vec![result(big)].into());
        }
        recent.started(&record("running"));
        assert!(recent.get("s1", "b1").is_none(), "the oldest is evicted");
        for id in ["b2", "b3", "b4", "running"] {
            assert!(recent.get("s1", id).is_some(), "{id} is kept");
        }
    }
}
