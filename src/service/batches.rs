//! Batches: running one (whole or streamed), idempotent retries, and reading one back.
//!
//! A session runs one batch at a time (a second waits for the first), so "writes serially"
//! holds across batches too. A batch runs to its end even if its request is dropped
//! (`to_the_end`: inline, spawned only if dropped unfinished), so a client that goes away loses
//! its answer, not the batch's bookkeeping. What is stored, and when:
//! - every call's audit row, durable before its result is returned (a whole batch writes its
//!   rows together before answering; a streamed one, each before its result goes out);
//! - a batch with an idempotency key is claimed in the store before it runs and completed
//!   with its results before it answers, so a retry after a lost connection (or a restart)
//!   gets the stored results and runs nothing again;
//! - a batch without one is recorded (status, no results) behind the answer; its results stay
//!   in memory for `GET .../batches/{id}` until newer batches push them out (`recent`);
//! - the session's state is saved behind the answer (`behind`).

use std::sync::Arc;
use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::to_the_end::ToTheEnd;
use super::{LiveSession, ServiceError, ToolService};
use crate::dispatch::BatchUpdate;
use crate::dispatch::executor::new_batch_id;
use crate::registry::calls::{BatchFormat, BatchRequest, results_json};
use crate::store::{BatchClaim, BatchRecord, BatchStatus};
use crate::tool::ToolResult;

/// A finished batch, in the request's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchResponse {
    pub batch_id: String,
    pub format: BatchFormat,
    /// The results in the request's shape (an agent appends it to its conversation), as
    /// JSON text.
    pub body: Vec<u8>,
    /// The results were stored by an earlier request with the same idempotency key.
    pub replayed: bool,
}

impl BatchResponse {
    /// The body as a JSON value (tests and callers that inspect it; the doors send the text).
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or(Value::Null)
    }
}

/// A batch whose progress and results arrive as they happen.
pub struct BatchStream {
    pub batch_id: String,
    pub format: BatchFormat,
    /// Progress at once; results in request order; closed when the batch is done.
    pub updates: mpsc::UnboundedReceiver<BatchUpdate>,
}

impl ToolService {
    /// Runs a batch body (any of the four shapes) and answers in its shape.
    pub async fn execute_batch(
        self: &Arc<Self>,
        session_id: &str,
        body: &Value,
    ) -> Result<BatchResponse, ServiceError> {
        self.execute_batch_owned(session_id, body.clone()).await
    }

    /// [`ToolService::execute_batch`] taking the body (the doors are done with it): its calls
    /// move into the batch rather than being copied.
    pub async fn execute_batch_owned(
        self: &Arc<Self>,
        session_id: &str,
        body: Value,
    ) -> Result<BatchResponse, ServiceError> {
        let hash = body_hash(&body);
        let request = BatchRequest::from_json_owned(body)?;
        let session = self.owned_session(session_id).await?;
        let record = batch_record(session_id, &request, hash);
        let (batch_id, format) = (record.batch_id.clone(), request.format);
        let service = self.clone();
        // The claim runs to the end with the batch too: once a key's claim is committed, its batch
        // runs and completes even if the client goes away meanwhile.
        let running = self.run_to_the_end(async move {
            if let Some(replay) = service.claim(&record).await? {
                return Ok(replay);
            }
            let results = service.run(&session, &record, request).await;
            let body = results_json(format, &record.batch_id, &results);
            let batch_id = record.batch_id.clone();
            service.finish(&session, record, results).await?;
            Ok::<_, ServiceError>(BatchResponse {
                batch_id,
                format,
                body,
                replayed: false,
            })
        });
        running
            .await
            .map_err(|err| ServiceError::internal(format!("batch \"{batch_id}\" failed: {err}")))?
    }

    /// Runs `work` (a batch) in the caller's task, to its end even if the caller drops it
    /// (`to_the_end`), tracked so a graceful shutdown waits for it.
    pub(super) fn run_to_the_end<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> ToTheEnd<T> {
        ToTheEnd::new(self.batch_tasks.track_future(work))
    }

    /// Runs a batch body and streams its progress and results.
    pub async fn execute_batch_stream(
        self: &Arc<Self>,
        session_id: &str,
        body: &Value,
    ) -> Result<BatchStream, ServiceError> {
        let request = BatchRequest::from_json(body)?;
        let session = self.owned_session(session_id).await?;
        let record = batch_record(session_id, &request, body_hash(body));
        let format = request.format;
        let (sender, updates) = mpsc::unbounded_channel();
        if let Some(replay) = self.claim(&record).await? {
            let stored = self.stored_results(session_id, &replay.batch_id).await?;
            for (index, result) in stored.into_iter().enumerate() {
                let _ = sender.send(BatchUpdate::Result { index, result });
            }
            return Ok(BatchStream {
                batch_id: replay.batch_id,
                format,
                updates,
            });
        }
        let batch_id = record.batch_id.clone();
        let service = self.clone();
        self.batch_tasks.spawn(async move {
            let results = service
                .run_streaming(&session, &record, request, sender)
                .await;
            let batch_id = record.batch_id.clone();
            if let Err(err) = service.finish(&session, record, results).await {
                tracing::error!(%batch_id, error = %err, "streamed batch not completed in the store");
            }
        });
        Ok(BatchStream {
            batch_id,
            format,
            updates,
        })
    }

    /// A batch's status and, once complete and while kept, its results (in the toold shape;
    /// `null` while running or once no longer kept).
    pub async fn get_batch(&self, session_id: &str, batch_id: &str) -> Result<Value, ServiceError> {
        let record = match self.recent.get(session_id, batch_id) {
            Some(record) => record,
            None => self
                .store
                .get_batch(session_id, batch_id)
                .await?
                .ok_or_else(|| ServiceError::not_found(format!("unknown batch \"{batch_id}\"")))?,
        };
        Ok(json!({
            "batch_id": record.batch_id,
            "session_id": record.session_id,
            "status": record.status,
            "format": record.format.as_str(),
            "calls": record.call_count,
            "created_at": humantime::format_rfc3339_millis(record.created_at).to_string(),
            "completed_at": record.completed_at.map(|t| humantime::format_rfc3339_millis(t).to_string()),
            "results": record.results,
        }))
    }

    /// For a batch with an idempotency key: records it, or finds the earlier one with the same
    /// key. A batch without a key has nothing to find.
    pub(super) async fn claim(
        &self,
        record: &BatchRecord,
    ) -> Result<Option<BatchResponse>, ServiceError> {
        let Some(key) = record.idempotency_key.as_deref() else {
            return Ok(None);
        };
        match self.store.claim_batch(record).await? {
            BatchClaim::New => Ok(None),
            BatchClaim::Conflict { batch_id } => Err(ServiceError::conflict(format!(
                "idempotency key {key:?} was used for a different request (batch \"{batch_id}\")"
            ))),
            BatchClaim::Existing(earlier) if earlier.status == BatchStatus::Running => {
                Err(ServiceError::conflict(self.still_running(key, &earlier)))
            }
            BatchClaim::Existing(earlier) => Ok(Some(BatchResponse {
                body: results_json(
                    record_format(record),
                    &earlier.batch_id,
                    earlier.results.as_deref().unwrap_or_default(),
                ),
                batch_id: earlier.batch_id,
                format: record_format(record),
                replayed: true,
            })),
        }
    }

    fn still_running(&self, key: &str, earlier: &BatchRecord) -> String {
        let id = &earlier.batch_id;
        if earlier.created_at < self.started_at {
            return format!(
                "the batch with idempotency key {key:?} (\"{id}\") was cut off by a restart of the \
                 daemon before it completed; its calls are in the audit log (GET .../calls)"
            );
        }
        format!(
            "the batch with idempotency key {key:?} (\"{id}\") is still running; fetch it with \
             GET .../batches/{id}"
        )
    }

    pub(super) async fn stored_results(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Vec<ToolResult>, ServiceError> {
        Ok(self
            .store
            .get_batch(session_id, batch_id)
            .await?
            .and_then(|record| record.results)
            .unwrap_or_default())
    }

    /// Runs a batch to its end, in the caller's task (one that runs to its end, see the
    /// callers).
    pub(super) async fn run(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        request: BatchRequest,
    ) -> Vec<ToolResult> {
        self.recent.started(record);
        let _one_at_a_time = session.batch_lock.lock().await;
        self.dispatcher
            .collect_batch(
                session.state.clone(),
                self.pool(session),
                record.batch_id.clone(),
                request.calls,
            )
            .await
            .results
    }

    /// Runs a batch, passing updates on as they come.
    async fn run_streaming(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        request: BatchRequest,
        client: mpsc::UnboundedSender<BatchUpdate>,
    ) -> Vec<ToolResult> {
        self.recent.started(record);
        let _one_at_a_time = session.batch_lock.lock().await;
        let (updates, mut received) = mpsc::unbounded_channel();
        let task = self.dispatcher.spawn_batch(
            session.state.clone(),
            self.pool(session),
            record.batch_id.clone(),
            futures::stream::iter(request.calls),
            updates,
        );
        let mut results = Vec::with_capacity(record.call_count);
        while let Some(update) = received.recv().await {
            if let BatchUpdate::Result { result, .. } = &update {
                results.push(result.clone());
            }
            // A client that went away stops listening; the batch carries on and is recorded.
            let _ = client.send(update);
        }
        if let Err(err) = task.await {
            tracing::error!(batch_id = %record.batch_id, error = %err, "batch task failed");
        }
        results
    }

    /// A batch's bookkeeping once it has run: see the module header for what is stored when.
    pub(super) async fn finish(
        &self,
        session: &LiveSession,
        record: BatchRecord,
        results: Vec<ToolResult>,
    ) -> Result<(), ServiceError> {
        // Counted here, from the results, so every path (whole, streamed) counts once and a
        // replayed retry, which runs nothing, counts nothing.
        let elapsed = SystemTime::now()
            .duration_since(record.created_at)
            .unwrap_or_default();
        crate::telemetry::record_batch(&results, elapsed);
        self.behind.save_state(&session.state);
        if record.idempotency_key.is_some() {
            let stored = self.store.complete_batch(&record.batch_id, &results).await;
            self.recent.completed(&record.batch_id, results);
            return Ok(stored?);
        }
        if let Some(completed) = self.recent.completed(&record.batch_id, results) {
            self.behind.record_batch(completed);
        }
        Ok(())
    }
}

/// The hash a batch with an idempotency key is recorded with; empty without one. Only a
/// key's retries are compared with it; hashing every body would cost a batch a second
/// serialisation of its calls. (A key that is not a string is refused with the envelope.)
fn body_hash(body: &Value) -> String {
    match body.get("idempotency_key") {
        Some(Value::String(_)) => request_hash(body),
        _ => String::new(),
    }
}

fn batch_record(session_id: &str, request: &BatchRequest, request_hash: String) -> BatchRecord {
    BatchRecord {
        batch_id: new_batch_id(),
        session_id: session_id.to_owned(),
        format: request.format,
        idempotency_key: request.idempotency_key.clone(),
        request_hash,
        status: BatchStatus::Running,
        call_count: request.calls.len(),
        results: None,
        created_at: SystemTime::now(),
        completed_at: None,
    }
}

/// A hash of the body: JSON objects serialise with sorted keys, so equal bodies hash equal
/// whatever their key order on the wire.
pub(super) fn request_hash(body: &Value) -> String {
    format!(
        "{:032x}",
        xxhash_rust::xxh3::xxh3_128(body.to_string().as_bytes())
    )
}

fn record_format(record: &BatchRecord) -> BatchFormat {
    match record.format.as_str() {
        "anthropic" => BatchFormat::Anthropic,
        "openai" => BatchFormat::OpenAi,
        "openai_chat" => BatchFormat::OpenAiChat,
        _ => BatchFormat::Toold,
    }
}
