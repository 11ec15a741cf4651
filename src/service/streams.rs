//! Streamed batches: [`ToolService::execute_stream`] runs a batch whose results go out one by
//! one in request order as they are yielded, with either its calls' progress (the HTTP door's
//! SSE answer) or every event the batch publishes (the gRPC `Execute` stream) beside them.
//! Its calls may be known up front (a body, possibly idempotent) or arrive while it runs, each
//! starting as soon as it arrives and the scheduling rules allow.
//!
//! The bookkeeping is the whole batch's (`batches.rs`: claim, one batch per session at a time,
//! finish); this file adds no rule of its own. The batch, its claim included, runs in a task
//! of its own: a client that goes away loses the stream, not its calls, which finish and are
//! recorded.

use std::pin::Pin;
use std::sync::Arc;

use futures::Stream;
use tokio::sync::{broadcast, mpsc, oneshot};

use super::access::Access;
use super::batches::new_record;
use super::{LiveSession, ServiceError, ToolService};
use crate::dispatch::BatchUpdate;
use crate::event::Event;
use crate::permission::Principal;
use crate::registry::calls::{BatchFormat, BatchRequest, Idempotency};
use crate::store::BatchRecord;
use crate::tool::{ProgressUpdate, ToolCall, ToolResult};

/// Calls as they arrive; the batch ends when the stream does.
pub type CallStream = Pin<Box<dyn Stream<Item = ToolCall> + Send>>;

/// What a stream carries besides results.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum StreamDetail {
    /// Each call's progress reports, straight from the call.
    Progress,
    /// Every event the batch publishes (`tool:queued`, `tool:pre`, `tool:progress`, ...,
    /// `batch:end`), taken from the bus; best-effort like every subscriber.
    Events,
}

/// A batch to stream.
pub struct StreamRequest {
    pub format: BatchFormat,
    pub calls: CallStream,
    /// Calls known up front; 0 while they are still arriving.
    pub call_count: usize,
    /// Only for calls known up front: a retry is recognised by the whole request.
    pub idempotency: Option<Idempotency>,
    /// A keyed batch's calls, kept for its claim: a retry of a batch a restart cut off
    /// settles the calls that have no audit row with them (`ownership`).
    pub keyed_calls: Vec<ToolCall>,
    pub detail: StreamDetail,
}

impl StreamRequest {
    /// A batch whose calls are all known (a parsed body).
    pub fn known(request: BatchRequest, detail: StreamDetail) -> StreamRequest {
        let keyed_calls = match request.idempotency {
            Some(_) => request.calls.clone(),
            None => Vec::new(),
        };
        StreamRequest {
            format: request.format,
            call_count: request.calls.len(),
            calls: Box::pin(futures::stream::iter(request.calls)),
            idempotency: request.idempotency,
            keyed_calls,
            detail,
        }
    }

    /// A batch whose calls arrive as the model emits them (toold shape). It has no idempotency
    /// key: a retry cannot be recognised before its calls are known.
    pub fn arriving(
        calls: impl Stream<Item = ToolCall> + Send + 'static,
        detail: StreamDetail,
    ) -> StreamRequest {
        StreamRequest {
            format: BatchFormat::Toold,
            calls: Box::pin(calls),
            call_count: 0,
            idempotency: None,
            keyed_calls: Vec::new(),
            detail,
        }
    }
}

/// What a streamed batch sends while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchItem {
    /// A call's progress report ([`StreamDetail::Progress`]), as soon as it is made.
    Progress(ProgressUpdate),
    /// One of the batch's events ([`StreamDetail::Events`]), as soon as it is published.
    Event(Arc<Event>),
    /// A call's result, in request order.
    Result(ToolResult),
}

/// A batch being streamed: its items end when the batch is done.
pub struct BatchStream {
    pub batch_id: String,
    pub format: BatchFormat,
    pub items: mpsc::UnboundedReceiver<BatchItem>,
}

impl ToolService {
    /// Starts a streamed batch; see the module header.
    pub async fn execute_stream(
        self: &Arc<Self>,
        caller: &Principal,
        session_id: &str,
        request: StreamRequest,
    ) -> Result<BatchStream, ServiceError> {
        self.authorize(caller, session_id, Access::Write).await?;
        let session = self.owned_session(session_id).await?;
        // Held by the batch's task (`limits`): given back when the task ends, however.
        let slot = self.limits.batches.acquire(&caller.name)?;
        let actor = caller.name.clone();
        let StreamRequest {
            format,
            calls,
            call_count,
            idempotency,
            keyed_calls,
            detail,
        } = request;
        let record = new_record(session_id, format, idempotency, call_count);
        let (sender, items) = mpsc::unbounded_channel();
        // The claim is made in the batch's own task, which answers here whether it ran: once a
        // key's claim is committed its batch must run, even if this request is dropped
        // meanwhile (else every retry would find it running forever).
        let (claimed, claim) = oneshot::channel();
        let service = self.clone();
        // Carried: the batch's spans stay in the request's tree, its context goes onward.
        self.batch_tasks.spawn(crate::tool::trace::carry(async move {
            let _slot = slot;
            let batch_id = record.batch_id.clone();
            match service.claim(&record, &keyed_calls).await {
                Err(refused) => {
                    let _ = claimed.send(Err(refused));
                    return;
                }
                Ok(Some(replay)) => {
                    for result in replay.results.iter() {
                        let _ = sender.send(BatchItem::Result(result.clone()));
                    }
                    let _ = claimed.send(Ok(replay.batch_id));
                    return;
                }
                Ok(None) => {
                    let _ = claimed.send(Ok(batch_id.clone()));
                }
            }
            let results = service
                .run_streamed(&session, &record, calls, detail, sender, actor)
                .await;
            if let Err(err) = service.finish(&session, record, results.into()).await {
                tracing::error!(%batch_id, error = %err, "streamed batch not completed in the store");
            }
        }));
        let batch_id = claim.await.map_err(|_| {
            ServiceError::internal("the streamed batch's task ended before it was claimed")
        })??;
        Ok(BatchStream {
            batch_id,
            format,
            items,
        })
    }

    async fn run_streamed(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        calls: CallStream,
        detail: StreamDetail,
        client: mpsc::UnboundedSender<BatchItem>,
        actor: Arc<str>,
    ) -> Vec<ToolResult> {
        self.recent.started(record);
        // Registered before it starts, so `cancel_batch` reaches it from the first moment; its
        // calls' audit rows name the actor.
        let _queued = session.state.queue_batch(&record.batch_id, Some(actor));
        let _running = session.batches_running.read().await;
        // Subscribed before the batch starts, so none of its events is missed.
        let mut events = BatchEvents {
            live: (detail == StreamDetail::Events).then(|| self.events.subscribe()),
            batch_id: record.batch_id.clone(),
        };
        let (updates, mut received) = mpsc::unbounded_channel();
        let task = self.dispatcher.spawn_batch(
            session.state.clone(),
            self.pool(session),
            record.batch_id.clone(),
            calls,
            updates,
        );
        let mut results = Vec::with_capacity(record.call_count);
        loop {
            // Events first: those published before a result was sent go out before it. A
            // client that went away stops listening; the batch carries on and is recorded.
            let update = tokio::select! {
                biased;
                Some(event) = events.next() => {
                    let _ = client.send(BatchItem::Event(event));
                    continue;
                }
                update = received.recv() => update,
            };
            match update {
                Some(BatchUpdate::Result { result, .. }) => {
                    results.push(result.clone());
                    let _ = client.send(BatchItem::Result(result));
                }
                // With events, progress reaches the client as `tool:progress` from the bus.
                Some(BatchUpdate::Progress(progress)) if detail == StreamDetail::Progress => {
                    let _ = client.send(BatchItem::Progress(progress));
                }
                Some(BatchUpdate::Progress(_)) => {}
                None => break,
            }
        }
        if let Err(err) = task.await {
            tracing::error!(batch_id = %record.batch_id, error = %err, "batch task failed");
        }
        // Everything the batch published (`batch:end` included) is on the bus by now.
        while let Some(event) = events.try_next() {
            let _ = client.send(BatchItem::Event(event));
        }
        results
    }
}

/// The events of one batch, taken from the bus.
struct BatchEvents {
    /// `None` when events were not asked for, or once the bus is closed.
    live: Option<broadcast::Receiver<Arc<Event>>>,
    batch_id: String,
}

impl BatchEvents {
    /// The batch's next event; pending forever without a bus (results still flow).
    async fn next(&mut self) -> Option<Arc<Event>> {
        loop {
            let Some(live) = self.live.as_mut() else {
                return std::future::pending().await;
            };
            match live.recv().await {
                Ok(event) if self.is_ours(&event) => return Some(event),
                Ok(_) => {}
                // Events are best-effort here as for every subscriber (dispatch never waits
                // for one); results are not affected, and Subscribe replays what was missed.
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(batch_id = %self.batch_id, missed, "execute stream missed events");
                }
                Err(broadcast::error::RecvError::Closed) => self.live = None,
            }
        }
    }

    fn try_next(&mut self) -> Option<Arc<Event>> {
        loop {
            match self.live.as_mut()?.try_recv() {
                Ok(event) if self.is_ours(&event) => return Some(event),
                Ok(_) | Err(broadcast::error::TryRecvError::Lagged(_)) => {}
                Err(_) => return None,
            }
        }
    }

    fn is_ours(&self, event: &Event) -> bool {
        event.batch_id.as_deref() == Some(self.batch_id.as_str())
    }
}
