//! What a provider declares and the checks a registration passes before its tools exist:
//! names, schemas, flags (with their fail-closed defaults), who may register what. Pure
//! functions of the declaration and the registering principal; the hub adds what depends on
//! who else is connected (a name held by another principal, a later connection's tools).

use std::collections::BTreeSet;
use std::sync::{Arc, Weak};
use std::time::Duration;

use serde::{Deserialize, Serialize};
use serde_json::{Value, json};

use super::tool::ProvidedTool;
use super::{AGENT_PROVIDER, ProviderHub};
use crate::permission::{Principal, Role};
use crate::registry::{RegisteredTool, ToolSource, is_valid_tool_name};
use crate::tool::{InterruptBehavior, PermissionLevel, ToolSpec};

/// A provided tool's result longer than this is offloaded, unless it declares its own limit.
pub const DEFAULT_MAX_RESULT_CHARS: usize = 30_000;
/// How long toold waits for a provided tool's result, unless it declares its own timeout.
pub const DEFAULT_TIMEOUT_MS: u64 = 120_000;
/// At most this many characters in a provider's name and in each of its tools' names, so
/// that every `{provider}__{tool}` fits the contract's 64 (and each part can be stated alone,
/// as the OpenAPI document does).
pub const MAX_NAME_CHARS: usize = 31;
/// At most this many tools per provider.
pub const MAX_TOOLS: usize = 256;

/// One tool as its provider declares it (gRPC `ProvidedToolSpec`, an HTTP registration's
/// `tools[]`). Unset flags take the fail-closed values.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ToolDeclaration {
    /// The provider's own name for the tool.
    pub name: String,
    pub description: String,
    /// A JSON Schema object (`"type": "object"`); `None`: `{"type": "object"}`.
    pub input_schema: Option<Value>,
    pub read_only: bool,
    pub concurrency_safe: bool,
    /// `None`: destructive.
    pub destructive: Option<bool>,
    /// `None`: `danger_full_access`.
    pub required_permission: Option<PermissionLevel>,
    /// `None`: `block`.
    pub interrupt_behavior: Option<InterruptBehavior>,
    /// `None`: [`DEFAULT_MAX_RESULT_CHARS`].
    #[serde(deserialize_with = "whole_number")]
    pub max_result_size_chars: Option<u64>,
    /// `None`: [`DEFAULT_TIMEOUT_MS`].
    #[serde(deserialize_with = "whole_number")]
    pub timeout_ms: Option<u64>,
}

/// A non-negative whole number, or null: `5` and `5.0` alike, as JSON Schema's `integer`
/// counts both (a client's JSON library may write either).
fn whole_number<'de, D: serde::Deserializer<'de>>(
    deserializer: D,
) -> Result<Option<u64>, D::Error> {
    use serde::de::Error;
    match Option::<serde_json::Number>::deserialize(deserializer)? {
        None => Ok(None),
        Some(number) => number
            .as_u64()
            .or_else(|| {
                number
                    .as_f64()
                    .filter(|f| f.fract() == 0.0 && *f >= 0.0 && *f < 18_446_744_073_709_551_616.0)
                    .map(|f| f as u64)
            })
            .map(Some)
            .ok_or_else(|| {
                D::Error::custom(format!(
                    "expected a non-negative whole number, got {number}"
                ))
            }),
    }
}

/// A registration: `{provider, tools, global}`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct Registration {
    pub provider: String,
    pub tools: Vec<ToolDeclaration>,
    pub global: bool,
}

/// Why a registration was refused.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RefusalKind {
    /// A bad name, schema or flag (INVALID_ARGUMENT, HTTP 400).
    Invalid,
    /// The name is held by another principal, or connected with other tools, or a tool name
    /// is declared twice (ALREADY_EXISTS, HTTP 409).
    Held,
    /// `global` by a non-admin, or an observer registering (PERMISSION_DENIED, HTTP 403).
    Forbidden,
}

/// A refused registration: what kind, and a message saying what was wrong.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct Refusal {
    pub kind: RefusalKind,
    pub message: String,
}

impl Refusal {
    pub(super) fn new(kind: RefusalKind, message: impl Into<String>) -> Refusal {
        Refusal {
            kind,
            message: message.into(),
        }
    }

    fn invalid(message: impl Into<String>) -> Refusal {
        Refusal::new(RefusalKind::Invalid, message)
    }
}

/// Whether `name` can be a provider's name: `^[A-Za-z0-9_-]+$`, without `__` (which
/// separates it from its tools' names) and not `mcp` (whose names are the MCP bridge's).
pub fn check_provider_name(name: &str) -> Result<(), String> {
    let plain = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
    if !plain {
        return Err(format!(
            "provider name \"{name}\" does not match ^[A-Za-z0-9_-]+$"
        ));
    }
    if name.len() > MAX_NAME_CHARS {
        return Err(format!(
            "provider name \"{name}\" is longer than {MAX_NAME_CHARS} characters"
        ));
    }
    if name.contains("__") || name == "mcp" {
        return Err(format!(
            "provider name \"{name}\" is reserved: it may not contain \"__\" nor be \"mcp\""
        ));
    }
    Ok(())
}

/// The name a provided tool is called by.
pub fn full_name(provider: &str, tool: &str) -> String {
    format!("{provider}__{tool}")
}

/// Checks `registration` by `principal` against everything but the other connections;
/// `builtins` are the names (and aliases) a provided tool may not take.
pub(super) fn check(
    registration: &Registration,
    principal: &Principal,
    builtins: &BTreeSet<String>,
) -> Result<(), Refusal> {
    if principal.role == Role::Observer {
        return Err(Refusal::new(
            RefusalKind::Forbidden,
            format!("{principal} may not provide tools: observers change nothing"),
        ));
    }
    if registration.global && !principal.is_admin() {
        return Err(Refusal::new(
            RefusalKind::Forbidden,
            format!(
                "{principal} may not register a global provider: only an admin may put tools in every session's pool"
            ),
        ));
    }
    let provider = registration.provider.as_str();
    check_provider_name(provider).map_err(Refusal::invalid)?;
    if registration.tools.is_empty() && provider != AGENT_PROVIDER {
        return Err(Refusal::invalid(format!(
            "provider \"{provider}\" declares no tools"
        )));
    }
    if registration.tools.len() > MAX_TOOLS {
        return Err(Refusal::invalid(format!(
            "provider \"{provider}\" declares {} tools; at most {MAX_TOOLS}",
            registration.tools.len()
        )));
    }
    let mut seen = BTreeSet::new();
    for tool in &registration.tools {
        let name = tool.name.as_str();
        let full = full_name(provider, name);
        if name.is_empty() || !is_valid_tool_name(name) || !is_valid_tool_name(&full) {
            return Err(Refusal::invalid(format!(
                "tool name \"{name}\" of provider \"{provider}\": \"{full}\" must match ^[A-Za-z0-9_-]{{1,64}}$"
            )));
        }
        if name.len() > MAX_NAME_CHARS {
            return Err(Refusal::invalid(format!(
                "tool name \"{name}\" of provider \"{provider}\" is longer than {MAX_NAME_CHARS} characters"
            )));
        }
        // Declared twice: the name already exists (409 / ALREADY_EXISTS), as a held one does.
        if !seen.insert(name) {
            return Err(Refusal::new(
                RefusalKind::Held,
                format!("provider \"{provider}\" declares the tool \"{name}\" twice"),
            ));
        }
        if builtins.contains(&full) {
            return Err(Refusal::invalid(format!(
                "tool \"{full}\" would shadow the built-in tool of that name"
            )));
        }
        if tool.timeout_ms == Some(0) || tool.max_result_size_chars == Some(0) {
            return Err(Refusal::invalid(format!(
                "tool \"{full}\": timeout_ms and max_result_size_chars must be positive when set"
            )));
        }
    }
    Ok(())
}

/// Whether the `agent` provider's declaration `tool` is its executor of the built-in `agent`
/// tool (not published as `agent__agent`).
pub(super) fn is_agent_executor(provider: &str, tool: &str) -> bool {
    provider == AGENT_PROVIDER && tool == AGENT_PROVIDER
}

/// `declaration` of `provider` as a registered tool whose calls go through `hub`.
pub(super) fn build_tool(
    hub: &Weak<ProviderHub>,
    provider: &str,
    declaration: &ToolDeclaration,
) -> Result<Arc<RegisteredTool>, Refusal> {
    let full = full_name(provider, &declaration.name);
    let description = if declaration.description.trim().is_empty() {
        format!(
            "The tool \"{}\" of the provider \"{provider}\".",
            declaration.name
        )
    } else {
        declaration.description.clone()
    };
    let schema = declaration
        .input_schema
        .clone()
        .unwrap_or_else(|| json!({"type": "object"}));
    let max_chars = declaration
        .max_result_size_chars
        .map_or(DEFAULT_MAX_RESULT_CHARS, |n| {
            usize::try_from(n).unwrap_or(usize::MAX)
        });
    let spec = ToolSpec::builder(full.clone())
        .description(description)
        .input_schema(schema)
        .read_only(declaration.read_only)
        .concurrency_safe(declaration.concurrency_safe)
        .destructive(declaration.destructive.unwrap_or(true))
        .permission(
            declaration
                .required_permission
                .unwrap_or(PermissionLevel::DangerFullAccess),
        )
        .interrupt_behavior(
            declaration
                .interrupt_behavior
                .unwrap_or(InterruptBehavior::Block),
        )
        .max_result_size_chars(Some(max_chars))
        .timeout(Duration::from_millis(
            declaration.timeout_ms.unwrap_or(DEFAULT_TIMEOUT_MS),
        ))
        .build()
        .map_err(|err| Refusal::invalid(err.to_string()))?;
    let tool = ProvidedTool::new(spec, hub.clone(), provider, &declaration.name);
    RegisteredTool::new(Arc::new(tool), ToolSource::External)
        .map(Arc::new)
        .map_err(|err| Refusal::invalid(err.to_string()))
}
