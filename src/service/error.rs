//! Errors of the service's operations. Each carries an [`ErrorCode`]; the doors map codes to
//! HTTP statuses and gRPC codes through one table. A call's own failure is never one of these:
//! it is a result with `is_error: true`.

use std::fmt;

use crate::registry::calls::EnvelopeError;
use crate::store::StoreError;

/// The stable error codes of the API (`{"error":{"code":…}}`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum ErrorCode {
    /// A malformed request (400).
    InvalidRequest,
    /// A missing or wrong bearer token (401).
    Unauthenticated,
    /// The caller's role does not allow the operation: an observer's write (403).
    Forbidden,
    /// The session's mode, rules or hooks refuse what the request would do to its workspace
    /// (a PUT into a `read_only` session, a path outside the workspace) (403).
    PermissionDenied,
    /// An unknown session, batch, result or approval (404).
    NotFound,
    /// Duplicate call ids, or an idempotency key reused with a different body (409).
    Conflict,
    /// A body over the size limit (413).
    PayloadTooLarge,
    /// Too many requests at once (429).
    Overloaded,
    /// The caller is over one of its `[limits]` (429 with `Retry-After`; see `limits`).
    LimitExceeded,
    /// The daemon is shutting down (503).
    ShuttingDown,
    /// Nobody can run the session right now (its daemon stopped and no other has adopted it
    /// yet, or the daemon it was forwarded to does not run it): retry shortly (503 with
    /// `Retry-After`).
    Unavailable,
    /// The request took longer than the request timeout (408).
    Timeout,
    /// Something toold depends on answered wrongly or not at all: an image's registry down,
    /// a blob that does not match its digest (502).
    BadGateway,
    /// Something inside toold failed (500).
    Internal,
}

impl ErrorCode {
    pub const ALL: [ErrorCode; 14] = [
        ErrorCode::InvalidRequest,
        ErrorCode::Unauthenticated,
        ErrorCode::Forbidden,
        ErrorCode::PermissionDenied,
        ErrorCode::NotFound,
        ErrorCode::Conflict,
        ErrorCode::PayloadTooLarge,
        ErrorCode::Overloaded,
        ErrorCode::LimitExceeded,
        ErrorCode::ShuttingDown,
        ErrorCode::Unavailable,
        ErrorCode::Timeout,
        ErrorCode::BadGateway,
        ErrorCode::Internal,
    ];

    pub fn as_str(self) -> &'static str {
        match self {
            ErrorCode::InvalidRequest => "invalid_request",
            ErrorCode::Unauthenticated => "unauthenticated",
            ErrorCode::Forbidden => "forbidden",
            ErrorCode::PermissionDenied => "permission_denied",
            ErrorCode::NotFound => "not_found",
            ErrorCode::Conflict => "conflict",
            ErrorCode::PayloadTooLarge => "payload_too_large",
            ErrorCode::Overloaded => "overloaded",
            ErrorCode::LimitExceeded => "limit_exceeded",
            ErrorCode::ShuttingDown => "shutting_down",
            ErrorCode::Unavailable => "unavailable",
            ErrorCode::Timeout => "timeout",
            ErrorCode::BadGateway => "bad_gateway",
            ErrorCode::Internal => "internal",
        }
    }
}

impl fmt::Display for ErrorCode {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A failed operation: a code and a message naming the offending value.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("{message}")]
pub struct ServiceError {
    pub code: ErrorCode,
    pub message: String,
}

impl ServiceError {
    pub fn new(code: ErrorCode, message: impl Into<String>) -> ServiceError {
        ServiceError {
            code,
            message: message.into(),
        }
    }

    pub fn invalid(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::InvalidRequest, message)
    }

    pub fn not_found(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::NotFound, message)
    }

    pub fn forbidden(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::Forbidden, message)
    }

    pub fn conflict(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::Conflict, message)
    }

    pub fn unavailable(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::Unavailable, message)
    }

    pub fn internal(message: impl Into<String>) -> ServiceError {
        ServiceError::new(ErrorCode::Internal, message)
    }
}

impl From<StoreError> for ServiceError {
    fn from(err: StoreError) -> ServiceError {
        let code = match err {
            StoreError::Unavailable(_) => ErrorCode::Overloaded,
            StoreError::NotFound(_) => ErrorCode::NotFound,
            StoreError::Conflict(_) => ErrorCode::Conflict,
            StoreError::Invalid(_) => ErrorCode::InvalidRequest,
            _ => ErrorCode::Internal,
        };
        ServiceError::new(code, err.to_string())
    }
}

impl From<EnvelopeError> for ServiceError {
    fn from(err: EnvelopeError) -> ServiceError {
        let code = match err {
            EnvelopeError::DuplicateCallId(_) => ErrorCode::Conflict,
            EnvelopeError::Malformed(_)
            | EnvelopeError::UnknownFormat(_)
            | EnvelopeError::UnknownField(_) => ErrorCode::InvalidRequest,
        };
        ServiceError::new(code, err.to_string())
    }
}
