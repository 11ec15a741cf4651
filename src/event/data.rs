//! An event's `data`: JSON rendered once, when the event is drafted.
//!
//! Every event is serialised at least once (into the store), and most only that once; a
//! subscriber's frame and the store's row then embed the same text. Drafting renders the data
//! straight from whatever the publisher holds (a small struct, a borrowed input), so a call's
//! events build no `Value` trees to serialise later and free afterwards, which on a loaded
//! daemon was a tenth of its dispatch threads' time (`docs/performance.md`, "Event data rendered once").

use std::fmt;

use serde::{Deserialize, Deserializer, Serialize, Serializer};
use serde_json::Value;
use serde_json::value::RawValue;

/// Valid JSON text, serialised verbatim.
#[derive(Clone)]
pub struct EventData(Box<RawValue>);

impl EventData {
    /// `data` rendered as JSON. Nothing toold publishes can fail to serialise (no maps with
    /// non-string keys, no failing `Serialize` impls); if something did, the event still goes
    /// out, with `null` data and the failure logged.
    pub fn of<T: Serialize + ?Sized>(data: &T) -> EventData {
        match serde_json::value::to_raw_value(data) {
            Ok(raw) => EventData(raw),
            Err(err) => {
                tracing::error!(error = %err, "event data cannot be serialised; sent as null");
                EventData::null()
            }
        }
    }

    pub fn null() -> EventData {
        EventData::of(&())
    }

    /// `{}`.
    pub fn empty_object() -> EventData {
        EventData::of(&serde_json::Map::new())
    }

    /// Stored JSON text, checked.
    pub fn from_json(text: String) -> Result<EventData, serde_json::Error> {
        RawValue::from_string(text).map(EventData)
    }

    /// The JSON text.
    pub fn json(&self) -> &str {
        self.0.get()
    }

    /// The data parsed, for a reader that looks inside it.
    pub fn value(&self) -> Value {
        // The text is JSON (it was rendered or checked when this was made).
        serde_json::from_str(self.json()).unwrap_or(Value::Null)
    }
}

impl Default for EventData {
    fn default() -> Self {
        EventData::null()
    }
}

impl From<Value> for EventData {
    fn from(value: Value) -> Self {
        EventData::of(&value)
    }
}

impl PartialEq for EventData {
    fn eq(&self, other: &Self) -> bool {
        self.json() == other.json() || self.value() == other.value()
    }
}

impl PartialEq<Value> for EventData {
    fn eq(&self, other: &Value) -> bool {
        self.value() == *other
    }
}

impl fmt::Debug for EventData {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.json())
    }
}

impl Serialize for EventData {
    fn serialize<S: Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        self.0.serialize(serializer)
    }
}

impl<'de> Deserialize<'de> for EventData {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        Box::<RawValue>::deserialize(deserializer).map(EventData)
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn data_is_embedded_verbatim_and_reads_back() {
        #[derive(Serialize)]
        struct Post {
            duration_ms: f64,
            offloaded: Option<String>,
            output_chars: usize,
        }
        let data = EventData::of(&Post {
            duration_ms: 1.5,
            offloaded: None,
            output_chars: 4573,
        });
        let expected = json!({"duration_ms": 1.5, "offloaded": null, "output_chars": 4573});
        // The same text a `Value` renders (its keys sorted), so stored rows read the same.
        assert_eq!(data.json(), expected.to_string());
        assert_eq!(data, expected);
        // Inside an event it is embedded as it is, and reads back from the event's JSON.
        let event = crate::event::EventBus::new(1).publish(
            crate::event::EventDraft::new(crate::event::EventType::ToolPost, "s")
                .rendered(data.clone()),
        );
        let text = serde_json::to_string(&*event).unwrap();
        assert!(text.contains(&format!(r#""data":{expected}"#)), "{text}");
        let back: crate::event::Event = serde_json::from_str(&text).unwrap();
        assert_eq!(back.data, data);
        assert_eq!(EventData::null().json(), "null");
        assert_eq!(EventData::empty_object().json(), "{}");
    }

    #[test]
    fn stored_text_is_checked_and_round_trips() {
        let stored = EventData::from_json(r#"{"index":0}"#.to_owned()).unwrap();
        assert_eq!(stored.value(), json!({"index": 0}));
        assert!(EventData::from_json("{not json".to_owned()).is_err());
        assert!(EventData::from_json(String::new()).is_err());
        let back: EventData = serde_json::from_str(r#" {"a": [1, 2]} "#).unwrap();
        assert_eq!(back, json!({"a": [1, 2]}));
        // Equal data written with different spacing is equal.
        assert_eq!(back, EventData::of(&json!({"a": [1, 2]})));
    }
}
