//! Error kinds of a call's result, and the error a tool returns from its own code.
//!
//! A call's failure is data for the model: every kind here ends up as a result with
//! `is_error: true` and an output that starts with the kind's prefix. Mapping kinds to HTTP or
//! gRPC codes is the doors' business, not this module's.

use std::fmt;

use serde::{Deserialize, Serialize};

/// Why a call's result is an error. The strings are stable: clients match on them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ErrorKind {
    UnknownTool,
    InputValidation,
    Validation,
    PermissionDenied,
    HookBlocked,
    RequiresInteraction,
    Execution,
    Timeout,
    Cancelled,
    Aborted,
    /// A process went over one of its session's limits (an environment's `memory_mb`,
    /// `pids`): it was stopped, and the output names the limit.
    ResourceExhausted,
}

impl ErrorKind {
    /// Every kind, in a stable order (for tables and tests).
    pub const ALL: [ErrorKind; 11] = [
        ErrorKind::UnknownTool,
        ErrorKind::InputValidation,
        ErrorKind::Validation,
        ErrorKind::PermissionDenied,
        ErrorKind::HookBlocked,
        ErrorKind::RequiresInteraction,
        ErrorKind::Execution,
        ErrorKind::Timeout,
        ErrorKind::Cancelled,
        ErrorKind::Aborted,
        ErrorKind::ResourceExhausted,
    ];

    /// The stable string used in results, events and the audit log.
    pub fn as_str(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "unknown_tool",
            ErrorKind::InputValidation => "input_validation",
            ErrorKind::Validation => "validation",
            ErrorKind::PermissionDenied => "permission_denied",
            ErrorKind::HookBlocked => "hook_blocked",
            ErrorKind::RequiresInteraction => "requires_interaction",
            ErrorKind::Execution => "execution",
            ErrorKind::Timeout => "timeout",
            ErrorKind::Cancelled => "cancelled",
            ErrorKind::Aborted => "aborted",
            ErrorKind::ResourceExhausted => "resource_exhausted",
        }
    }

    /// Parses the stable string back into a kind.
    pub fn parse(text: &str) -> Option<ErrorKind> {
        ErrorKind::ALL
            .into_iter()
            .find(|kind| kind.as_str() == text)
    }

    /// The prefix the model sees at the start of the output. DESIGN §3 fixes the first two;
    /// the rest follow the same `NameError: ` pattern so a model can tell kinds apart.
    pub fn prefix(self) -> &'static str {
        match self {
            ErrorKind::UnknownTool => "UnknownToolError: ",
            ErrorKind::InputValidation => "InputValidationError: ",
            ErrorKind::Validation => "ValidationError: ",
            ErrorKind::PermissionDenied => "PermissionDeniedError: ",
            ErrorKind::HookBlocked => "HookBlockedError: ",
            ErrorKind::RequiresInteraction => "RequiresInteractionError: ",
            ErrorKind::Execution => "ExecutionError: ",
            ErrorKind::Timeout => "TimeoutError: ",
            ErrorKind::Cancelled => "CancelledError: ",
            ErrorKind::Aborted => "AbortedError: ",
            ErrorKind::ResourceExhausted => "ResourceExhaustedError: ",
        }
    }

    /// `message` with this kind's prefix in front, unless it already starts with it.
    pub fn format_output(self, message: &str) -> String {
        if message.starts_with(self.prefix()) {
            message.to_owned()
        } else {
            format!("{}{message}", self.prefix())
        }
    }
}

impl fmt::Display for ErrorKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// What a tool's own code may fail with. The dispatcher turns it into an error result.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ToolError {
    /// The input is well-formed but unacceptable (kind `validation`).
    #[error("{0}")]
    Validation(String),
    /// The tool needs a user and the session has none (kind `requires_interaction`).
    #[error("{0}")]
    RequiresInteraction(String),
    /// The tool ran and failed (kind `execution`).
    #[error("{0}")]
    Execution(String),
    /// The tool's own time limit passed (kind `timeout`, as when the dispatcher's does).
    #[error("{0}")]
    Timeout(String),
}

impl ToolError {
    pub fn kind(&self) -> ErrorKind {
        match self {
            ToolError::Validation(_) => ErrorKind::Validation,
            ToolError::RequiresInteraction(_) => ErrorKind::RequiresInteraction,
            ToolError::Execution(_) => ErrorKind::Execution,
            ToolError::Timeout(_) => ErrorKind::Timeout,
        }
    }

    pub fn message(&self) -> &str {
        match self {
            ToolError::Validation(m)
            | ToolError::RequiresInteraction(m)
            | ToolError::Execution(m)
            | ToolError::Timeout(m) => m,
        }
    }

    /// The same error with its message rewritten by `rewrite`.
    pub fn map_message(self, rewrite: impl FnOnce(String) -> String) -> ToolError {
        match self {
            ToolError::Validation(m) => ToolError::Validation(rewrite(m)),
            ToolError::RequiresInteraction(m) => ToolError::RequiresInteraction(rewrite(m)),
            ToolError::Execution(m) => ToolError::Execution(rewrite(m)),
            ToolError::Timeout(m) => ToolError::Timeout(rewrite(m)),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn kinds_round_trip_through_their_strings() {
        for kind in ErrorKind::ALL {
            assert_eq!(ErrorKind::parse(kind.as_str()), Some(kind));
            let json = serde_json::to_string(&kind).unwrap();
            assert_eq!(json, format!("\"{}\"", kind.as_str()));
        }
        assert_eq!(ErrorKind::parse("nope"), None);
    }

    #[test]
    fn design_fixed_prefixes() {
        assert_eq!(
            ErrorKind::InputValidation.prefix(),
            "InputValidationError: "
        );
        assert_eq!(ErrorKind::Validation.prefix(), "ValidationError: ");
        assert_eq!(
            ErrorKind::Validation.format_output("ValidationError: x"),
            "ValidationError: x"
        );
        assert_eq!(
            ErrorKind::Timeout.format_output("slow"),
            "TimeoutError: slow"
        );
    }
}
