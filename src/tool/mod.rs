//! The tool contract: what every tool, built-in or external, declares and implements.
//!
//! A tool is data ([`ToolSpec`]: name, schema, fail-closed flags) plus behaviour (the [`Tool`]
//! trait: semantic validation and execution). The dispatcher reads the spec to decide how a call
//! is scheduled and authorised; it never asks a tool to judge its own safety outside the spec.
//! This module imports nothing else of the crate (`tests/architecture.rs` checks it): it sees
//! a session through [`SessionView`] and the pool through [`ToolCatalog`], and owns the
//! vocabulary both sides speak ([`PermissionLevel`], tool-name rules, path resolution).

mod call;
mod context;
mod error;
mod level;
mod names;
mod output;
pub mod paths;
mod spec;
pub mod trace;

pub use call::{CallInput, OffloadedResult, Recorded, ToolCall, ToolResult};
pub use context::{
    DeferredTool, EmptyCatalog, EnvironmentLimits, EnvironmentView, PathChecks, ProgressSink,
    ProgressUpdate, SessionView, ToolCatalog, ToolContext,
};
pub use error::{ErrorKind, ToolError};
pub use level::{PermissionLevel, UnknownPermissionMode};
pub use names::{AGENT_TOOL, closest, is_external_tool_name, is_valid_tool_name};
pub use output::{ContextUpdate, FileStateEntry, SpilledOutput, ToolOutput};
pub use spec::{
    BuildError, ConcurrencyClass, FlagFn, InputFlag, InputPermission, InterruptBehavior,
    PermissionFn, PreviewStyle, ToolSpec, ToolSpecBuilder,
};

use async_trait::async_trait;
use serde_json::Value;

/// A tool the dispatcher can run.
///
/// Implementations hold their [`ToolSpec`] and implement execution. Input-dependent flags
/// (read-only, concurrency-safe, destructive, required permission) live in the spec so that
/// every tool answers them the same fail-closed way.
#[async_trait]
pub trait Tool: Send + Sync + 'static {
    /// The tool's metadata, built once with [`ToolSpec::builder`].
    fn spec(&self) -> &ToolSpec;

    /// Whether the tool is offered in this session at all (e.g. a tool that needs a feature
    /// the session lacks). Defaults to enabled.
    fn is_enabled(&self, _session: &dyn SessionView) -> bool {
        true
    }

    /// Semantic validation, run after the input passed the JSON schema. Return
    /// [`ToolError::Validation`] to refuse the call before it is authorised or executed.
    async fn validate_input(&self, _input: &Value, _ctx: &ToolContext) -> Result<(), ToolError> {
        Ok(())
    }

    /// Runs the call. Long-running work should watch `ctx.cancellation` and return what it
    /// has so far when it fires; the dispatcher waits a short grace period for that output.
    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError>;
}
