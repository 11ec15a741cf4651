//! Lifecycle events and the bus that fans them out.
//!
//! Publishing is cheap and never blocks: the bus is a bounded broadcast channel, and a
//! subscriber that falls behind loses the oldest events (and learns it from `Lagged`) instead of
//! slowing dispatch. Persisting events for replay needs every event, so a bus can also feed a
//! *sink*: an unbounded, non-lossy channel a persister drains in batches. Sending into it never
//! waits either; if the store stalls, the sink's backlog grows instead of dispatch slowing.
//!
//! Who numbers events: a bus made with [`EventBus::continuing`] numbers them itself (one
//! daemon on its own store). A bus made with [`EventBus::numbered_by_store`] (several processes
//! writing to one store: a Postgres fleet, or `toold mcp` processes and a `toold serve` on one
//! SQLite file; the daemon uses it whenever the store says `numbers_events`) only feeds its
//! sink: the store numbers events as it commits them, and the
//! daemon's relay reads them back (its own and other daemons') and hands them to
//! [`EventBus::relay`], which sends them to subscribers in seq order. Subscribers see the
//! same thing either way.

use std::fmt;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::sync::{broadcast, mpsc};

mod data;

pub use data::EventData;

/// The event types of DESIGN §4.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum EventType {
    #[serde(rename = "session:start")]
    SessionStart,
    #[serde(rename = "session:end")]
    SessionEnd,
    #[serde(rename = "batch:start")]
    BatchStart,
    #[serde(rename = "batch:end")]
    BatchEnd,
    #[serde(rename = "tool:queued")]
    ToolQueued,
    #[serde(rename = "tool:pre")]
    ToolPre,
    #[serde(rename = "tool:progress")]
    ToolProgress,
    #[serde(rename = "tool:post")]
    ToolPost,
    #[serde(rename = "tool:error")]
    ToolError,
    #[serde(rename = "permission:ask")]
    PermissionAsk,
    #[serde(rename = "permission:decision")]
    PermissionDecision,
    /// An environment's image being pulled (DESIGN §12), with its progress.
    #[serde(rename = "image:pull")]
    ImagePull,
}

impl EventType {
    pub const ALL: [EventType; 12] = [
        EventType::SessionStart,
        EventType::SessionEnd,
        EventType::BatchStart,
        EventType::BatchEnd,
        EventType::ToolQueued,
        EventType::ToolPre,
        EventType::ToolProgress,
        EventType::ToolPost,
        EventType::ToolError,
        EventType::PermissionAsk,
        EventType::PermissionDecision,
        EventType::ImagePull,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            EventType::SessionStart => "session:start",
            EventType::SessionEnd => "session:end",
            EventType::BatchStart => "batch:start",
            EventType::BatchEnd => "batch:end",
            EventType::ToolQueued => "tool:queued",
            EventType::ToolPre => "tool:pre",
            EventType::ToolProgress => "tool:progress",
            EventType::ToolPost => "tool:post",
            EventType::ToolError => "tool:error",
            EventType::PermissionAsk => "permission:ask",
            EventType::PermissionDecision => "permission:decision",
            EventType::ImagePull => "image:pull",
        }
    }

    pub fn parse(text: &str) -> Option<EventType> {
        EventType::ALL.into_iter().find(|t| t.as_str() == text)
    }
}

impl fmt::Display for EventType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An event as subscribers see it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    /// Monotonic per bus.
    pub seq: u64,
    /// Serialised as RFC 3339, UTC, millisecond precision. Kept as a time so publishing
    /// does not pay for formatting that only some subscribers need.
    #[serde(with = "rfc3339")]
    pub ts: SystemTime,
    #[serde(rename = "type")]
    pub event_type: EventType,
    pub session_id: Arc<str>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub batch_id: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub call_id: Option<Arc<str>>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tool: Option<Arc<str>>,
    /// The principal whose request caused the event (DESIGN §10), when one did; absent on
    /// events stored before principals were recorded.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub actor: Option<Arc<str>>,
    pub data: EventData,
}

impl Event {
    /// The timestamp as it is serialised.
    pub fn ts_rfc3339(&self) -> String {
        humantime::format_rfc3339_millis(self.ts).to_string()
    }
}

mod rfc3339 {
    use std::time::SystemTime;

    use serde::{Deserialize, Deserializer, Serializer, de::Error};

    pub fn serialize<S: Serializer>(ts: &SystemTime, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.collect_str(&humantime::format_rfc3339_millis(*ts))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<SystemTime, D::Error> {
        let text = String::deserialize(deserializer)?;
        humantime::parse_rfc3339_weak(&text).map_err(D::Error::custom)
    }
}

/// An event before the bus numbers and stamps it.
#[derive(Clone, Debug)]
pub struct EventDraft {
    pub event_type: EventType,
    pub session_id: Arc<str>,
    pub batch_id: Option<Arc<str>>,
    pub call_id: Option<Arc<str>>,
    pub tool: Option<Arc<str>>,
    pub actor: Option<Arc<str>>,
    pub data: EventData,
}

impl EventDraft {
    pub fn new(event_type: EventType, session_id: impl Into<Arc<str>>) -> EventDraft {
        EventDraft {
            event_type,
            session_id: session_id.into(),
            batch_id: None,
            call_id: None,
            tool: None,
            actor: None,
            data: EventData::null(),
        }
    }

    /// Who caused the event: a principal's name.
    pub fn actor(mut self, actor: impl Into<Arc<str>>) -> EventDraft {
        self.actor = Some(actor.into());
        self
    }

    /// [`EventDraft::actor`] when there is one.
    pub fn acted_by(mut self, actor: Option<Arc<str>>) -> EventDraft {
        self.actor = actor;
        self
    }

    pub fn batch(mut self, batch_id: impl Into<Arc<str>>) -> EventDraft {
        self.batch_id = Some(batch_id.into());
        self
    }

    pub fn call(mut self, call_id: impl Into<Arc<str>>, tool: impl Into<Arc<str>>) -> EventDraft {
        self.call_id = Some(call_id.into());
        self.tool = Some(tool.into());
        self
    }

    pub fn data(mut self, data: Value) -> EventDraft {
        self.data = EventData::from(data);
        self
    }

    /// [`EventDraft::data`] already rendered ([`EventData::of`] renders it from a struct or a
    /// borrowed value, with no `Value` built on the way).
    pub fn rendered(mut self, data: EventData) -> EventDraft {
        self.data = data;
        self
    }
}

/// Fans events out to every subscriber without ever waiting for one.
#[derive(Clone)]
pub struct EventBus {
    sender: broadcast::Sender<Arc<Event>>,
    /// The next seq. Numbering and sending happen under this lock so subscribers see seqs in
    /// increasing order even when several tasks publish at once (resume-by-seq relies on it).
    /// It is held for a counter bump and a non-blocking send, never across an await.
    next_seq: Arc<Mutex<u64>>,
    /// Receives every event, in seq order (sent under the seq lock); see the module header.
    sink: Option<mpsc::UnboundedSender<Arc<Event>>>,
    /// The store numbers events: `publish` only feeds the sink, `relay` feeds subscribers.
    numbered_by_store: bool,
}

impl EventBus {
    /// `capacity` events are buffered per subscriber before the oldest are dropped for it.
    pub fn new(capacity: usize) -> EventBus {
        EventBus::continuing(capacity, 0)
    }

    /// A bus whose first event is `last_seq + 1` (a daemon continuing its stored events).
    pub fn continuing(capacity: usize, last_seq: u64) -> EventBus {
        let (sender, _) = broadcast::channel(capacity.max(1));
        EventBus {
            sender,
            next_seq: Arc::new(Mutex::new(last_seq.saturating_add(1))),
            sink: None,
            numbered_by_store: false,
        }
    }

    /// A bus for a store that numbers events (see the module header); subscribers get the
    /// events relayed after `last_seq`.
    pub fn numbered_by_store(capacity: usize, last_seq: u64) -> EventBus {
        EventBus {
            numbered_by_store: true,
            ..EventBus::continuing(capacity, last_seq)
        }
    }

    /// Whether the store numbers this bus's events.
    pub fn is_numbered_by_store(&self) -> bool {
        self.numbered_by_store
    }

    /// Sends an event the store numbered to subscribers; one at or below the last relayed seq
    /// is ignored, so subscribers see each seq once, in increasing order.
    pub fn relay(&self, event: Arc<Event>) {
        let mut next_seq = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        if event.seq < *next_seq {
            return;
        }
        *next_seq = event.seq.saturating_add(1);
        // An error only means nobody is subscribed right now.
        let _ = self.sender.send(event);
    }

    /// The same bus, also feeding every event to the returned receiver (never lossy).
    pub fn with_sink(mut self) -> (EventBus, mpsc::UnboundedReceiver<Arc<Event>>) {
        let (sink, receiver) = mpsc::unbounded_channel();
        self.sink = Some(sink);
        (self, receiver)
    }

    /// Subscribes, and returns the seq of the last event published before the subscription:
    /// every later event reaches the receiver, no earlier one does (resume without gaps).
    pub fn subscribe_after(&self) -> (broadcast::Receiver<Arc<Event>>, u64) {
        let next_seq = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let receiver = self.sender.subscribe();
        (receiver, next_seq.saturating_sub(1))
    }

    /// Numbers, stamps and sends an event; returns it. Never blocks. On a bus numbered by the
    /// store the event goes to the sink only, with seq 0 until the store numbers it.
    pub fn publish(&self, draft: EventDraft) -> Arc<Event> {
        if self.numbered_by_store {
            let event = Arc::new(stamp(0, draft));
            if let Some(sink) = &self.sink {
                let _ = sink.send(event.clone());
            }
            return event;
        }
        let mut next_seq = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        let event = Arc::new(stamp(*next_seq, draft));
        *next_seq += 1;
        // An error only means nobody is subscribed right now, which is fine.
        let _ = self.sender.send(event.clone());
        if let Some(sink) = &self.sink {
            // An error means the persister has stopped (shutdown); nothing is left to keep.
            let _ = sink.send(event.clone());
        }
        drop(next_seq);
        event
    }

    /// Subscribes; every event sent after this reaches the receiver.
    pub fn subscribe(&self) -> broadcast::Receiver<Arc<Event>> {
        // Under the seq lock, like `subscribe_after`: a relay's `skip_unwatched` then either
        // sees this receiver or happened entirely before it.
        let _next_seq = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        self.sender.subscribe()
    }

    /// Whether anyone is subscribed now (a hint: [`EventBus::skip_unwatched`] decides).
    pub fn is_watched(&self) -> bool {
        self.sender.receiver_count() > 0
    }

    /// On a bus the store numbers: when nobody is subscribed, takes every event up to `seq`
    /// (which the store has committed) as relayed without reading it, and returns `true`;
    /// with a subscriber, changes nothing and returns `false` (the relay reads and relays as
    /// usual). Checked and done under the seq lock that every subscription takes, so an event
    /// is skipped only if no subscriber can ever be owed it: a later subscriber's position
    /// starts after `seq`.
    pub fn skip_unwatched(&self, seq: u64) -> bool {
        let mut next_seq = self.next_seq.lock().unwrap_or_else(|p| p.into_inner());
        if self.sender.receiver_count() > 0 {
            return false;
        }
        *next_seq = (*next_seq).max(seq.saturating_add(1));
        true
    }
}

/// The event a draft becomes, numbered `seq` and stamped now.
fn stamp(seq: u64, draft: EventDraft) -> Event {
    Event {
        seq,
        ts: SystemTime::now(),
        event_type: draft.event_type,
        session_id: draft.session_id,
        batch_id: draft.batch_id,
        call_id: draft.call_id,
        tool: draft.tool,
        actor: draft.actor,
        data: draft.data,
    }
}

impl Default for EventBus {
    fn default() -> Self {
        EventBus::new(4096)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn event_types_serialise_to_their_names() {
        for t in EventType::ALL {
            assert_eq!(
                serde_json::to_value(t).unwrap(),
                Value::String(t.as_str().into())
            );
            assert_eq!(EventType::parse(t.as_str()), Some(t));
        }
    }

    #[tokio::test]
    async fn events_are_numbered_in_order_and_reach_subscribers() {
        let bus = EventBus::new(8);
        let mut rx = bus.subscribe();
        let first = bus.publish(EventDraft::new(EventType::BatchStart, "s").batch("b"));
        let second = bus.publish(EventDraft::new(EventType::BatchEnd, "s").batch("b"));
        assert!(second.seq > first.seq);
        assert_eq!(rx.recv().await.unwrap().seq, first.seq);
        assert_eq!(rx.recv().await.unwrap().seq, second.seq);
        let json = serde_json::to_value(&*first).unwrap();
        assert_eq!(json["type"], "batch:start");
        assert!(json["ts"].as_str().unwrap().ends_with('Z'));
        let back: Event = serde_json::from_str(&json.to_string()).unwrap();
        assert_eq!(back.ts_rfc3339(), first.ts_rfc3339());
        assert_eq!(back.batch_id.as_deref(), Some("b"));
    }

    #[tokio::test]
    async fn a_continuing_bus_numbers_after_the_stored_seq_and_feeds_its_sink() {
        let (bus, mut sink) = EventBus::continuing(2, 41).with_sink();
        let (_live, before) = bus.subscribe_after();
        assert_eq!(before, 41);
        for _ in 0..10 {
            bus.publish(EventDraft::new(EventType::ToolProgress, "s"));
        }
        let seqs: Vec<u64> = (0..10).map(|_| sink.try_recv().unwrap().seq).collect();
        assert_eq!(seqs, (42..52).collect::<Vec<_>>());
        assert_eq!(bus.subscribe_after().1, 51);
    }

    #[tokio::test]
    async fn a_bus_numbered_by_store_feeds_its_sink_and_relays_in_seq_order() {
        let (bus, mut sink) = EventBus::numbered_by_store(8, 10).with_sink();
        let (mut live, before) = bus.subscribe_after();
        assert_eq!(before, 10);
        bus.publish(EventDraft::new(EventType::BatchStart, "s"));
        assert_eq!(
            sink.try_recv().unwrap().seq,
            0,
            "numbered by the store later"
        );
        assert!(
            live.try_recv().is_err(),
            "not sent before the store numbered it"
        );
        let stored = |seq| Arc::new(stamp(seq, EventDraft::new(EventType::BatchStart, "s")));
        for seq in [11, 13, 12, 13, 14] {
            bus.relay(stored(seq));
        }
        let seqs: Vec<u64> = std::iter::from_fn(|| live.try_recv().ok().map(|e| e.seq)).collect();
        assert_eq!(seqs, [11, 13, 14]);
        assert_eq!(bus.subscribe_after().1, 14);
    }

    #[test]
    fn with_nobody_subscribed_stored_events_are_skipped_and_a_subscriber_is_owed_what_follows() {
        let bus = EventBus::numbered_by_store(8, 10);
        assert!(!bus.is_watched());
        assert!(bus.skip_unwatched(20), "nobody is owed 11..=20");
        let (mut live, position) = bus.subscribe_after();
        assert_eq!(position, 20, "a subscriber starts after what was skipped");
        assert!(bus.is_watched());
        assert!(!bus.skip_unwatched(25), "a subscriber is owed 21..=25");
        assert_eq!(bus.subscribe_after().1, 20, "nothing skipped while watched");
        let stored = |seq| Arc::new(stamp(seq, EventDraft::new(EventType::BatchStart, "s")));
        for seq in [18, 21, 22] {
            bus.relay(stored(seq));
        }
        let seqs: Vec<u64> = std::iter::from_fn(|| live.try_recv().ok().map(|e| e.seq)).collect();
        assert_eq!(
            seqs,
            [21, 22],
            "skipped seqs are never sent, later ones are"
        );
        drop(live);
        assert!(bus.skip_unwatched(30));
        assert!(bus.skip_unwatched(26), "an older seq moves nothing back");
        assert_eq!(bus.subscribe_after().1, 30);
    }

    #[test]
    fn a_slow_subscriber_never_blocks_publishing() {
        let bus = EventBus::new(2);
        let mut rx = bus.subscribe();
        for _ in 0..100 {
            bus.publish(EventDraft::new(EventType::ToolProgress, "s"));
        }
        assert!(matches!(
            rx.try_recv(),
            Err(broadcast::error::TryRecvError::Lagged(98))
        ));
    }
}
