//! `ToolSpec`: a tool's metadata as data, and the builder that applies fail-closed defaults.
//!
//! Every flag a tool leaves unset takes its most restrictive value: not read-only, not
//! concurrency-safe, destructive, needs `danger_full_access`, class `unsafe`, blocks on
//! interrupt. Input-dependent flags are functions of the parsed input; an error or a panic in
//! one yields the safe answer. `max_result_size_chars` has no default: a tool must say whether
//! its output can be large.

use std::fmt;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use super::{PermissionLevel, SessionView, ToolContext};

/// Classifies an input in a session (whose workspace decides, say, whether a path is inside);
/// `Err` means "cannot tell" and yields the safe answer.
pub type FlagFn = Arc<dyn Fn(&Value, &dyn SessionView) -> Result<bool, String> + Send + Sync>;

/// Computes the permission an input needs in its call (the session through `ctx.session`, and
/// what the call's validation already found about its paths in `ctx.path_checks`); `Err`
/// yields `danger_full_access`.
pub type PermissionFn =
    Arc<dyn Fn(&Value, &ToolContext) -> Result<PermissionLevel, String> + Send + Sync>;

/// A boolean flag that may depend on the call's input.
#[derive(Clone)]
pub enum InputFlag {
    Fixed(bool),
    /// Evaluated at dispatch time on the parsed input. `Err` means "cannot tell".
    Dynamic(FlagFn),
}

impl InputFlag {
    /// Evaluates the flag; an error or a panic yields `safe`.
    pub fn evaluate(&self, input: &Value, session: &dyn SessionView, safe: bool) -> bool {
        match self {
            InputFlag::Fixed(value) => *value,
            InputFlag::Dynamic(f) => match catch_unwind(AssertUnwindSafe(|| f(input, session))) {
                Ok(Ok(value)) => value,
                Ok(Err(_)) | Err(_) => safe,
            },
        }
    }

    /// The value when it does not depend on input.
    pub fn fixed(&self) -> Option<bool> {
        match self {
            InputFlag::Fixed(value) => Some(*value),
            InputFlag::Dynamic(_) => None,
        }
    }
}

impl fmt::Debug for InputFlag {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputFlag::Fixed(value) => write!(f, "Fixed({value})"),
            InputFlag::Dynamic(_) => f.write_str("Dynamic"),
        }
    }
}

/// The permission a call needs, possibly depending on its input.
#[derive(Clone)]
pub enum InputPermission {
    Fixed(PermissionLevel),
    /// `floor` is the least any input can need; the pool's mode filter uses it.
    Dynamic {
        floor: PermissionLevel,
        level: PermissionFn,
    },
}

impl InputPermission {
    /// Evaluates the permission; an error or a panic yields `danger_full_access`.
    pub fn evaluate(&self, input: &Value, ctx: &ToolContext) -> PermissionLevel {
        match self {
            InputPermission::Fixed(level) => *level,
            InputPermission::Dynamic { floor, level } => {
                match catch_unwind(AssertUnwindSafe(|| level(input, ctx))) {
                    // A classifier may not claim less than the declared floor.
                    Ok(Ok(needed)) => needed.max(*floor),
                    Ok(Err(_)) | Err(_) => PermissionLevel::DangerFullAccess,
                }
            }
        }
    }

    /// The least any input can need.
    pub fn floor(&self) -> PermissionLevel {
        match self {
            InputPermission::Fixed(level) => *level,
            InputPermission::Dynamic { floor, .. } => *floor,
        }
    }
}

impl fmt::Debug for InputPermission {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            InputPermission::Fixed(level) => write!(f, "Fixed({level})"),
            InputPermission::Dynamic { floor, .. } => write!(f, "Dynamic(floor {floor})"),
        }
    }
}

/// How a tool may share the machine with other calls (the sandbox reads `Unsafe`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ConcurrencyClass {
    ReadOnly,
    WriteExclusive,
    /// Runs alone, isolated in the sandbox.
    Unsafe,
}

/// What a session interrupt does to a running call.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum InterruptBehavior {
    /// The call is cancelled (kind `cancelled`).
    Cancel,
    /// The call runs to completion.
    Block,
}

/// What an offloaded output's preview shows.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum PreviewStyle {
    Head,
    /// Shell output: the end usually holds the error, so show both ends.
    HeadAndTail,
}

/// A tool's metadata (DESIGN §2). Build it with [`ToolSpec::builder`].
#[derive(Clone, Debug)]
pub struct ToolSpec {
    pub name: String,
    pub aliases: Vec<String>,
    pub description: String,
    pub input_schema: Value,
    pub output_schema: Option<Value>,
    pub read_only: InputFlag,
    pub concurrency_safe: InputFlag,
    pub destructive: InputFlag,
    pub required_permission: InputPermission,
    pub concurrency_class: ConcurrencyClass,
    pub interrupt_behavior: InterruptBehavior,
    pub requires_user_interaction: bool,
    pub should_defer: bool,
    pub always_load: bool,
    /// `None`: never offload (only for tools whose output is already bounded).
    pub max_result_size_chars: Option<usize>,
    pub preview_style: PreviewStyle,
    /// MCP `idempotentHint`: repeating the call with the same input has no further effect.
    pub idempotent: bool,
    /// MCP `openWorldHint`: the tool reaches beyond the workspace (network, other systems).
    pub open_world: bool,
    /// When this tool fails inside a parallel batch, its running siblings are aborted.
    pub aborts_siblings_on_failure: bool,
    /// Overrides the dispatcher's default per-call timeout.
    pub timeout: Option<Duration>,
}

impl ToolSpec {
    pub fn builder(name: impl Into<String>) -> ToolSpecBuilder {
        ToolSpecBuilder::new(name.into())
    }

    /// `is_read_only(input)`; an error or panic counts as `false`.
    pub fn is_read_only(&self, input: &Value, session: &dyn SessionView) -> bool {
        self.read_only.evaluate(input, session, false)
    }

    /// `is_concurrency_safe(input)`; an error or panic counts as `false`.
    pub fn is_concurrency_safe(&self, input: &Value, session: &dyn SessionView) -> bool {
        self.concurrency_safe.evaluate(input, session, false)
    }

    /// `is_destructive(input)`; an error or panic counts as `true`.
    pub fn is_destructive(&self, input: &Value, session: &dyn SessionView) -> bool {
        self.destructive.evaluate(input, session, true)
    }

    /// `required_permission(input)`; an error or panic counts as `danger_full_access`.
    pub fn required_permission(&self, input: &Value, ctx: &ToolContext) -> PermissionLevel {
        self.required_permission.evaluate(input, ctx)
    }
}

/// Why a spec does not build.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum BuildError {
    #[error(
        "tool \"{name}\" does not set max_result_size_chars; every tool must say whether its output may be offloaded"
    )]
    MissingMaxResultSize { name: String },
    #[error("tool \"{name}\" has no description")]
    MissingDescription { name: String },
    #[error("tool \"{name}\" has an input schema that is not a JSON object")]
    SchemaNotObject { name: String },
}

impl BuildError {
    /// The tool whose spec did not build.
    pub fn tool(&self) -> &str {
        match self {
            BuildError::MissingMaxResultSize { name }
            | BuildError::MissingDescription { name }
            | BuildError::SchemaNotObject { name } => name,
        }
    }
}

/// Builds a [`ToolSpec`], leaving every unset flag on its fail-closed value.
#[must_use]
pub struct ToolSpecBuilder {
    spec: ToolSpec,
    max_result_size_set: bool,
}

impl ToolSpecBuilder {
    fn new(name: String) -> Self {
        ToolSpecBuilder {
            spec: ToolSpec {
                name,
                aliases: Vec::new(),
                description: String::new(),
                input_schema: serde_json::json!({"type": "object"}),
                output_schema: None,
                read_only: InputFlag::Fixed(false),
                concurrency_safe: InputFlag::Fixed(false),
                destructive: InputFlag::Fixed(true),
                required_permission: InputPermission::Fixed(PermissionLevel::DangerFullAccess),
                concurrency_class: ConcurrencyClass::Unsafe,
                interrupt_behavior: InterruptBehavior::Block,
                requires_user_interaction: false,
                should_defer: false,
                always_load: false,
                max_result_size_chars: None,
                preview_style: PreviewStyle::Head,
                idempotent: false,
                open_world: true,
                aborts_siblings_on_failure: false,
                timeout: None,
            },
            max_result_size_set: false,
        }
    }

    pub fn alias(mut self, alias: impl Into<String>) -> Self {
        self.spec.aliases.push(alias.into());
        self
    }

    pub fn description(mut self, description: impl Into<String>) -> Self {
        self.spec.description = description.into();
        self
    }

    pub fn input_schema(mut self, schema: Value) -> Self {
        self.spec.input_schema = schema;
        self
    }

    pub fn output_schema(mut self, schema: Value) -> Self {
        self.spec.output_schema = Some(schema);
        self
    }

    pub fn read_only(mut self, value: bool) -> Self {
        self.spec.read_only = InputFlag::Fixed(value);
        self
    }

    pub fn read_only_if(
        mut self,
        f: impl Fn(&Value, &dyn SessionView) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.spec.read_only = InputFlag::Dynamic(Arc::new(f));
        self
    }

    pub fn concurrency_safe(mut self, value: bool) -> Self {
        self.spec.concurrency_safe = InputFlag::Fixed(value);
        self
    }

    pub fn concurrency_safe_if(
        mut self,
        f: impl Fn(&Value, &dyn SessionView) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.spec.concurrency_safe = InputFlag::Dynamic(Arc::new(f));
        self
    }

    pub fn destructive(mut self, value: bool) -> Self {
        self.spec.destructive = InputFlag::Fixed(value);
        self
    }

    pub fn destructive_if(
        mut self,
        f: impl Fn(&Value, &dyn SessionView) -> Result<bool, String> + Send + Sync + 'static,
    ) -> Self {
        self.spec.destructive = InputFlag::Dynamic(Arc::new(f));
        self
    }

    pub fn permission(mut self, level: PermissionLevel) -> Self {
        self.spec.required_permission = InputPermission::Fixed(level);
        self
    }

    /// An input-dependent permission that never goes below `floor`.
    pub fn permission_for(
        mut self,
        floor: PermissionLevel,
        f: impl Fn(&Value, &ToolContext) -> Result<PermissionLevel, String> + Send + Sync + 'static,
    ) -> Self {
        self.spec.required_permission = InputPermission::Dynamic {
            floor,
            level: Arc::new(f),
        };
        self
    }

    pub fn concurrency_class(mut self, class: ConcurrencyClass) -> Self {
        self.spec.concurrency_class = class;
        self
    }

    pub fn interrupt_behavior(mut self, behavior: InterruptBehavior) -> Self {
        self.spec.interrupt_behavior = behavior;
        self
    }

    pub fn requires_user_interaction(mut self, value: bool) -> Self {
        self.spec.requires_user_interaction = value;
        self
    }

    pub fn should_defer(mut self, value: bool) -> Self {
        self.spec.should_defer = value;
        self
    }

    pub fn always_load(mut self, value: bool) -> Self {
        self.spec.always_load = value;
        self
    }

    /// Required. `None` means the output is bounded by construction and never offloaded.
    pub fn max_result_size_chars(mut self, limit: Option<usize>) -> Self {
        self.spec.max_result_size_chars = limit;
        self.max_result_size_set = true;
        self
    }

    pub fn preview_style(mut self, style: PreviewStyle) -> Self {
        self.spec.preview_style = style;
        self
    }

    pub fn idempotent(mut self, value: bool) -> Self {
        self.spec.idempotent = value;
        self
    }

    pub fn open_world(mut self, value: bool) -> Self {
        self.spec.open_world = value;
        self
    }

    pub fn aborts_siblings_on_failure(mut self, value: bool) -> Self {
        self.spec.aborts_siblings_on_failure = value;
        self
    }

    pub fn timeout(mut self, timeout: Duration) -> Self {
        self.spec.timeout = Some(timeout);
        self
    }

    /// Checks what a spec cannot do without. The name itself is checked when registered.
    pub fn build(self) -> Result<ToolSpec, BuildError> {
        let name = self.spec.name.clone();
        if !self.max_result_size_set {
            return Err(BuildError::MissingMaxResultSize { name });
        }
        if self.spec.description.trim().is_empty() {
            return Err(BuildError::MissingDescription { name });
        }
        if !self.spec.input_schema.is_object() {
            return Err(BuildError::SchemaNotObject { name });
        }
        Ok(self.spec)
    }
}

#[cfg(test)]
#[path = "spec_tests.rs"]
mod tests;
