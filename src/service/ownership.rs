//! Sessions across several daemons sharing one store: who runs a session, refusing what needs
//! the live session when it is another daemon's, taking over the sessions of a daemon that
//! stopped, and settling the batches such a daemon (or this one, before a restart) cut off.
//!
//! A session belongs to the daemon that created it (`SessionRecord.owner`, a node id). Only
//! the owner holds it live. With a fleet secret configured the doors forward what needs the
//! live session to its owner (`api::forward`, which asks [`ToolService::locate_session`]), so
//! a client behind a load balancer never sees which daemon runs what; this reverses an
//! earlier decision not to forward (a hop ties two daemons' lifetimes to one request), because
//! behind a round-robin balancer most batches would otherwise fail. What still reaches the
//! service for a session it does not run is refused here: a `conflict` naming the owner's node
//! id and address when the owner is alive (no fleet secret, so no forwarding), `unavailable`
//! (503, retry) when the owner stopped and nobody has adopted the session yet. Reads (a
//! session's description, its audit log, results, events) are answered by any daemon from the
//! store.
//!
//! A keyed batch still stored as running when its session went live here was cut off (its
//! daemon was killed, or this one restarted). A retry with its key is answered from the audit
//! log: every call has a row (the row of a call cut off says `interrupted`), and the results
//! built from them (a call cut off: kind `cancelled`; a finished call whose answer was lost:
//! its row's outcome, its output lost unless offloaded) are stored as the batch's, so every
//! later retry replays the same. A call with no row at all (the daemon died within the ~10 ms
//! before its `tool:queued` event was stored, so the restart could not mark it) gets a
//! `cancelled` row from the retry, whose calls are the same; it is not run again. The crash
//! loop (`tests/it/crash/`) found such batches stuck: every retry was a `conflict`, and
//! `GET .../batches/{id}` said `running` for ever. A read of such a batch before any retry
//! settles it when its rows cover every call, and otherwise reports it `cut_off`.
//!
//! Deliberately absent: noticing that a daemon stopped (the server's fleet task does, by
//! heartbeats, and calls [`ToolService::take_over`] once it has claimed the silent node).

use std::sync::Arc;

use super::BatchOutcome;
use super::access::Access;
use super::sessions::{CreateSessionRequest, session_info};
use super::{ErrorCode, LiveSession, ServiceError, SessionPlace, ToolService};
use crate::dispatch::AuditRecord;
use crate::permission::Principal;
use crate::registry::calls::BatchFormat;
use crate::session::SessionSnapshot;
use crate::store::{BatchRecord, CallRow, SessionRecord};
use crate::tool::{ErrorKind, ToolCall, ToolResult};

/// What taking over a stopped daemon's sessions did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakeOver {
    /// Audit rows written for calls the stopped daemon never finished.
    pub interrupted_calls: u64,
    /// Sessions this daemon now runs.
    pub adopted: Vec<String>,
}

impl ToolService {
    /// The live session `id`, to run a batch in. A session another daemon runs is refused
    /// (see the module header).
    pub(super) async fn owned_session(&self, id: &str) -> Result<Arc<LiveSession>, ServiceError> {
        if let Ok(live) = self.session(id) {
            return Ok(live);
        }
        match self.place_of(id).await? {
            SessionPlace::Here => self.session(id),
            SessionPlace::Node { node_id, address } => Err(ServiceError::new(
                ErrorCode::Conflict,
                format!(
                    "session \"{id}\" is run by node \"{node_id}\" at {address}, not by this \
                     daemon (\"{}\"); send its batches there",
                    self.settings.node_id
                ),
            )),
            SessionPlace::Nobody { owner } => Err(nobody_runs(id, &owner)),
        }
    }

    /// A session as `GET /v1/sessions/{id}` shows it, with its owner's node id and address:
    /// the live one, else the stored open one another daemon runs (a closed one is unknown,
    /// as on a single daemon).
    pub async fn describe_session(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<super::SessionInfo, ServiceError> {
        self.authorize(caller, id, Access::Read).await?;
        let mut info = match self.session(id) {
            Ok(live) => live.info.clone(),
            Err(not_live) => {
                let Some(record) = self
                    .store
                    .get_session(id)
                    .await?
                    .filter(|record| record.closed_at.is_none())
                else {
                    return Err(not_live);
                };
                let request = stored_request(&record)?;
                session_info(&record, &request)
            }
        };
        info.owner_address = self.node_address(&info.owner).await;
        Ok(info)
    }

    async fn node_address(&self, node_id: &str) -> Option<String> {
        match self.store.get_node(node_id).await {
            Ok(node) => node.map(|node| node.address),
            Err(err) => {
                tracing::warn!(node_id, error = %err, "cannot read a node's address");
                None
            }
        }
    }

    /// Takes over the open sessions of `stopped_node`, which the caller has claimed (so no
    /// other daemon does this at once): every call it left unfinished gets an interrupted
    /// audit row, and the sessions whose working directory this daemon sees are adopted
    /// (this daemon runs them from now on). The others stay with the stopped node, which
    /// takes them back when it restarts.
    pub async fn take_over(&self, stopped_node: &str) -> Result<TakeOver, ServiceError> {
        let mut done = TakeOver::default();
        for record in self.store.list_sessions(false).await? {
            if record.owner != stopped_node {
                continue;
            }
            done.interrupted_calls += self.store.mark_interrupted_calls(&record.id).await?;
            if !record.working_directory.is_dir()
                || !self
                    .store
                    .adopt_session(&record.id, stopped_node, &self.settings.node_id)
                    .await?
            {
                continue;
            }
            let adopted = SessionRecord {
                owner: self.settings.node_id.clone(),
                ..record
            };
            let snapshot: SessionSnapshot =
                serde_json::from_value(adopted.state.clone()).unwrap_or_default();
            let layers = self.store.session_layers(&adopted.id).await?;
            self.go_live(&adopted, snapshot, None, &layers)?;
            done.adopted.push(adopted.id);
        }
        Ok(done)
    }

    /// At start, before anything runs: calls of this daemon's own sessions left unfinished by
    /// its previous run (a crash or `kill -9`) get interrupted audit rows. Returns how many.
    pub async fn mark_own_interrupted_calls(&self) -> Result<u64, ServiceError> {
        let mut marked = 0;
        for record in self.store.list_sessions(false).await? {
            if record.owner == self.settings.node_id {
                marked += self.store.mark_interrupted_calls(&record.id).await?;
            }
        }
        Ok(marked)
    }
}

/// The refusal of a request for a session nobody runs this moment.
pub fn nobody_runs(id: &str, owner: &str) -> ServiceError {
    ServiceError::unavailable(format!(
        "session \"{id}\" is not running: its daemon (node \"{owner}\") stopped and no other \
         has adopted it yet; retry shortly"
    ))
}

fn stored_request(record: &SessionRecord) -> Result<CreateSessionRequest, ServiceError> {
    super::sessions::stored_options(record).map(|(request, _)| request)
}

impl ToolService {
    /// Whether `earlier`, a batch stored as running, was cut off: it began before this daemon
    /// took its session live (a restart, a takeover), so nothing here is running it.
    pub(super) fn cut_off(&self, earlier: &BatchRecord) -> bool {
        self.session(&earlier.session_id)
            .map_or(earlier.created_at < self.started_at, |live| {
                earlier.created_at < live.live_since
            })
    }

    /// Answers a retry of a cut-off batch from the audit log and stores that answer as the
    /// batch's (see the module header). `calls` are the retry's (the same request, so the
    /// same calls): a call without a row gets one here, `cancelled`. `None` when the rows do
    /// not cover every call and `calls` cannot fill them in (a streamed retry's calls, still
    /// arriving; a plain read of the batch).
    pub(super) async fn settle_cut_off(
        &self,
        earlier: &BatchRecord,
        format: BatchFormat,
        calls: &[ToolCall],
    ) -> Result<Option<BatchOutcome>, ServiceError> {
        let rows = self
            .store
            .batch_calls(&earlier.session_id, &earlier.batch_id)
            .await?;
        let mut settled: Vec<(usize, ToolResult)> = rows
            .iter()
            .map(|row| (row.record.index, settled_result(row)))
            .collect();
        // A streamed batch is stored with no count: the calls that arrived are all it had.
        if earlier.call_count != 0 && rows.len() != earlier.call_count {
            if calls.len() != earlier.call_count {
                return Ok(None);
            }
            settled.extend(self.record_unrecorded(earlier, calls, &rows).await?);
        }
        settled.sort_by_key(|(index, _)| *index);
        let results: Vec<ToolResult> = settled.into_iter().map(|(_, result)| result).collect();
        self.store
            .complete_batch(&earlier.batch_id, &results)
            .await?;
        Ok(Some(BatchOutcome {
            batch_id: earlier.batch_id.clone(),
            format,
            results: results.into(),
            replayed: true,
        }))
    }

    /// The calls of a cut-off batch that have no audit row: the daemon stopped before even
    /// their `tool:queued` event was stored (within ~10 ms of the batch's start), so the
    /// restart could not mark them interrupted. Each gets a `cancelled` row now
    /// (`cancelled_by` "daemon_stopped"), written before the retry is answered, so every call
    /// has a row and a result. Whether such a call had begun is unknown; it is not run again
    /// (a keyed batch runs at most once).
    async fn record_unrecorded(
        &self,
        earlier: &BatchRecord,
        calls: &[ToolCall],
        rows: &[CallRow],
    ) -> Result<Vec<(usize, ToolResult)>, ServiceError> {
        let kind = ErrorKind::Cancelled;
        let output = kind.format_output(
            "the daemon running this batch stopped before this call's outcome was recorded; \
             it is not run again",
        );
        let missing: Vec<(usize, &ToolCall)> = calls
            .iter()
            .enumerate()
            .filter(|(index, _)| !rows.iter().any(|row| row.record.index == *index))
            .collect();
        let records = missing
            .iter()
            .map(|(index, call)| AuditRecord {
                session_id: earlier.session_id.clone(),
                batch_id: earlier.batch_id.clone(),
                call_id: call.id.clone(),
                index: *index,
                requested_name: call.name.clone(),
                tool: None,
                input: call.input.to_record(),
                decision: None,
                is_error: true,
                error_kind: Some(kind),
                output_chars: output.chars().count() as u64,
                offloaded: None,
                started_at: earlier.created_at,
                duration_ms: 0.0,
                cancelled_by: Some("daemon_stopped".to_owned()),
                trace_id: None,
                principal: None,
                isolation: None,
            })
            .collect();
        self.dispatcher
            .audit_sink()
            .record_many(records)
            .await
            .map_err(|err| {
                ServiceError::internal(format!(
                    "batch \"{}\" was cut off and its unrecorded calls could not be audited: {err}",
                    earlier.batch_id
                ))
            })?;
        Ok(missing
            .into_iter()
            .map(|(index, call)| {
                let result = ToolResult {
                    id: call.id.clone(),
                    name: call.name.clone(),
                    is_error: true,
                    output: output.clone(),
                    error_kind: Some(kind),
                    duration_ms: 0.0,
                    offloaded: None,
                    structured: None,
                    metadata: serde_json::Map::new(),
                };
                (index, result)
            })
            .collect())
    }
}

/// A cut-off batch's result for one call, from its audit row.
fn settled_result(row: &CallRow) -> ToolResult {
    let record = &row.record;
    let (is_error, error_kind, output) = if row.interrupted {
        let kind = ErrorKind::Cancelled;
        let message = "the daemon running this call stopped before it finished";
        (true, Some(kind), kind.format_output(message))
    } else {
        let output = match &record.offloaded {
            Some(offloaded) => format!(
                "the answer to this call was lost when its daemon stopped; its output is stored \
                 as {} ({} characters)",
                offloaded.result_id, offloaded.total_chars
            ),
            None => "the answer to this call was lost when its daemon stopped; its outcome is \
                     in the audit log"
                .to_owned(),
        };
        (record.is_error, record.error_kind, output)
    };
    ToolResult {
        id: record.call_id.clone(),
        name: record.requested_name.clone(),
        is_error,
        output,
        error_kind,
        duration_ms: record.duration_ms,
        offloaded: record.offloaded.clone(),
        structured: None,
        metadata: serde_json::Map::new(),
    }
}
