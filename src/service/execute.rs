//! Batches for typed doors (gRPC): a whole batch from calls already split out
//! ([`ToolService::execute_calls`]), and a batch whose calls arrive one at a time while it
//! runs ([`ToolService::execute_stream`]), with the batch's events beside its results.
//!
//! Both go through the same bookkeeping as the JSON bodies of `batches.rs` (claim when
//! idempotent, `run`/`finish`, one batch per session at a time); this file adds no rule of
//! its own. Not here: parsing provider bodies (`registry::calls`), scheduling (`dispatch`).

use std::sync::Arc;
use std::time::SystemTime;

use futures::Stream;
use tokio::sync::{broadcast, mpsc};

use super::batches::request_hash;
use super::{LiveSession, ServiceError, ToolService};
use crate::dispatch::BatchUpdate;
use crate::dispatch::executor::new_batch_id;
use crate::event::Event;
use crate::registry::calls::BatchRequest;
use crate::store::{BatchRecord, BatchStatus};
use crate::tool::{ToolCall, ToolResult};

/// A finished batch with its results as the core has them.
#[derive(Clone, Debug, PartialEq)]
pub struct CallsOutcome {
    pub batch_id: String,
    pub results: Vec<ToolResult>,
    /// The stored results of an earlier batch with the same idempotency key.
    pub replayed: bool,
}

/// What a streamed batch sends while it runs.
#[derive(Clone, Debug, PartialEq)]
pub enum ExecuteItem {
    /// One of the batch's lifecycle events (`tool:queued`, `tool:pre`, `tool:progress`, ...),
    /// as soon as it is published.
    Event(Arc<Event>),
    /// A call's result, in request order.
    Result(ToolResult),
}

/// A batch being streamed: its items end when the batch is done.
pub struct ExecuteStream {
    pub batch_id: String,
    pub items: mpsc::UnboundedReceiver<ExecuteItem>,
}

impl ToolService {
    /// Runs `calls` as one batch (toold shape, envelope rules and idempotency as for a body)
    /// and returns every result in request order.
    pub async fn execute_calls(
        self: &Arc<Self>,
        session_id: &str,
        calls: Vec<ToolCall>,
        idempotency_key: Option<String>,
    ) -> Result<CallsOutcome, ServiceError> {
        let request = BatchRequest::from_calls(calls, idempotency_key)?;
        let session = self.owned_session(session_id).await?;
        // As for a JSON body: only a key's retries are compared with the hash.
        let hash = match request.idempotency_key {
            Some(_) => request_hash(&request.to_toold_json()),
            None => String::new(),
        };
        let record = new_record(
            session_id,
            request.idempotency_key.clone(),
            hash,
            request.calls.len(),
        );
        let batch_id = record.batch_id.clone();
        // To its end, claim included, as for a JSON body: a client that goes away loses its
        // answer, not the batch or its bookkeeping.
        let service = self.clone();
        let session_id = session_id.to_owned();
        let running = self.run_to_the_end(async move {
            if let Some(replay) = service.claim(&record).await? {
                return Ok(CallsOutcome {
                    results: service
                        .stored_results(&session_id, &replay.batch_id)
                        .await?,
                    batch_id: replay.batch_id,
                    replayed: true,
                });
            }
            let results = service.run(&session, &record, request).await;
            let batch_id = record.batch_id.clone();
            service.finish(&session, record, results.clone()).await?;
            Ok::<_, ServiceError>(CallsOutcome {
                batch_id,
                results,
                replayed: false,
            })
        });
        running
            .await
            .map_err(|err| ServiceError::internal(format!("batch \"{batch_id}\" failed: {err}")))?
    }

    /// Starts a batch whose calls arrive on `calls` as the model emits them (the batch ends
    /// when the stream does). Each call starts as soon as it arrives and the scheduling rules
    /// allow; the batch's events are forwarded at once and its results in request order. The
    /// batch runs in a task of its own: a client that goes away loses the stream, not its
    /// calls, which finish and are recorded.
    pub async fn execute_stream<S>(
        self: &Arc<Self>,
        session_id: &str,
        calls: S,
    ) -> Result<ExecuteStream, ServiceError>
    where
        S: Stream<Item = ToolCall> + Send + Unpin + 'static,
    {
        let session = self.owned_session(session_id).await?;
        // The calls are not known yet: the record counts none and hashes nothing, and a
        // streamed batch has no idempotency key (a retry cannot be recognised), so there is
        // nothing to claim: it is recorded behind the answer like any batch without a key.
        let record = new_record(session_id, None, String::new(), 0);
        let (sender, items) = mpsc::unbounded_channel();
        let batch_id = record.batch_id.clone();
        let service = self.clone();
        self.batch_tasks.spawn(async move {
            let results = service.run_stream(&session, &record, calls, sender).await;
            let batch_id = record.batch_id.clone();
            if let Err(err) = service.finish(&session, record, results).await {
                tracing::error!(%batch_id, error = %err, "streamed batch not completed in the store");
            }
        });
        Ok(ExecuteStream { batch_id, items })
    }

    async fn run_stream<S>(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        calls: S,
        client: mpsc::UnboundedSender<ExecuteItem>,
    ) -> Vec<ToolResult>
    where
        S: Stream<Item = ToolCall> + Send + Unpin + 'static,
    {
        self.recent.started(record);
        let _one_at_a_time = session.batch_lock.lock().await;
        // Subscribed before the batch starts, so none of its events is missed.
        let mut events = BatchEvents {
            live: Some(self.events.subscribe()),
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
        let mut results = Vec::new();
        loop {
            // Events first: those published before a result was sent go out before it.
            let update = tokio::select! {
                biased;
                Some(event) = events.next() => {
                    let _ = client.send(ExecuteItem::Event(event));
                    continue;
                }
                update = received.recv() => update,
            };
            match update {
                Some(BatchUpdate::Result { result, .. }) => {
                    results.push(result.clone());
                    // A client that went away stops listening; the batch carries on.
                    let _ = client.send(ExecuteItem::Result(result));
                }
                // Progress also reaches the bus as `tool:progress`, forwarded above.
                Some(BatchUpdate::Progress(_)) => {}
                None => break,
            }
        }
        if let Err(err) = task.await {
            tracing::error!(batch_id = %record.batch_id, error = %err, "batch task failed");
        }
        // Everything the batch published (`batch:end` included) is on the bus by now.
        while let Some(event) = events.try_next() {
            let _ = client.send(ExecuteItem::Event(event));
        }
        results
    }
}

/// The events of one batch, taken from the bus.
struct BatchEvents {
    /// `None` once the bus is closed.
    live: Option<broadcast::Receiver<Arc<Event>>>,
    batch_id: String,
}

impl BatchEvents {
    /// The batch's next event; pending forever once the bus is gone (results still flow).
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

fn new_record(
    session_id: &str,
    idempotency_key: Option<String>,
    request_hash: String,
    call_count: usize,
) -> BatchRecord {
    BatchRecord {
        batch_id: new_batch_id(),
        session_id: session_id.to_owned(),
        format: crate::registry::calls::BatchFormat::Toold,
        idempotency_key,
        request_hash,
        status: BatchStatus::Running,
        call_count,
        results: None,
        created_at: SystemTime::now(),
        completed_at: None,
    }
}
