//! The per-call pipeline: one `tower` layer per lifecycle phase around the tool's execution.
//!
//! ```text
//! audit → offload → lookup → schema → semantic → permission → hooks(pre … post) → execute
//! ```
//! Audit is outermost so that it sees every call's final result, whatever refused it. Offload
//! sits outside the refusing phases but only touches outputs that came from execution. A phase
//! that refuses a call returns that call's error outcome without calling the phases inside it.
//! Each phase is a [`Phase`]; [`PhaseLayer`] turns it into a `tower::Layer`, so a phase file
//! holds only what the phase does.

mod audit;
mod execute;
mod hooks;
mod lookup;
mod offload;
mod permission;
mod schema;
mod semantic;

use std::convert::Infallible;
use std::future::Future;
use std::sync::Arc;
use std::task::{Context, Poll};

use futures::future::BoxFuture;
use serde_json::Value;
use tokio_util::sync::CancellationToken;
use tower::util::BoxCloneSyncService;
use tower::{Layer, Service, ServiceBuilder, ServiceExt};

use super::{DispatchDeps, DispatchSettings};
use crate::dispatch::ports::HeldAudit;
use crate::permission::PermissionDecision;
use crate::registry::{RegisteredTool, UnknownTool};
use crate::session::{BatchInterrupt, SessionState};
use crate::tool::{
    CallInput, ContextUpdate, ErrorKind, SpilledOutput, ToolCall, ToolContext, ToolResult,
};

/// Why the executor stops a running call (the parallel group's `abort` token is the
/// executor's).
#[derive(Clone, Debug)]
pub struct CallSignals {
    /// The batch's interrupt (the session's, or the batch's alone); honoured by tools whose
    /// behaviour is `cancel`.
    pub interrupt: BatchInterrupt,
    /// The parallel group's abort (a sibling failed); honoured by every tool.
    pub abort: CancellationToken,
    /// The session's close; honoured by every tool.
    pub close: CancellationToken,
}

/// One call on its way through the pipeline. Requests and outcomes travel boxed, so each
/// layer moves a pointer rather than a few hundred bytes.
pub struct CallRequest {
    pub index: usize,
    pub batch_id: Arc<str>,
    pub call: ToolCall,
    pub tool: Result<Arc<RegisteredTool>, UnknownTool>,
    /// Set when the executor refused the call before it could start (duplicate id,
    /// interrupted, aborted); the lookup phase turns it into the call's result.
    pub refusal: Option<(ErrorKind, String)>,
    /// Whether the executor admitted the call to a parallel group.
    pub admitted_safe: bool,
    pub ctx: ToolContext,
    /// The session itself, for the phases that act on it (the permission check may remember
    /// an answer in it); the tool sees only `ctx.session`, a read-only view.
    pub session: Arc<SessionState>,
    pub signals: CallSignals,
    /// Set when the batch writes its calls' audit rows itself, all at once (see `HeldAudit`).
    pub held_audit: Option<HeldAudit>,
}

impl CallRequest {
    /// The parsed input; only valid after the schema phase let the call through.
    pub fn input(&self) -> &Value {
        static EMPTY: Value = Value::Null;
        self.call.input.as_json().unwrap_or(&EMPTY)
    }

    /// [`CallRequest::input`] taken out, leaving `null` (for the phase that holds the request
    /// last, so the input is not copied again).
    pub fn take_input(&mut self) -> Value {
        match &mut self.call.input {
            CallInput::Json(input) => std::mem::take(input),
            CallInput::Malformed { .. } => Value::Null,
        }
    }
}

/// What the pipeline returns for a call.
#[derive(Debug)]
pub struct CallOutcome {
    pub result: ToolResult,
    /// Whether the tool's execution was reached (offload and post hooks act only then).
    pub executed: bool,
    pub decision: Option<PermissionDecision>,
    /// The input as finally executed (hooks may have changed it), or as received when a
    /// phase refused the call. `None` for a call toold lost to its own panic, and once the
    /// audit phase has taken it for the call's row.
    pub final_input: Option<Value>,
    pub context_updates: Vec<ContextUpdate>,
    /// Hooks' additional context, appended to the output after offload made its preview.
    pub additional_context: Vec<String>,
    /// The full output of an executed call whose tool spilled it to a file; the offload
    /// phase always stores it and deletes the file.
    pub spill: Option<SpilledResult>,
    /// The trace the call ran in (set by the audit phase, for the row and the call's event).
    pub trace_id: Option<Arc<str>>,
}

/// A result whose full text is `lead` (what the result puts before the tool's output: an
/// error prefix, a stop message) followed by the spilled file.
#[derive(Debug)]
pub struct SpilledResult {
    pub lead: String,
    pub output: Arc<SpilledOutput>,
}

impl CallOutcome {
    /// The error outcome of a phase that refuses the call.
    pub fn refused(request: &CallRequest, kind: ErrorKind, message: &str) -> Box<CallOutcome> {
        Box::new(CallOutcome {
            result: ToolResult::refused(&request.call, kind, message),
            executed: false,
            decision: None,
            final_input: Some(request.call.input.to_record()),
            context_updates: Vec::new(),
            additional_context: Vec::new(),
            spill: None,
            trace_id: None,
        })
    }
}

/// The inner part of the pipeline a phase hands the call to.
pub trait Next:
    Service<Box<CallRequest>, Response = Box<CallOutcome>, Error = Infallible, Future: Send>
    + Send
    + 'static
{
}

impl<S> Next for S where
    S: Service<Box<CallRequest>, Response = Box<CallOutcome>, Error = Infallible, Future: Send>
        + Send
        + 'static
{
}

/// Runs the rest of the pipeline.
pub async fn run_next<S: Next>(next: S, request: Box<CallRequest>) -> Box<CallOutcome> {
    match next.oneshot(request).await {
        Ok(outcome) => outcome,
        Err(never) => match never {},
    }
}

/// One lifecycle phase.
pub trait Phase: Send + Sync + 'static {
    fn run<S: Next>(
        self: Arc<Self>,
        request: Box<CallRequest>,
        next: S,
    ) -> impl Future<Output = Box<CallOutcome>> + Send;
}

/// A [`Phase`] as a `tower::Layer`.
pub struct PhaseLayer<P> {
    phase: Arc<P>,
}

impl<P> PhaseLayer<P> {
    pub fn new(phase: P) -> PhaseLayer<P> {
        PhaseLayer {
            phase: Arc::new(phase),
        }
    }
}

impl<P, S> Layer<S> for PhaseLayer<P> {
    type Service = PhaseService<P, S>;

    fn layer(&self, inner: S) -> Self::Service {
        PhaseService {
            phase: self.phase.clone(),
            inner,
        }
    }
}

/// The service a [`PhaseLayer`] wraps around the inner pipeline.
pub struct PhaseService<P, S> {
    phase: Arc<P>,
    inner: S,
}

impl<P, S: Clone> Clone for PhaseService<P, S> {
    fn clone(&self) -> Self {
        PhaseService {
            phase: self.phase.clone(),
            inner: self.inner.clone(),
        }
    }
}

impl<P: Phase, S: Next + Clone> Service<Box<CallRequest>> for PhaseService<P, S> {
    type Response = Box<CallOutcome>;
    type Error = Infallible;
    type Future = BoxFuture<'static, Result<Box<CallOutcome>, Infallible>>;

    fn poll_ready(&mut self, _cx: &mut Context<'_>) -> Poll<Result<(), Infallible>> {
        // Every phase and the execute service are always ready; back-pressure is the
        // executor's concurrency limit, not the pipeline's.
        Poll::Ready(Ok(()))
    }

    fn call(&mut self, request: Box<CallRequest>) -> Self::Future {
        let phase = self.phase.clone();
        let inner = self.inner.clone();
        Box::pin(async move { Ok(phase.run(request, inner).await) })
    }
}

/// The assembled pipeline, cheap to clone per call.
pub type Pipeline = BoxCloneSyncService<Box<CallRequest>, Box<CallOutcome>, Infallible>;

/// Builds the stack in the order of DESIGN §1 (outermost first).
pub fn build(deps: &DispatchDeps, settings: &DispatchSettings) -> Pipeline {
    let stack = ServiceBuilder::new()
        .layer(PhaseLayer::new(audit::Audit::new(deps.audit.clone())))
        .layer(PhaseLayer::new(offload::Offload::new(deps.results.clone())))
        .layer(PhaseLayer::new(lookup::Lookup::new(deps.events.clone())))
        .layer(PhaseLayer::new(schema::SchemaValidation))
        .layer(PhaseLayer::new(semantic::SemanticValidation))
        .layer(PhaseLayer::new(permission::Permission::new(
            deps.permission.clone(),
            deps.events.clone(),
        )))
        .layer(PhaseLayer::new(hooks::Hooks::new(
            deps.hooks.clone(),
            deps.permission.clone(),
            deps.events.clone(),
        )))
        .service(execute::Execute::new(settings));
    BoxCloneSyncService::new(stack)
}
