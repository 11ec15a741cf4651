//! The event persister: drains the bus's sink and appends events to the store in batches,
//! so publishing never waits for a disk.
//!
//! It takes whatever has queued up (at most [`MAX_BATCH`]), waiting [`LINGER`] after the first
//! event for the rest of its burst (a call publishes three or four events within
//! microseconds), so the batch size grows with the load and one commit carries a burst. After each write it publishes
//! the highest stored seq, which event subscriptions wait on before replaying.
//!
//! On a store that numbers events (several processes write to it), the store numbers them
//! (`append_events_numbered`) and the relay (`relay.rs`), not the persister, reports what is
//! stored.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{mpsc, watch};
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::event::Event;
use crate::store::Store;

/// Events written per transaction at most. Large, so the persister keeps up under load: each
/// write waits for its commit (up to the writer's linger), so the most it can store is about
/// this many events per commit. At 1 024 that was ~200 000 events/s, below what 100-call
/// batches publish at 50 000 calls/s (three events a call), and the sink's backlog (memory)
/// grew for as long as the load lasted.
const MAX_BATCH: usize = 16 * 1024;

/// How long a write waits for more events after the first arrives. A subscription that starts
/// waits for the persister to catch up, so this bounds what that wait adds. (20 ms was tried:
/// fewer WAL pages per event, but more than twice the RSS under load; see `docs/performance.md`,
/// "Lingers of 20 ms (tried, dropped)".)
const LINGER: Duration = Duration::from_millis(5);

/// Pause before retrying a failed write (the events are kept and retried).
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// A running persister.
pub struct EventPersister {
    task: JoinHandle<()>,
    stop: CancellationToken,
}

impl EventPersister {
    /// Starts draining `events` into `store`; `stored` receives the highest stored seq. With
    /// `None` the store numbers the events (a bus numbered by the store feeds this persister).
    pub fn spawn(
        store: Arc<dyn Store>,
        events: mpsc::UnboundedReceiver<Arc<Event>>,
        stored: Option<watch::Sender<u64>>,
    ) -> EventPersister {
        let stop = CancellationToken::new();
        let task = tokio::spawn(run(store, events, stored, stop.clone()));
        EventPersister { task, stop }
    }

    /// Writes what is queued, then stops.
    pub async fn flush_and_stop(self) {
        self.stop.cancel();
        if let Err(err) = self.task.await {
            tracing::error!(error = %err, "event persister failed");
        }
    }
}

async fn run(
    store: Arc<dyn Store>,
    mut events: mpsc::UnboundedReceiver<Arc<Event>>,
    stored: Option<watch::Sender<u64>>,
    stop: CancellationToken,
) {
    let mut batch = Vec::with_capacity(MAX_BATCH);
    loop {
        let received = tokio::select! {
            biased;
            count = events.recv_many(&mut batch, MAX_BATCH) => count,
            () = stop.cancelled() => {
                // Shutdown: take everything already queued, write it, and end.
                while let Ok(event) = events.try_recv() {
                    batch.push(event);
                }
                write(&*store, &mut batch, &stored, 3, &stop).await;
                return;
            }
        };
        if received == 0 {
            return;
        }
        // Gather a little longer (unless stopping): a burst of events becomes one write.
        if batch.len() < MAX_BATCH {
            tokio::select! {
                () = tokio::time::sleep(LINGER) => {}
                () = stop.cancelled() => {}
            }
            while batch.len() < MAX_BATCH
                && let Ok(event) = events.try_recv()
            {
                batch.push(event);
            }
        }
        write(&*store, &mut batch, &stored, usize::MAX, &stop).await;
    }
}

/// Appends `batch`, retrying up to `attempts` times; a seq already stored (a retry whose first
/// attempt had in fact committed) counts as written. Events the store numbers have no seq to
/// recognise: a retry after a failure that had in fact committed stores them twice.
async fn write(
    store: &dyn Store,
    batch: &mut Vec<Arc<Event>>,
    stored: &Option<watch::Sender<u64>>,
    attempts: usize,
    stop: &CancellationToken,
) {
    // A store that keeps failing must not hold shutdown up: once stopping, three tries.
    const STOPPING_ATTEMPTS: usize = 3;
    if batch.is_empty() {
        return;
    }
    for attempt in 1..=attempts {
        let appended = match stored {
            Some(_) => store.append_events(batch).await,
            None => store.append_events_numbered(batch).await.map(|_| ()),
        };
        match appended {
            Ok(()) => break,
            Err(crate::store::StoreError::Conflict(_)) if attempt > 1 => break,
            Err(err) => {
                tracing::warn!(error = %err, events = batch.len(), attempt, "storing events failed");
                if attempt == attempts || (stop.is_cancelled() && attempt >= STOPPING_ATTEMPTS) {
                    tracing::error!(events = batch.len(), "events dropped from the store");
                    break;
                }
                tokio::time::sleep(RETRY_PAUSE).await;
            }
        }
    }
    if let (Some(stored), Some(last)) = (stored, batch.last()) {
        stored.send_replace(last.seq);
    }
    batch.clear();
}
