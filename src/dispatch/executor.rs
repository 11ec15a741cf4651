//! The streaming executor: admits calls as they arrive, starts each as soon as the calls
//! before it allow, and yields results strictly in request order.
//!
//! Each call moves queued → executing → completed → yielded, visible as the events
//! `tool:queued`, `tool:pre`, `tool:post`/`tool:error` and the [`BatchUpdate::Result`] that
//! yields it. The scheduling rule is partition-then-gather applied online: the lowest
//! unfinished call's group is the only one allowed to run; a safe group admits late arrivals
//! up to `max_concurrency`, an unsafe call runs alone. That keeps the batch's pipeline in
//! request order; which calls execute together across the session's batches is the session's
//! call gate's to say (`session::gate`, entered by the execute phase with the class admitted
//! here), so the rule has one owner. A call refused before it could start
//! (duplicate id, interrupted, aborted) still goes through the pipeline, so it is audited.

use std::collections::HashSet;
use std::panic::AssertUnwindSafe;
use std::path::Path;
use std::sync::Arc;

use futures::FutureExt;
use futures::future::BoxFuture;
use futures::stream::{FuturesUnordered, Stream, StreamExt};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use tower::ServiceExt;

use super::Dispatcher;
use super::call_events;
use super::call_span;
use super::partition::joins_previous_group;
use super::pipeline::{CallOutcome, CallRequest, CallSignals};
use super::ports::HeldAudit;
use crate::event::{EventData, EventDraft, EventType};
use crate::registry::{RegisteredTool, ToolPool, UnknownTool};
use crate::session::{BatchInterrupt, SessionState};
use crate::tool::trace;
use crate::tool::{
    ErrorKind, PathChecks, PermissionLevel, ProgressSink, ProgressUpdate, ToolCall, ToolContext,
    ToolResult,
};

/// What a running batch reports: progress as soon as it happens, results in request order.
#[derive(Clone, Debug, PartialEq)]
pub enum BatchUpdate {
    Progress(ProgressUpdate),
    Result { index: usize, result: ToolResult },
}

/// A finished batch.
#[derive(Clone, Debug, PartialEq)]
pub struct BatchOutcome {
    pub batch_id: String,
    pub results: Vec<ToolResult>,
}

/// Where a call is in its life.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum CallState {
    Queued,
    Executing,
    Completed,
    Yielded,
}

struct Entry {
    /// Taken when the call starts.
    call: Option<ToolCall>,
    id: Arc<str>,
    name: Arc<str>,
    tool: Result<Arc<RegisteredTool>, UnknownTool>,
    safe: bool,
    group: usize,
    state: CallState,
    /// Whether it holds one of the group's concurrency slots.
    counted: bool,
    result: Option<ToolResult>,
}

struct Group {
    safe: bool,
    abort: CancellationToken,
}

/// A running call's index and its outcome, or `None` if toold itself panicked running it.
type Running = FuturesUnordered<BoxFuture<'static, (usize, Option<Box<CallOutcome>>)>>;

/// New batch ids sort by creation time.
pub fn new_batch_id() -> String {
    format!("batch_{}", uuid::Uuid::now_v7().simple())
}

impl Dispatcher {
    /// Runs a whole batch; results come back in request order, one per call. The batch runs
    /// in its own task, so dropping this future (a client that went away) does not drop the
    /// calls: they finish and are audited all the same.
    pub async fn execute_batch(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        calls: Vec<ToolCall>,
    ) -> BatchOutcome {
        self.execute_batch_with_id(session, pool, new_batch_id(), calls)
            .await
    }

    /// [`Dispatcher::execute_batch`] under a batch id the caller chose (and recorded).
    pub async fn execute_batch_with_id(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        calls: Vec<ToolCall>,
    ) -> BatchOutcome {
        let ids: Vec<(String, String)> = calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect();
        let dispatcher = self.clone();
        let id = batch_id.clone();
        // Carried: the batch's spans stay children of the request's.
        let joined = tokio::spawn(trace::carry(async move {
            dispatcher.collect_batch(session, pool, id, calls).await
        }))
        .await;
        joined.unwrap_or_else(|err| {
            tracing::error!(%batch_id, error = %err, "batch task failed");
            // Only a panic in the batch task itself leaves calls unanswered; answer them.
            let results = ids.iter().map(|(id, name)| lost_call(id, name).result);
            BatchOutcome {
                batch_id,
                results: results.collect(),
            }
        })
    }

    /// Runs a whole batch in the caller's task (dropping this future drops the batch's calls:
    /// callers that may be dropped use [`Dispatcher::execute_batch_with_id`], or run this in
    /// a task of their own) and collects its results in request order.
    pub async fn collect_batch(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        calls: Vec<ToolCall>,
    ) -> BatchOutcome {
        let (updates, mut received) = mpsc::unbounded_channel();
        let ids: Vec<(String, String)> = calls
            .iter()
            .map(|c| (c.id.clone(), c.name.clone()))
            .collect();
        let stream = futures::stream::iter(calls);
        // Nothing is returned before the batch ends, so its audit rows are written together
        // then, before any result leaves this function.
        let held = HeldAudit::default();
        self.run_batch_holding(
            session,
            pool,
            batch_id.clone(),
            stream,
            updates,
            Some(held.clone()),
        )
        .await;
        let rows = held.take();
        let count = rows.len();
        if let Err(err) = self.audit.record_many(rows).await {
            // As for a single row (`pipeline::audit`): the calls have happened; their results
            // are returned all the same, and the failure is logged loudly.
            tracing::error!(%batch_id, rows = count, error = %err, "audit rows not written");
        }
        let mut results = Vec::with_capacity(ids.len());
        while let Ok(update) = received.try_recv() {
            if let BatchUpdate::Result { result, .. } = update {
                results.push(result);
            }
        }
        // Every call gets its result, whatever happened to the batch.
        for (id, name) in ids.iter().skip(results.len()) {
            results.push(lost_call(id, name).result);
        }
        BatchOutcome { batch_id, results }
    }

    /// [`Dispatcher::run_batch`] in a task of its own, so the batch outlives whoever started
    /// it: the doors use this, and a client that disconnects loses its stream, not its calls.
    pub fn spawn_batch<C>(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        calls: C,
        updates: mpsc::UnboundedSender<BatchUpdate>,
    ) -> tokio::task::JoinHandle<()>
    where
        C: Stream<Item = ToolCall> + Send + Unpin + 'static,
    {
        let dispatcher = self.clone();
        tokio::spawn(trace::carry(async move {
            dispatcher
                .run_batch(session, pool, batch_id, calls, updates)
                .await;
        }))
    }

    /// Runs a batch whose calls arrive on `calls` (ending when the stream ends) and reports
    /// on `updates`. The pool is fixed for the whole batch. Dropping this future drops the
    /// batch's running calls; use [`Dispatcher::spawn_batch`] unless the caller owns that.
    pub async fn run_batch<C>(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        calls: C,
        updates: mpsc::UnboundedSender<BatchUpdate>,
    ) where
        C: Stream<Item = ToolCall> + Unpin,
    {
        self.run_batch_holding(session, pool, batch_id, calls, updates, None)
            .await;
    }

    /// [`Dispatcher::run_batch`], its calls leaving their audit rows in `held_audit` when set
    /// (the caller writes them before returning any result), in the batch's span.
    async fn run_batch_holding<C>(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        calls: C,
        updates: mpsc::UnboundedSender<BatchUpdate>,
        held_audit: Option<HeldAudit>,
    ) where
        C: Stream<Item = ToolCall> + Unpin,
    {
        let mut span = call_span::batch_span(session.id(), &batch_id);
        let (calls, errors) = span
            .within(self.run_batch_in(session, pool, batch_id, calls, updates, held_audit))
            .await;
        call_span::record_batch(&mut span, calls, errors);
    }

    /// Runs the batch; its number of calls and of failed ones.
    async fn run_batch_in<C>(
        &self,
        session: Arc<SessionState>,
        pool: Arc<ToolPool>,
        batch_id: String,
        mut calls: C,
        updates: mpsc::UnboundedSender<BatchUpdate>,
        held_audit: Option<HeldAudit>,
    ) -> (usize, usize)
    where
        C: Stream<Item = ToolCall> + Unpin,
    {
        let batch_id: Arc<str> = Arc::from(batch_id);
        // Registered with the session while the batch runs, so it can be cancelled alone.
        let running_batch = session.start_batch(&batch_id);
        let interrupt = running_batch.interrupt.clone();
        let mut run = BatchRun {
            dispatcher: self,
            progress: progress_delivery(self, &session, &batch_id, &interrupt, &updates),
            working_directory: Arc::from(session.working_directory()),
            session,
            pool,
            batch_id,
            interrupt: interrupt.clone(),
            updates,
            entries: Vec::new(),
            groups: Vec::new(),
            ids: HashSet::new(),
            running_count: 0,
            next_yield: 0,
            error_count: 0,
            held_audit,
        };
        run.publish(
            EventDraft::new(EventType::BatchStart, run.session.shared_id())
                .rendered(EventData::empty_object()),
        );
        let mut running = Running::new();
        let mut input_open = true;
        let mut interrupt_seen = false;
        loop {
            run.start_ready(&mut running);
            run.yield_ready();
            if !input_open && run.next_yield == run.entries.len() {
                break;
            }
            tokio::select! {
                Some((index, outcome)) = running.next(), if !running.is_empty() => {
                    run.complete(index, outcome);
                }
                call = calls.next(), if input_open => match call {
                    Some(call) => run.admit(call, &mut running),
                    None => input_open = false,
                },
                () = interrupt.cancelled(), if !interrupt_seen && (input_open || !running.is_empty()) => {
                    interrupt_seen = true;
                }
                // Nothing running, nothing arriving, yet results missing: the scheduling rule
                // makes this impossible, but a stalled batch must still answer every call.
                else => run.fail_unfinished(),
            }
        }
        run.publish(
            EventDraft::new(EventType::BatchEnd, run.session.shared_id())
                .rendered(call_events::batch_end(run.entries.len(), run.error_count)),
        );
        (run.entries.len(), run.error_count)
    }
}

/// Progress goes to the event bus and the batch's update channel at once, never waiting.
fn progress_delivery(
    dispatcher: &Dispatcher,
    session: &SessionState,
    batch_id: &Arc<str>,
    interrupt: &BatchInterrupt,
    updates: &mpsc::UnboundedSender<BatchUpdate>,
) -> Arc<dyn Fn(ProgressUpdate) + Send + Sync> {
    let events = dispatcher.events.clone();
    let actor = interrupt.actor().cloned();
    let session_id = session.shared_id();
    let batch_id = batch_id.clone();
    let updates = updates.clone();
    Arc::new(move |update: ProgressUpdate| {
        events.publish(
            EventDraft::new(EventType::ToolProgress, session_id.clone())
                .batch(batch_id.clone())
                .acted_by(actor.clone())
                .call(update.call_id.clone(), update.tool.clone())
                .data(update.data.clone()),
        );
        let _ = updates.send(BatchUpdate::Progress(update));
    })
}

struct BatchRun<'a> {
    dispatcher: &'a Dispatcher,
    session: Arc<SessionState>,
    pool: Arc<ToolPool>,
    batch_id: Arc<str>,
    interrupt: BatchInterrupt,
    updates: mpsc::UnboundedSender<BatchUpdate>,
    progress: Arc<dyn Fn(ProgressUpdate) + Send + Sync>,
    working_directory: Arc<Path>,
    entries: Vec<Entry>,
    groups: Vec<Group>,
    ids: HashSet<Arc<str>>,
    running_count: usize,
    next_yield: usize,
    error_count: usize,
    held_audit: Option<HeldAudit>,
}

impl BatchRun<'_> {
    /// Publishes one of the batch's events, naming the batch and who asked for it.
    fn publish(&self, draft: EventDraft) {
        let draft = draft
            .batch(self.batch_id.clone())
            .acted_by(self.interrupt.actor().cloned());
        self.dispatcher.events.publish(draft);
    }

    fn call_event(&self, event_type: EventType, index: usize) -> EventDraft {
        let entry = &self.entries[index];
        EventDraft::new(event_type, self.session.shared_id())
            .call(entry.id.clone(), entry.name.clone())
    }

    /// Classifies an arriving call and queues it. Anything that cannot be classified (unknown
    /// tool, malformed or schema-invalid input, a classifier error) is not safe.
    fn admit(&mut self, call: ToolCall, running: &mut Running) {
        let index = self.entries.len();
        let tool = self.pool.resolve(&call.name);
        let safe = match (&tool, call.input.as_json()) {
            (Ok(tool), Some(input)) => {
                tool.is_valid_input(input) && tool.spec().is_concurrency_safe(input, &*self.session)
            }
            _ => false,
        };
        let group = match self.entries.last() {
            Some(last) if joins_previous_group(Some(last.safe), safe) => last.group,
            _ => {
                self.groups.push(Group {
                    safe,
                    abort: CancellationToken::new(),
                });
                self.groups.len() - 1
            }
        };
        let id: Arc<str> = Arc::from(call.id.as_str());
        let duplicate = !self.ids.insert(id.clone());
        self.entries.push(Entry {
            id,
            name: Arc::from(call.name.as_str()),
            call: Some(call),
            tool,
            safe,
            group,
            state: CallState::Queued,
            counted: false,
            result: None,
        });
        self.publish(
            self.call_event(EventType::ToolQueued, index)
                .rendered(call_events::queued(index)),
        );
        if duplicate {
            let message = format!(
                "call id \"{}\" is used more than once in this batch",
                self.entries[index].id
            );
            self.start(index, Some((ErrorKind::Validation, message)), running);
        }
    }

    /// Starts whatever the scheduling rule allows now.
    fn start_ready(&mut self, running: &mut Running) {
        if self.interrupt.is_cancelled() {
            let message = if self.session.is_closed() {
                "the session was closed before this call started".to_owned()
            } else if let Some(by) = self.interrupt.cancelled_by() {
                format!("the call was cancelled by its caller ({by}) before it started")
            } else {
                "the session was interrupted before this call started".to_owned()
            };
            for index in self.next_yield..self.entries.len() {
                if self.entries[index].state == CallState::Queued {
                    self.start(
                        index,
                        Some((ErrorKind::Cancelled, message.clone())),
                        running,
                    );
                }
            }
        }
        let unfinished = |e: &Entry| matches!(e.state, CallState::Queued | CallState::Executing);
        let Some(first) =
            (self.next_yield..self.entries.len()).find(|&i| unfinished(&self.entries[i]))
        else {
            return;
        };
        let group = self.entries[first].group;
        let max = self.dispatcher.settings.max_concurrency.max(1);
        for index in first..self.entries.len() {
            let entry = &self.entries[index];
            if entry.group != group {
                break;
            }
            if entry.state != CallState::Queued {
                continue;
            }
            if self.groups[group].abort.is_cancelled() {
                let message =
                    "a sibling call in this parallel group failed before this call started";
                self.start(index, Some((ErrorKind::Aborted, message.into())), running);
                continue;
            }
            let limit = if entry.safe { max } else { 1 };
            if self.running_count >= limit {
                break;
            }
            self.start(index, None, running);
        }
    }

    /// Sends the call through the pipeline, or through it as already refused.
    fn start(&mut self, index: usize, refusal: Option<(ErrorKind, String)>, running: &mut Running) {
        let Some(call) = self.entries[index].call.take() else {
            return;
        };
        let entry = &mut self.entries[index];
        entry.state = CallState::Executing;
        if refusal.is_none() {
            entry.counted = true;
            self.running_count += 1;
        }
        let tool = entry.tool.clone();
        let group = &self.groups[entry.group];
        if refusal.is_none() && tool.is_ok() {
            let data = call_events::pre(&call.input);
            self.publish(self.call_event(EventType::ToolPre, index).rendered(data));
        }
        let content_limit = self.dispatcher.settings.span_content_limit;
        let span = call_span::call_span(
            &call,
            &tool,
            self.session.id(),
            &self.batch_id,
            content_limit,
        );
        let request = Box::new(CallRequest {
            index,
            batch_id: self.batch_id.clone(),
            ctx: ToolContext {
                session_id: self.session.shared_id(),
                call_id: self.entries[index].id.clone(),
                working_directory: self.working_directory.clone(),
                interactive: self.session.interactive(),
                cancellation: CancellationToken::new(),
                progress: ProgressSink::new(
                    self.entries[index].id.clone(),
                    self.entries[index].name.clone(),
                    self.progress.clone(),
                ),
                session: self.session.clone(),
                tools: self.pool.clone(),
                authorized: PermissionLevel::ReadOnly,
                path_checks: PathChecks::default(),
            },
            session: self.session.clone(),
            call,
            tool,
            refusal,
            admitted_safe: self.entries[index].safe,
            signals: CallSignals {
                interrupt: self.interrupt.clone(),
                abort: group.abort.clone(),
                close: self.session.close_token(),
            },
            held_audit: self.held_audit.clone(),
        });
        // Calls are polled here, inside the batch's task, not spawned: a no-op call then costs
        // no cross-thread wake-up. Tools must not block the thread (blocking work belongs in
        // `spawn_blocking`), which keeps their I/O parallel all the same.
        let pipeline = self.dispatcher.pipeline.clone();
        let mut span = span;
        running.push(Box::pin(async move {
            let called = span.within(AssertUnwindSafe(pipeline.oneshot(request)).catch_unwind());
            let outcome = match called.await {
                Ok(Ok(outcome)) => Some(outcome),
                Ok(Err(never)) => match never {},
                // Tool panics are caught in the pipeline; this is a panic in toold itself.
                Err(_) => None,
            };
            if let Some(outcome) = &outcome {
                call_span::record_outcome(&mut span, outcome, content_limit);
            }
            (index, outcome)
        }));
    }

    fn complete(&mut self, index: usize, outcome: Option<Box<CallOutcome>>) {
        let entry = &self.entries[index];
        let outcome = *outcome.unwrap_or_else(|| lost_call(&entry.id, &entry.name));
        self.session.apply_owned(outcome.context_updates);
        let result = outcome.result;
        let event_type = if result.is_error {
            EventType::ToolError
        } else {
            EventType::ToolPost
        };
        let data = call_events::outcome(&result, outcome.trace_id.as_deref());
        self.publish(self.call_event(event_type, index).rendered(data));
        self.error_count += usize::from(result.is_error);
        let entry = &mut self.entries[index];
        let aborts_siblings = entry
            .tool
            .as_ref()
            .is_ok_and(|tool| tool.spec().aborts_siblings_on_failure);
        let failed = matches!(
            result.error_kind,
            Some(ErrorKind::Execution | ErrorKind::Timeout)
        );
        if entry.safe && aborts_siblings && failed && self.groups[entry.group].safe {
            self.groups[entry.group].abort.cancel();
        }
        if entry.counted {
            self.running_count -= 1;
        }
        entry.state = CallState::Completed;
        entry.result = Some(result);
    }

    /// Completes every call that has no result yet with an internal error.
    fn fail_unfinished(&mut self) {
        tracing::error!(batch_id = %self.batch_id, "dispatch stalled; failing unfinished calls");
        for index in self.next_yield..self.entries.len() {
            if matches!(
                self.entries[index].state,
                CallState::Queued | CallState::Executing
            ) {
                self.entries[index].call = None;
                self.complete(index, None);
            }
        }
    }

    /// Hands out every completed result that is next in request order.
    fn yield_ready(&mut self) {
        while let Some(entry) = self.entries.get_mut(self.next_yield) {
            if entry.state != CallState::Completed {
                break;
            }
            entry.state = CallState::Yielded;
            if let Some(result) = entry.result.take() {
                let index = self.next_yield;
                let _ = self.updates.send(BatchUpdate::Result { index, result });
            }
            self.next_yield += 1;
        }
    }
}

fn lost_call(id: &str, name: &str) -> Box<CallOutcome> {
    let call = ToolCall::new(id, name, serde_json::Value::Null);
    let reason = "the dispatcher panicked while running this call";
    Box::new(CallOutcome {
        result: ToolResult::refused(
            &call,
            ErrorKind::Execution,
            &format!("internal error: {reason}"),
        ),
        executed: false,
        decision: None,
        final_input: None,
        context_updates: Vec::new(),
        additional_context: Vec::new(),
        spill: None,
        trace_id: None,
    })
}
