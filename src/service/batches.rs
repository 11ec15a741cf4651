//! Batches, the one path every door takes: [`ToolService::execute_batch`] runs a whole
//! [`BatchRequest`] and answers with a [`BatchOutcome`]; `streams.rs` runs one whose results
//! (and progress or events) go out as they happen. Both share the bookkeeping here: claim when
//! idempotent, run, finish. The doors parse their wire shapes into a `BatchRequest`
//! (`registry::calls`) and render the outcome (`results_json`, protobuf); nothing here knows
//! a wire format.
//!
//! A session's batches run side by side, and their calls meet in the session's call gate
//! (`session::gate`): concurrency-safe calls of any batch run together up to the cap, any
//! other call runs alone, in arrival order, so "writes serially" holds across batches too
//! (MCP clients send a turn's parallel calls as separate one-call batches). A whole batch runs to its end even if its request is dropped
//! (`run_to_completion`: inline, spawned only if dropped unfinished), so a client that goes
//! away loses its answer, not the batch's bookkeeping. What is stored, and when:
//! - every call's audit row, durable before its result is returned (a whole batch writes its
//!   rows together before answering; a streamed one, each before its result goes out);
//! - a batch with an idempotency key is claimed in the store before it runs and completed
//!   with its results before it answers, so a retry after a lost connection (or a restart)
//!   gets the stored results and runs nothing again; if the completion cannot be stored, the
//!   claim is released (the record deleted) and the request fails saying so, so a retry runs
//!   the batch again rather than finding it `running` for ever (a `failed` status would need
//!   a migration of the `status` check; the calls are in the audit log either way);
//! - a batch without one is recorded (status, no results) behind the answer; its results stay
//!   in memory for `GET .../batches/{id}` until newer batches push them out
//!   (`recent_batches`);
//! - the session's state is saved behind the answer (`write_behind`).

use std::sync::Arc;
use std::time::SystemTime;

use serde::Serialize;

use super::access::Access;
use super::run_to_completion::RunToCompletion;
use super::{LiveSession, ServiceError, ToolService};
use crate::dispatch::executor::new_batch_id;
use crate::permission::Principal;
use crate::registry::calls::{BatchFormat, BatchRequest, Idempotency};
use crate::store::{BatchClaim, BatchRecord, BatchStatus, StoreError};
use crate::tool::{ToolCall, ToolResult};

/// A finished batch: every call's result in request order, for the door to render in the
/// request's shape.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchOutcome {
    pub batch_id: String,
    pub format: BatchFormat,
    /// Shared with the recent batches kept in memory, so answering copies no output.
    pub results: Arc<[ToolResult]>,
    /// The results were stored by an earlier request with the same idempotency key.
    pub replayed: bool,
}

/// Where a batch is, as `GET .../batches/{id}` says: its stored status, or `cut_off` for one
/// stored as running that no daemon runs any more (a restart cut it off) and whose audit
/// rows do not cover every call, until a retry with its key settles it.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BatchState {
    Running,
    Completed,
    CutOff,
}

/// A batch as `GET .../batches/{id}` shows it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct BatchStatusView {
    pub batch_id: String,
    pub session_id: String,
    pub status: BatchState,
    pub format: BatchFormat,
    pub calls: usize,
    /// RFC 3339, milliseconds.
    pub created_at: String,
    pub completed_at: Option<String>,
    /// In the toold shape, once complete and while kept; `null` while running or once no
    /// longer kept.
    pub results: Option<Vec<ToolResult>>,
}

impl ToolService {
    /// Runs a whole batch for `caller` and answers with every result in request order.
    pub async fn execute_batch(
        self: &Arc<Self>,
        caller: &Principal,
        session_id: &str,
        request: BatchRequest,
    ) -> Result<BatchOutcome, ServiceError> {
        self.authorize(caller, session_id, Access::Write).await?;
        let session = self.owned_session(session_id).await?;
        let slot = self.limits.batches.acquire(&caller.name)?;
        let actor = caller.name.clone();
        let record = new_record(
            session_id,
            request.format,
            request.idempotency,
            request.calls.len(),
        );
        let batch_id = record.batch_id.clone();
        let service = self.clone();
        // The claim runs to the end with the batch too: once a key's claim is committed, its
        // batch runs and completes even if the client goes away meanwhile. The batch's slot
        // (`limits`) is held by the work, so it is given back when the batch ends however it
        // ends (a panic unwinds through it; a dropped request leaves it with the spawned rest).
        let running = self.run_to_completion(async move {
            let _slot = slot;
            if let Some(replay) = service.claim(&record, &request.calls).await? {
                return Ok(replay);
            }
            let results: Arc<[ToolResult]> = service
                .run_whole(&session, &record, request.calls, actor)
                .await
                .into();
            let outcome = BatchOutcome {
                batch_id: record.batch_id.clone(),
                format: request.format,
                results: results.clone(),
                replayed: false,
            };
            service.finish(&session, record, results).await?;
            Ok(outcome)
        });
        running
            .await
            .map_err(|err| ServiceError::internal(format!("batch \"{batch_id}\" failed: {err}")))?
    }

    /// Runs `work` (a batch) in the caller's task, to its end even if the caller drops it,
    /// tracked so a graceful shutdown waits for it.
    fn run_to_completion<T: Send + 'static>(
        &self,
        work: impl std::future::Future<Output = T> + Send + 'static,
    ) -> RunToCompletion<T> {
        RunToCompletion::new(self.batch_tasks.track_future(work))
    }

    /// A batch's status and, once complete and while kept, its results.
    pub async fn get_batch(
        &self,
        caller: &Principal,
        session_id: &str,
        batch_id: &str,
    ) -> Result<BatchStatusView, ServiceError> {
        self.authorize(caller, session_id, Access::Read).await?;
        self.ensure_session_known(session_id, super::Closed::Gone)
            .await?;
        let mut record = match self.recent.get(session_id, batch_id) {
            Some(record) => record,
            None => self
                .store
                .get_batch(session_id, batch_id)
                .await?
                .ok_or_else(|| ServiceError::not_found(format!("unknown batch \"{batch_id}\"")))?,
        };
        let mut state = match record.status {
            BatchStatus::Running => BatchState::Running,
            BatchStatus::Completed => BatchState::Completed,
        };
        // Stored as running, its session live here since after it began, so nothing runs it:
        // settled from its rows if they cover every call (see `ownership`), else `cut_off`
        // until a retry with its key settles it. Another daemon's session is its to judge.
        let live_here = self.session(session_id).is_ok();
        if record.status == BatchStatus::Running && live_here && self.cut_off(&record) {
            match self.settle_cut_off(&record, record.format, &[]).await? {
                Some(settled) => {
                    record.results = Some(settled.results.to_vec());
                    record.completed_at = Some(SystemTime::now());
                    state = BatchState::Completed;
                }
                None => state = BatchState::CutOff,
            }
        }
        let rfc3339 = |time| humantime::format_rfc3339_millis(time).to_string();
        Ok(BatchStatusView {
            created_at: rfc3339(record.created_at),
            completed_at: record.completed_at.map(rfc3339),
            batch_id: record.batch_id,
            session_id: record.session_id,
            status: state,
            format: record.format,
            calls: record.call_count,
            results: record.results,
        })
    }

    /// A batch's results once it completes: awaited while it runs on this daemon, read back
    /// while they are kept (in memory, or in the store for an idempotent batch). A batch
    /// completed so long ago that its results are gone, one cut off by a restart (its record
    /// still says running), and an
    /// unknown one are each a `not_found` saying which.
    pub async fn batch_results(
        &self,
        caller: &Principal,
        session_id: &str,
        batch_id: &str,
    ) -> Result<Arc<[ToolResult]>, ServiceError> {
        self.authorize(caller, session_id, Access::Read).await?;
        if let Some(mut done) = self.recent.watch(session_id, batch_id) {
            // An error means it was evicted meanwhile, completed: the store may have it.
            if let Ok(results) = done.wait_for(Option::is_some).await
                && let Some(results) = results.clone()
            {
                return Ok(results);
            }
        }
        let record = self
            .store
            .get_batch(session_id, batch_id)
            .await?
            .ok_or_else(|| ServiceError::not_found(format!("unknown batch \"{batch_id}\"")))?;
        if let Some(results) = record.results {
            return Ok(results.into());
        }
        if record.status == BatchStatus::Running {
            return Err(ServiceError::not_found(format!(
                "batch \"{batch_id}\" is not running on this daemon: a restart (or a takeover) \
                 cut it off; its calls are in the audit log (GET .../calls)"
            )));
        }
        Err(ServiceError::not_found(format!(
            "batch \"{batch_id}\" completed and its results are no longer kept; its calls are in \
             the audit log (GET .../calls)"
        )))
    }

    /// For a batch with an idempotency key: records it, or finds the earlier one with the same
    /// key and answers with its stored results. A batch without a key has nothing to find.
    /// `calls` are the request's (empty for a streamed one whose calls are still arriving):
    /// what settles an earlier batch with the same key that a restart cut off.
    pub(super) async fn claim(
        &self,
        record: &BatchRecord,
        calls: &[ToolCall],
    ) -> Result<Option<BatchOutcome>, ServiceError> {
        let Some(key) = record.idempotency_key.as_deref() else {
            return Ok(None);
        };
        match self.store.claim_batch(record).await? {
            BatchClaim::New => Ok(None),
            BatchClaim::Conflict { batch_id } => Err(ServiceError::conflict(format!(
                "idempotency key {key:?} was used for a different request (batch \"{batch_id}\")"
            ))),
            BatchClaim::Existing(earlier) if earlier.status == BatchStatus::Running => {
                if self.cut_off(&earlier)
                    && let Some(settled) =
                        self.settle_cut_off(&earlier, record.format, calls).await?
                {
                    return Ok(Some(settled));
                }
                Err(ServiceError::conflict(self.still_running(key, &earlier)))
            }
            // The same hash means the same request, so the same shape as this one.
            BatchClaim::Existing(earlier) => Ok(Some(BatchOutcome {
                batch_id: earlier.batch_id,
                format: record.format,
                results: earlier.results.unwrap_or_default().into(),
                replayed: true,
            })),
        }
    }

    fn still_running(&self, key: &str, earlier: &BatchRecord) -> String {
        let id = &earlier.batch_id;
        if self.cut_off(earlier) {
            return format!(
                "the batch with idempotency key {key:?} (\"{id}\") was cut off (its daemon \
                 stopped) before it completed; its calls are in the audit log (GET .../calls)"
            );
        }
        format!(
            "the batch with idempotency key {key:?} (\"{id}\") is still running; fetch it with \
             GET .../batches/{id}"
        )
    }

    /// Runs a whole batch to its end, in the caller's task (one that runs to its end).
    async fn run_whole(
        &self,
        session: &LiveSession,
        record: &BatchRecord,
        calls: Vec<ToolCall>,
        actor: Arc<str>,
    ) -> Vec<ToolResult> {
        self.recent.started(record);
        // Registered before it starts, so `cancel_batch` reaches it from the first moment; its
        // calls' audit rows name the actor.
        let _queued = session.state.queue_batch(&record.batch_id, Some(actor));
        let _running = session.batches_running.read().await;
        self.dispatcher
            .collect_batch(
                session.state.clone(),
                self.pool(session),
                record.batch_id.clone(),
                calls,
            )
            .await
            .results
    }

    /// A batch's bookkeeping once it has run: see the module header for what is stored when.
    pub(super) async fn finish(
        &self,
        session: &LiveSession,
        record: BatchRecord,
        results: Arc<[ToolResult]>,
    ) -> Result<(), ServiceError> {
        // Counted here, from the results, so every path (whole, streamed) counts once and a
        // replayed retry, which runs nothing, counts nothing.
        let elapsed = SystemTime::now()
            .duration_since(record.created_at)
            .unwrap_or_default();
        crate::telemetry::record_batch(&results, elapsed);
        self.behind.save_state(&session.state).await;
        if record.idempotency_key.is_some() {
            let stored = self.store.complete_batch(&record.batch_id, &results).await;
            self.recent.completed(&record.batch_id, results);
            return match stored {
                Ok(()) => Ok(()),
                Err(err) => Err(self.release(&record.batch_id, err).await),
            };
        }
        if let Some(completed) = self.recent.completed(&record.batch_id, results) {
            self.behind.record_batch(completed).await;
        }
        Ok(())
    }
}

impl ToolService {
    /// A keyed batch whose results could not be stored: its claim is released so a retry
    /// runs it again, instead of finding it `running` for ever. The error says which way it
    /// went (releasing needs the store too).
    async fn release(&self, batch_id: &str, completion: StoreError) -> ServiceError {
        match self.store.release_batch(batch_id).await {
            Ok(()) => ServiceError::internal(format!(
                "batch \"{batch_id}\" ran but its results could not be stored ({completion}); \
                 its idempotency key is released, so a retry runs it again"
            )),
            Err(release) => {
                tracing::error!(batch_id, %completion, %release, "a keyed batch could neither be completed nor released: its key stays claimed");
                ServiceError::internal(format!(
                    "batch \"{batch_id}\" ran but its results could not be stored ({completion}), \
                     nor its idempotency key released ({release})"
                ))
            }
        }
    }
}

/// The record of a batch about to run (`call_count` 0 when its calls are still arriving).
pub(super) fn new_record(
    session_id: &str,
    format: BatchFormat,
    idempotency: Option<Idempotency>,
    call_count: usize,
) -> BatchRecord {
    let (idempotency_key, request_hash) = match idempotency {
        Some(Idempotency { key, request_hash }) => (Some(key), request_hash),
        None => (None, String::new()),
    };
    BatchRecord {
        batch_id: new_batch_id(),
        session_id: session_id.to_owned(),
        format,
        idempotency_key,
        request_hash,
        status: BatchStatus::Running,
        call_count,
        results: None,
        created_at: SystemTime::now(),
        completed_at: None,
    }
}
