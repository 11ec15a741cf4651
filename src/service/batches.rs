//! Batches: running one (whole or streamed), idempotent retries, and reading one back.
//!
//! A session runs one batch at a time (a second waits for the first), so "writes serially"
//! holds across batches too. Every batch is recorded before it runs and completed with its
//! results after, so a client that lost its connection can fetch them, and a retry with the
//! same idempotency key gets them back without anything running again.

use std::time::SystemTime;

use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::sessions::snapshot_json;
use super::{LiveSession, ServiceError, ToolService};
use crate::dispatch::BatchUpdate;
use crate::dispatch::executor::new_batch_id;
use crate::registry::calls::{BatchFormat, BatchRequest, format_results};
use crate::store::{BatchClaim, BatchRecord, BatchStatus};
use crate::tool::ToolResult;

/// A finished batch, in the request's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchResponse {
    pub batch_id: String,
    pub format: BatchFormat,
    /// The results in the request's shape (an agent appends it to its conversation).
    pub body: Value,
    /// The results were stored by an earlier request with the same idempotency key.
    pub replayed: bool,
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
        &self,
        session_id: &str,
        body: &Value,
    ) -> Result<BatchResponse, ServiceError> {
        let request = BatchRequest::from_json(body)?;
        let session = self.session(session_id)?;
        let record = batch_record(session_id, &request, body);
        if let Some(replay) = self.claim(&record).await? {
            return Ok(replay);
        }
        let results = self.run(&session, &record, request).await?;
        Ok(BatchResponse {
            body: format_results(record_format(&record), &record.batch_id, &results),
            batch_id: record.batch_id,
            format: request_format(body),
            replayed: false,
        })
    }

    /// Runs a batch body and streams its progress and results.
    pub async fn execute_batch_stream(
        self: &std::sync::Arc<Self>,
        session_id: &str,
        body: &Value,
    ) -> Result<BatchStream, ServiceError> {
        let request = BatchRequest::from_json(body)?;
        let session = self.session(session_id)?;
        let record = batch_record(session_id, &request, body);
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
        tokio::spawn(async move {
            if let Err(err) = service
                .run_streaming(&session, &record, request, sender)
                .await
            {
                tracing::error!(batch_id = %record.batch_id, error = %err, "streamed batch not completed in the store");
            }
        });
        Ok(BatchStream {
            batch_id,
            format,
            updates,
        })
    }

    /// A batch's status and, once complete, its results (in the toold shape).
    pub async fn get_batch(&self, session_id: &str, batch_id: &str) -> Result<Value, ServiceError> {
        let record = self
            .store
            .get_batch(session_id, batch_id)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("unknown batch \"{batch_id}\"")))?;
        Ok(json!({
            "batch_id": record.batch_id,
            "session_id": record.session_id,
            "status": record.status,
            "format": record.format,
            "calls": record.call_count,
            "created_at": humantime::format_rfc3339_millis(record.created_at).to_string(),
            "completed_at": record.completed_at.map(|t| humantime::format_rfc3339_millis(t).to_string()),
            "results": record.results,
        }))
    }

    /// Records the batch, or finds the earlier one with the same idempotency key.
    async fn claim(&self, record: &BatchRecord) -> Result<Option<BatchResponse>, ServiceError> {
        match self.store.claim_batch(record).await? {
            BatchClaim::New => Ok(None),
            BatchClaim::Conflict { batch_id } => Err(ServiceError::conflict(format!(
                "idempotency key {:?} was used for a different request (batch \"{batch_id}\")",
                record.idempotency_key.as_deref().unwrap_or_default()
            ))),
            BatchClaim::Existing(earlier) if earlier.status == BatchStatus::Running => {
                Err(ServiceError::conflict(format!(
                    "the batch with idempotency key {:?} (\"{}\") is still running; fetch it with GET .../batches/{}",
                    record.idempotency_key.as_deref().unwrap_or_default(),
                    earlier.batch_id,
                    earlier.batch_id
                )))
            }
            BatchClaim::Existing(earlier) => Ok(Some(BatchResponse {
                body: format_results(record_format(record), &earlier.batch_id, &earlier.results),
                batch_id: earlier.batch_id,
                format: record_format(record),
                replayed: true,
            })),
        }
    }

    async fn stored_results(
        &self,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Vec<ToolResult>, ServiceError> {
        Ok(self
            .store
            .get_batch(session_id, batch_id)
            .await?
            .map(|record| record.results)
            .unwrap_or_default())
    }

    /// Runs a claimed batch to completion and records it.
    async fn run(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        request: BatchRequest,
    ) -> Result<Vec<ToolResult>, ServiceError> {
        let _one_at_a_time = session.batch_lock.lock().await;
        let outcome = self
            .dispatcher
            .execute_batch_with_id(
                session.state.clone(),
                self.pool(session),
                record.batch_id.clone(),
                request.calls,
            )
            .await;
        self.finish(session, record, &outcome.results).await?;
        Ok(outcome.results)
    }

    /// Runs a claimed batch, passing updates on as they come, and records it.
    async fn run_streaming(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        request: BatchRequest,
        client: mpsc::UnboundedSender<BatchUpdate>,
    ) -> Result<(), ServiceError> {
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
        self.finish(session, record, &results).await
    }

    async fn finish(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        results: &[ToolResult],
    ) -> Result<(), ServiceError> {
        self.store.complete_batch(&record.batch_id, results).await?;
        // Counted here, from the results, so every path (whole, streamed) counts once and a
        // replayed retry, which runs nothing, counts nothing.
        let elapsed = SystemTime::now()
            .duration_since(record.created_at)
            .unwrap_or_default();
        crate::telemetry::record_batch(results, elapsed);
        self.store
            .save_session_state(&record.session_id, &snapshot_json(&session.state))
            .await?;
        Ok(())
    }
}

fn batch_record(session_id: &str, request: &BatchRequest, body: &Value) -> BatchRecord {
    BatchRecord {
        batch_id: new_batch_id(),
        session_id: session_id.to_owned(),
        format: request.format.as_str().to_owned(),
        idempotency_key: request.idempotency_key.clone(),
        request_hash: request_hash(body),
        status: BatchStatus::Running,
        call_count: request.calls.len(),
        results: Vec::new(),
        created_at: SystemTime::now(),
        completed_at: None,
    }
}

/// A hash of the body: JSON objects serialise with sorted keys, so equal bodies hash equal
/// whatever their key order on the wire.
fn request_hash(body: &Value) -> String {
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

fn request_format(body: &Value) -> BatchFormat {
    match body.get("format").and_then(Value::as_str) {
        Some("anthropic") => BatchFormat::Anthropic,
        Some("openai") => BatchFormat::OpenAi,
        Some("openai_chat") => BatchFormat::OpenAiChat,
        _ => BatchFormat::Toold,
    }
}
