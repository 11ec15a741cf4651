//! The event relay of a daemon whose store numbers events (`numbers_events`: a store several
//! processes write to): reads the events the store numbered (this daemon's and every other's)
//! in seq order and hands them to the bus's subscribers.
//!
//! It reads "after the last seq relayed" whenever the store's wake-ups say events may have
//! been stored (LISTEN/NOTIFY on Postgres; on SQLite, this process's own appends), and every
//! [`POLL`] in case a wake-up was lost (and, on SQLite, for the other processes' events).
//! The store commits events in seq order (see `Store::append_events_numbered`), so reading
//! after the last seq relayed misses none, and each subscriber sees every event once, in
//! order, whichever daemon published it. After each page it reports the highest seq relayed,
//! which a new subscription waits for before replaying, exactly as it waits for the persister
//! of a daemon on its own store.
//!
//! Nobody listening, nothing read (decision, 2026-11-28): while the bus has no subscriber (no
//! event stream, streamed batch or MCP approval channel open on this daemon), the relay does
//! not read the events; it takes the highest seq the store is known to hold as relayed
//! ([`EventBus::skip_unwatched`]): the NOTIFY's payload when it brings a new one, else (a poll,
//! or the listener's bump after a lost connection) `last_event_seq`. Every daemon of a fleet
//! used to read every event after every commit whether or not anyone watched it: with N
//! daemons, N queries returning every event's row and JSON for each commit of any of them,
//! however few clients watch. (On the forwarding bench's 2-daemon fleet the single call's
//! p50 moved within the run-to-run noise; the queries are what is saved.) A subscriber takes
//! the bus's position under the same lock as the skip, so it is owed exactly the events after
//! the last seq skipped, which the relay reads once it is there.

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
            if !bus.is_watched()
                && let Some(stored) = unwatched_head(&*store, wakeups.as_ref(), last).await
                && bus.skip_unwatched(stored)
            {
                last = last.max(stored);
                relayed.send_replace(last);
            } else {
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

/// The highest seq the store is known to hold: from the last wake-up when it is past `last`,
/// else read from the store; `None` when the store could not be asked (then the relay reads).
async fn unwatched_head(
    store: &dyn Store,
    wakeups: Option<&watch::Receiver<u64>>,
    last: u64,
) -> Option<u64> {
    let notified = wakeups.map_or(0, |wakeups| *wakeups.borrow());
    if notified > last {
        return Some(notified);
    }
    store.last_event_seq().await.ok()
}
