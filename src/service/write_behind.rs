//! Writes a batch's answer does not wait for: each session's state after its batches, and the
//! record of a completed batch that has no idempotency key.
//!
//! The audit rows are what must be durable before a result is returned (DESIGN §6); the state
//! a session carries on with after a restart and the bookkeeping of a finished batch are not.
//! Writing them on the request path cost a batch two further commits, so a task writes them
//! behind, gathering for [`LINGER`] after the first: state saves are coalesced per session
//! (the latest snapshot wins; it is taken when written, not when queued), and batch records
//! go out together. Graceful shutdown
//! flushes what is queued before the store closes; a `kill -9` can lose the state of the last
//! batches (the audit log has every call) and their batch records.
//!
//! Backpressure: the queue to the task holds at most [`QUEUE_ITEMS`]; a batch finishing while
//! it is full waits (before its answer) until the task has taken some, so a flood of batches
//! faster than the store slows to the store's pace instead of growing memory without bound.
//! What is in memory is at most the queue plus one gathering ([`MAX_ITEMS`]) being written.
//!
//! Deliberately absent: retries beyond logging (a store that refuses a state save refuses the
//! next batch's audit rows too, and that is where it is reported).

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, oneshot};

use super::sessions::snapshot_json;
use crate::session::SessionState;
use crate::store::{BatchRecord, BehindWrites, Store, StoreError};

/// How long the task gathers writes after the first one arrives: a session running batch
/// after batch has its state saved once per interval, not once per batch.
const LINGER: Duration = Duration::from_millis(20);

/// Writes gathered at most before they go out.
const MAX_ITEMS: usize = 1024;

/// Writes queued at most while the task is busy; past it a caller waits for room.
const QUEUE_ITEMS: usize = 4096;

/// Where the writes go: the store, or a test's stand-in.
#[async_trait::async_trait]
pub(super) trait BehindSink: Send + Sync + 'static {
    /// Writes `writes`; the failures come back ([`crate::store::BatchStore::write_behind`]).
    async fn write(&self, writes: &BehindWrites) -> Vec<StoreError>;
}

#[async_trait::async_trait]
impl BehindSink for Arc<dyn Store> {
    async fn write(&self, writes: &BehindWrites) -> Vec<StoreError> {
        self.write_behind(writes).await
    }
}

enum Item {
    State(Arc<SessionState>),
    Batch(BatchRecord),
    /// Answer once everything queued before it is written.
    Flush(oneshot::Sender<()>),
}

/// The handle to the write-behind task.
pub struct WriteBehind {
    /// The task ends when this closes (the service is dropped), after writing what is queued.
    sender: mpsc::Sender<Item>,
}

impl WriteBehind {
    /// Starts the task. Must be called inside a Tokio runtime.
    pub fn spawn(store: Arc<dyn Store>) -> WriteBehind {
        WriteBehind::spawn_with(store, QUEUE_ITEMS)
    }

    /// Starts the task writing to `sink`, queueing at most `queue` writes.
    fn spawn_with(sink: impl BehindSink, queue: usize) -> WriteBehind {
        let (sender, receiver) = mpsc::channel(queue);
        tokio::spawn(run(sink, receiver));
        WriteBehind { sender }
    }

    /// Saves the session's state soon (its state as it is then); waits while the queue is
    /// full.
    pub async fn save_state(&self, session: &Arc<SessionState>) {
        self.send(Item::State(session.clone())).await;
    }

    /// Records a completed batch soon; waits while the queue is full.
    pub async fn record_batch(&self, record: BatchRecord) {
        self.send(Item::Batch(record)).await;
    }

    /// Waits until everything queued so far is written.
    pub async fn flush(&self) {
        let (done, flushed) = oneshot::channel();
        self.send(Item::Flush(done)).await;
        let _ = flushed.await;
    }

    async fn send(&self, item: Item) {
        // The task ends only when this handle is dropped, so this cannot fail while in use.
        if self.sender.send(item).await.is_err() {
            tracing::error!("the write-behind task has stopped; a write was dropped");
        }
    }
}

async fn run(sink: impl BehindSink, mut receiver: mpsc::Receiver<Item>) {
    let mut items = Vec::new();
    let mut states: HashMap<Arc<str>, Arc<SessionState>> = HashMap::new();
    let mut batches = Vec::new();
    let mut flushes = Vec::new();
    while receiver.recv_many(&mut items, MAX_ITEMS).await > 0 {
        tokio::time::sleep(LINGER).await;
        while items.len() < MAX_ITEMS
            && let Ok(item) = receiver.try_recv()
        {
            items.push(item);
        }
        for item in items.drain(..) {
            match item {
                Item::State(session) => {
                    states.insert(session.shared_id(), session);
                }
                Item::Batch(record) => batches.push(record),
                Item::Flush(done) => flushes.push(done),
            }
        }
        // One write for the lot: the store may let it ride along with its next commit.
        let writes = BehindWrites {
            batches: std::mem::take(&mut batches),
            states: states
                .drain()
                .map(|(id, session)| (id.to_string(), snapshot_json(&session)))
                .collect(),
        };
        if !writes.is_empty() {
            for err in sink.write(&writes).await {
                tracing::error!(error = %err, "a write behind a batch's answer failed");
            }
        }
        for done in flushes.drain(..) {
            let _ = done.send(());
        }
    }
}

#[cfg(test)]
#[path = "write_behind_tests.rs"]
mod tests;
