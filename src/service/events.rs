//! Event subscriptions: replay from the store, then live from the bus, with no gap and no
//! duplicate, and a `Lagged` item instead of ever slowing dispatch.
//!
//! A subscription takes the bus's position first (`subscribe_after`: every later event reaches
//! the live receiver), waits until the persister has stored everything up to that position,
//! replays the stored events after the client's last seen seq up to it, and then forwards live
//! events after it. A subscriber whose buffer overflows gets `Lagged` with the seq to resume
//! after, and its subscription ends; resuming replays the rest from the store.
//!
//! A subscription sees only the events of sessions its caller may read (`access`): an agent
//! (or a token scoped to one session) subscribing to every session gets its own sessions'
//! events alone, replayed or live; each session's answer is looked up once per subscription.
//!
//! A subscription to one session also gets its child sessions' events (`children`), each
//! with the child's `session_id`: live, those of any child (checked as each event arrives, so
//! a child opened after the subscription started counts); replayed, those of the children
//! known when the subscription starts.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use tokio::sync::{broadcast, mpsc, watch};

use super::access::Access;
use super::{ServiceError, ToolService};
use crate::event::Event;
use crate::permission::{Principal, Role};
use crate::store::EventFilter;

/// Events read from the store per query while replaying.
const REPLAY_PAGE: u32 = 500;

/// How long a subscription waits for the persister to catch up before replaying what is
/// stored (a stalled store must not hang subscribers forever).
const PERSIST_WAIT: Duration = Duration::from_secs(5);

/// What a subscriber receives.
#[derive(Clone, Debug, PartialEq)]
pub enum EventItem {
    Event(Arc<Event>),
    /// The subscriber fell behind; it should resubscribe after `resume_after`.
    Lagged {
        resume_after: u64,
    },
}

/// Where a subscription starts.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EventStart {
    /// Live events only.
    Live,
    /// The stored events after this seq first (a client resuming).
    After(u64),
    /// The stored events among the newest `n` seqs first (the filter may leave fewer): a
    /// dashboard opening with some history rather than an empty page.
    Recent(u64),
}

impl ToolService {
    /// Lets subscriptions wait for events to be stored before replaying (the daemon passes
    /// the persister's progress; without it, replay reads what the store has).
    pub fn set_persisted_events(&self, persisted: watch::Receiver<u64>) {
        *self
            .persisted_events
            .lock()
            .unwrap_or_else(|p| p.into_inner()) = Some(persisted);
    }

    /// Events matching `filter`, those after `after_seq` from the store first when given,
    /// then live ones. At most `buffer` items wait for the subscriber. The subscription ends
    /// when the receiver is dropped, the subscriber lags, or the daemon shuts down.
    pub async fn subscribe_events(
        self: &Arc<Self>,
        caller: &Principal,
        filter: EventFilter,
        after_seq: Option<u64>,
        buffer: usize,
    ) -> Result<mpsc::Receiver<EventItem>, ServiceError> {
        let start = after_seq.map_or(EventStart::Live, EventStart::After);
        self.subscribe_events_from(caller, filter, start, buffer)
            .await
    }

    /// [`ToolService::subscribe_events`] starting at `start`. `Recent(n)` counts the last
    /// `n` events of the daemon; an agent gets only those of its own sessions among them.
    pub async fn subscribe_events_from(
        self: &Arc<Self>,
        caller: &Principal,
        filter: EventFilter,
        start: EventStart,
        buffer: usize,
    ) -> Result<mpsc::Receiver<EventItem>, ServiceError> {
        let mut filter = filter;
        if let Some(session_id) = &filter.session_id {
            self.authorize(caller, session_id, Access::Read).await?;
            self.ensure_session_known(session_id, super::Closed::Readable)
                .await?;
            filter.also_sessions = self.children.below(session_id);
        }
        let visible = Visible::to(caller);
        let (live, published) = self.events.subscribe_after();
        let after_seq = match start {
            EventStart::Live => None,
            EventStart::After(seq) => Some(seq),
            EventStart::Recent(count) => Some(published.saturating_sub(count)),
        };
        let (sender, receiver) = mpsc::channel(buffer.max(1));
        let service = self.clone();
        // Counted before the answer goes back, so a subscriber is in the gauge once it has its
        // stream; the task drops the guard when the subscription ends.
        let subscriber = crate::telemetry::event_subscriber();
        tokio::spawn(async move {
            let _subscriber = subscriber;
            let stopping = service.stopping.clone();
            tokio::select! {
                () = service.feed(filter, visible, after_seq, live, published, &sender) => {}
                () = sender.closed() => {}
                () = stopping.cancelled() => {}
            }
        });
        Ok(receiver)
    }

    async fn feed(
        &self,
        filter: EventFilter,
        mut visible: Visible,
        after_seq: Option<u64>,
        mut live: broadcast::Receiver<Arc<Event>>,
        published: u64,
        sender: &mpsc::Sender<EventItem>,
    ) {
        let mut last = published;
        if let Some(after) = after_seq {
            last = last.max(after);
            if self
                .replay(&filter, &mut visible, after, published, sender)
                .await
                .is_err()
            {
                return;
            }
        }
        loop {
            match live.recv().await {
                Ok(event) if event.seq <= last => {}
                Ok(event) => {
                    last = event.seq;
                    if self.relays(&filter, &event)
                        && visible.allows(self, &event).await
                        && sender.send(EventItem::Event(event)).await.is_err()
                    {
                        return;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(_)) => {
                    crate::telemetry::record_event_lag();
                    let _ = sender.send(EventItem::Lagged { resume_after: last }).await;
                    return;
                }
                Err(broadcast::error::RecvError::Closed) => return,
            }
        }
    }

    /// Sends the stored events in `(after, until]`; `Err` when the subscriber is gone or the
    /// store failed (then the subscriber gets `Lagged` at the last seq it received).
    async fn replay(
        &self,
        filter: &EventFilter,
        visible: &mut Visible,
        after: u64,
        until: u64,
        sender: &mpsc::Sender<EventItem>,
    ) -> Result<(), ()> {
        self.wait_until_persisted(until).await;
        let mut cursor = after;
        while cursor < until {
            let page = match self.store.read_events(filter, cursor, REPLAY_PAGE).await {
                Ok(page) => page,
                Err(err) => {
                    tracing::warn!(error = %err, "event replay failed");
                    crate::telemetry::record_event_lag();
                    let _ = sender
                        .send(EventItem::Lagged {
                            resume_after: cursor,
                        })
                        .await;
                    return Err(());
                }
            };
            let full = page.len() == REPLAY_PAGE as usize;
            for event in page {
                if event.seq > until {
                    return Ok(());
                }
                cursor = event.seq;
                if !visible.allows(self, &event).await {
                    continue;
                }
                sender
                    .send(EventItem::Event(Arc::new(event)))
                    .await
                    .map_err(|_| ())?;
            }
            if !full {
                break;
            }
        }
        Ok(())
    }

    /// Whether a live `event` matches `filter`, a child session's as its parent's.
    fn relays(&self, filter: &EventFilter, event: &Event) -> bool {
        if filter.matches(event) {
            return true;
        }
        filter.session_id.as_deref().is_some_and(|parent| {
            filter.matches_besides_session(event)
                && self.children.is_below(&event.session_id, parent)
        })
    }

    async fn wait_until_persisted(&self, seq: u64) {
        let persisted = self
            .persisted_events
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        if let Some(mut persisted) = persisted {
            let caught_up = persisted.wait_for(|stored| *stored >= seq);
            if tokio::time::timeout(PERSIST_WAIT, caught_up).await.is_err() {
                tracing::warn!(seq, "events not yet stored; replaying what is");
            }
        }
    }
}

/// Which sessions' events a subscriber may see: every session's, or (an agent) its own,
/// each session's answer remembered for the subscription's life (a session's owner never
/// changes).
enum Visible {
    All,
    OwnedBy {
        caller: Principal,
        sessions: HashMap<Arc<str>, bool>,
    },
}

impl Visible {
    fn to(caller: &Principal) -> Visible {
        match caller.role {
            Role::Admin | Role::Observer if caller.session_scope.is_none() => Visible::All,
            Role::Admin | Role::Observer | Role::Agent => Visible::OwnedBy {
                caller: caller.clone(),
                sessions: HashMap::new(),
            },
        }
    }

    async fn allows(&mut self, service: &ToolService, event: &Event) -> bool {
        let Visible::OwnedBy { caller, sessions } = self else {
            return true;
        };
        if let Some(known) = sessions.get(&event.session_id) {
            return *known;
        }
        match service
            .authorize(caller, &event.session_id, Access::Read)
            .await
        {
            Ok(()) => {
                sessions.insert(event.session_id.clone(), true);
                true
            }
            // Not remembered when the store failed: the next event asks again.
            Err(err) if err.code == super::ErrorCode::NotFound => {
                sessions.insert(event.session_id.clone(), false);
                false
            }
            Err(_) => false,
        }
    }
}
