//! The event relay of a daemon sharing its store: reads the events the store numbered (this
//! daemon's and every other's) in seq order and hands them to the bus's subscribers.
//!
//! It reads "after the last seq relayed" whenever the store's wake-ups say events may have
//! been stored (LISTEN/NOTIFY on Postgres), and every [`POLL`] in case a wake-up was lost.
//! The store commits events in seq order (see `Store::append_events_numbered`), so reading
//! after the last seq relayed misses none, and each subscriber sees every event once, in
//! order, whichever daemon published it. After each page it reports the highest seq relayed,
//! which a new subscription waits for before replaying, exactly as it waits for the persister
//! of a daemon on its own store.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::watch;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::event::EventBus;
use crate::store::{EventFilter, Store};

/// Read even without a wake-up this often (a notification lost with a connection).
const POLL: Duration = Duration::from_secs(1);

/// Events read per query.
const PAGE: u32 = 1000;

/// Pause after a failed read.
const RETRY_PAUSE: Duration = Duration::from_millis(200);

/// Relays the events stored after `last_seq` to `bus` until `stop`; `relayed` gets the
/// highest seq relayed.
pub fn spawn(
    store: Arc<dyn Store>,
    bus: EventBus,
    last_seq: u64,
    relayed: watch::Sender<u64>,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        let mut wakeups = store.event_wakeups();
        let mut last = last_seq;
        loop {
            match store.read_events(&EventFilter::default(), last, PAGE).await {
                Ok(page) => {
                    let full = page.len() == PAGE as usize;
                    for event in page {
                        last = event.seq;
                        bus.relay(Arc::new(event));
                    }
                    relayed.send_replace(last);
                    if full {
                        continue;
                    }
                }
                Err(err) => {
                    tracing::warn!(error = %err, after = last, "relaying events failed");
                    tokio::time::sleep(RETRY_PAUSE).await;
                }
            }
            let woken = async {
                if let Some(wakeups) = &mut wakeups
                    && wakeups.changed().await.is_ok()
                {
                    return;
                }
                // No wake-ups (or the listener is gone): the poll alone drives the relay.
                std::future::pending::<()>().await;
            };
            tokio::select! {
                () = woken => {}
                () = tokio::time::sleep(POLL) => {}
                () = stop.cancelled() => return,
            }
        }
    })
}
