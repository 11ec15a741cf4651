//! `Subscribe`: the same filters and resume-after-seq as the SSE endpoints, and events as
//! `toold.v1.Event` (also used by `Execute`). A subscriber that falls behind gets an event of
//! type `lagged` (seq 0, `data_json` `{"resume_after": SEQ}`) and the stream ends, as in SSE.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use serde_json::json;
use tonic::{Request, Response, Status};

use super::proto;
use super::{GrpcDoor, caller, invalid, status};
use crate::event::{Event, EventType};
use crate::service::EventItem;
use crate::store::EventFilter;

pub type EventStream = Pin<Box<dyn Stream<Item = Result<proto::Event, Status>> + Send + 'static>>;

impl GrpcDoor {
    pub(super) async fn subscribe(
        &self,
        request: Request<proto::SubscribeRequest>,
    ) -> Result<Response<EventStream>, Status> {
        let caller = caller(&request)?;
        let request = request.into_inner();
        let event_type = match request.r#type.as_str() {
            "" => None,
            text => Some(
                EventType::parse(text)
                    .ok_or_else(|| invalid(format!("unknown event type \"{text}\"")))?,
            ),
        };
        let filter = EventFilter {
            session_id: Some(request.session_id).filter(|id| !id.is_empty()),
            tool: Some(request.tool).filter(|tool| !tool.is_empty()),
            event_type,
            ..EventFilter::default()
        };
        let items = self
            .service
            .subscribe_events(&caller, filter, request.after_seq, self.event_buffer)
            .await
            .map_err(status)?;
        let events = futures::stream::unfold(items, |mut items| async move {
            items.recv().await.map(|item| (item, items))
        })
        .map(|item| {
            Ok(match item {
                EventItem::Event(e) => event(&e),
                EventItem::Lagged { resume_after } => lagged(resume_after),
            })
        });
        Ok(Response::new(Box::pin(events)))
    }
}

/// An event as the wire has it: `data` as JSON text, `ts` RFC 3339.
pub fn event(event: &Event) -> proto::Event {
    let text = |value: &Option<std::sync::Arc<str>>| value.as_deref().unwrap_or("").to_owned();
    proto::Event {
        seq: event.seq,
        ts: event.ts_rfc3339(),
        r#type: event.event_type.as_str().to_owned(),
        session_id: event.session_id.to_string(),
        batch_id: text(&event.batch_id),
        call_id: text(&event.call_id),
        tool: text(&event.tool),
        data_json: event.data.json().to_owned(),
        actor: text(&event.actor),
    }
}

fn lagged(resume_after: u64) -> proto::Event {
    proto::Event {
        r#type: "lagged".to_owned(),
        data_json: json!({"resume_after": resume_after}).to_string(),
        ..proto::Event::default()
    }
}
