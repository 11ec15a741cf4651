//! Dispatch: turns a batch of calls into exactly one result per call, in request order.
//!
//! Calls are classified as they arrive (concurrency-safe or not, evaluated fail-closed),
//! grouped by partition-then-gather, and each is run through the per-call [`pipeline`] of
//! `tower` layers. Safe groups run in parallel up to `max_concurrency`; everything else runs
//! alone, across the session's batches too (its call gate, `session::gate`). The
//! [`executor`] streams: a call starts as soon as it arrives and the calls before it allow.
//! Nothing here knows about transports or storage engines.

mod call_events;
mod call_span;
pub mod executor;
pub mod partition;
pub mod pipeline;
pub mod ports;

use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};

pub use executor::{BatchOutcome, BatchUpdate};
pub use partition::{CallGroup, partition};
pub use ports::{
    AuditRecord, AuditSink, HeldAudit, InMemoryAuditLog, InMemoryResultStore, ResultPage,
    ResultStore, SinkError,
};

use crate::event::EventBus;
use crate::hooks::HookChain;
use crate::permission::{ModePolicy, PermissionPolicy};

/// Dispatch settings (`[dispatch]` in the settings file).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchSettings {
    /// Most calls of one parallel group running at once (`TOOLD_MAX_TOOL_CONCURRENCY`).
    pub max_concurrency: usize,
    /// Timeout of a call whose tool sets none.
    #[serde(with = "millis", rename = "call_timeout_ms")]
    pub call_timeout: Duration,
    /// How long a stopped call may take to hand back its partial output.
    #[serde(with = "millis", rename = "cancel_grace_ms")]
    pub cancel_grace: Duration,
    /// How much of a call's input and output its span carries (bytes); `None`: none. Not a
    /// `[dispatch]` key: the server sets it from `[telemetry] capture_content`.
    #[serde(skip)]
    pub span_content_limit: Option<usize>,
}

impl Default for DispatchSettings {
    fn default() -> Self {
        DispatchSettings {
            max_concurrency: 10,
            // Above the shell's own 600 000 ms maximum, so its timeout fires first.
            call_timeout: Duration::from_millis(660_000),
            cancel_grace: Duration::from_millis(2_000),
            span_content_limit: None,
        }
    }
}

mod millis {
    use std::time::Duration;

    use serde::{Deserialize, Deserializer, Serializer};

    pub fn serialize<S: Serializer>(value: &Duration, serializer: S) -> Result<S::Ok, S::Error> {
        serializer.serialize_u64(u64::try_from(value.as_millis()).unwrap_or(u64::MAX))
    }

    pub fn deserialize<'de, D: Deserializer<'de>>(deserializer: D) -> Result<Duration, D::Error> {
        u64::deserialize(deserializer).map(Duration::from_millis)
    }
}

/// What the dispatcher hands results, decisions and events to.
#[derive(Clone)]
pub struct DispatchDeps {
    pub permission: Arc<dyn PermissionPolicy>,
    pub hooks: HookChain,
    pub results: Arc<dyn ResultStore>,
    pub audit: Arc<dyn AuditSink>,
    pub events: EventBus,
}

impl DispatchDeps {
    /// Mode-only permissions, no hooks, in-memory audit and offload.
    pub fn in_memory(events: EventBus) -> DispatchDeps {
        DispatchDeps {
            permission: Arc::new(ModePolicy),
            hooks: HookChain::default(),
            results: Arc::new(InMemoryResultStore::default()),
            audit: Arc::new(InMemoryAuditLog::default()),
            events,
        }
    }
}

/// Runs batches. Cheap to clone; one per daemon.
#[derive(Clone)]
pub struct Dispatcher {
    pipeline: pipeline::Pipeline,
    /// Where whole batches write their held audit rows (the pipeline writes the others).
    audit: Arc<dyn AuditSink>,
    settings: DispatchSettings,
    events: EventBus,
}

impl Dispatcher {
    pub fn new(deps: DispatchDeps, settings: DispatchSettings) -> Dispatcher {
        Dispatcher {
            pipeline: pipeline::build(&deps, &settings),
            audit: deps.audit.clone(),
            settings,
            events: deps.events,
        }
    }

    pub fn settings(&self) -> &DispatchSettings {
        &self.settings
    }

    /// Where audit rows go: for the rows of calls a batch cut off by a restart never got to
    /// record (the service settles such batches).
    pub fn audit_sink(&self) -> &Arc<dyn AuditSink> {
        &self.audit
    }
}
