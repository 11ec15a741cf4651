//! The doors: adapters that translate a wire protocol into calls on [`crate::service`] and
//! back, and nothing else. Only this module names axum, http, tonic, prost and rmcp.
//!
//! - `gate`: the one admission sequence (shutting down, auth, load shedding, timeout) both
//!   doors run and answer in their own way.
//! - `http`, `grpc`, `mcp`: the doors; `http` mounts `mcp`'s routes inside its layers,
//!   otherwise none imports another.
//! - `forward`: a request for a session another daemon of the fleet runs, carried there (the
//!   HTTP door's middleware proxies it, the gRPC door's RPCs relay it).
//! - `listener`: the one listener serving both doors (the accept loop, the HTTP/gRPC split,
//!   `RepollOnSelfWake`).
//! - `oidc`: access tokens of the platform's provider (`[auth.oidc]`), verified for the gate,
//!   and the OAuth protected-resource metadata.
//! - `rate_limit`: each principal's request rate, checked by the gate.
//! - `trace_parent`: each request's span and the `traceparent` it brought (HTTP and gRPC).
//!
//! The one error table lives here: every [`ErrorCode`] maps to one HTTP status and one gRPC
//! code, so the doors cannot disagree.

pub mod forward;
pub mod gate;
pub mod grpc;
pub mod http;
pub mod listener;
pub mod mcp;
pub mod oidc;
pub mod rate_limit;
pub mod trace_parent;

use std::time::Duration;

pub use self::gate::DaemonStatus;
pub use self::listener::serve;

/// What the doors and their listener are configured with (from `[server]`; the server builds
/// it, so the doors need not know the settings file).
#[derive(Clone, Debug)]
pub struct ApiSettings {
    /// Each accepted token's digest and principal; empty (and no `oidc`): no auth.
    pub auth_tokens: Vec<gate::KnownToken>,
    /// The configured issuers' verifier (`[auth.oidc]`), `None` when there are none.
    pub oidc: Option<std::sync::Arc<oidc::OidcVerifier>>,
    pub body_limit_bytes: usize,
    pub request_timeout: Duration,
    pub max_concurrent_requests: usize,
    /// `[limits] requests_per_second_per_principal` (0: none), enforced by the gate.
    pub requests_per_second_per_principal: usize,
    /// Items buffered per event-stream subscriber.
    pub event_buffer: usize,
    /// Serve each connection inside `RepollOnSelfWake` (see `listener/self_wake.rs`).
    pub repoll_self_wake: bool,
    /// The MCP door's own settings.
    pub mcp: mcp::McpDoorSettings,
    /// The certificate to serve TLS with (`[server] tls_cert`, `tls_key`); `None`: plain HTTP.
    pub tls: Option<std::sync::Arc<listener::ServerCertificate>>,
    /// The fleet's secret and this daemon's node id, for forwarding (`forward`).
    pub fleet: forward::FleetHop,
}

use axum::http::StatusCode;

use crate::service::ErrorCode;

/// The table: each error code's HTTP status (DESIGN §4) and gRPC code.
fn error_table(code: ErrorCode) -> (StatusCode, tonic::Code) {
    use tonic::Code;
    match code {
        ErrorCode::InvalidRequest => (StatusCode::BAD_REQUEST, Code::InvalidArgument),
        ErrorCode::Unauthenticated => (StatusCode::UNAUTHORIZED, Code::Unauthenticated),
        ErrorCode::Forbidden => (StatusCode::FORBIDDEN, Code::PermissionDenied),
        ErrorCode::PermissionDenied => (StatusCode::FORBIDDEN, Code::PermissionDenied),
        ErrorCode::NotFound => (StatusCode::NOT_FOUND, Code::NotFound),
        ErrorCode::Conflict => (StatusCode::CONFLICT, Code::AlreadyExists),
        ErrorCode::PayloadTooLarge => (StatusCode::PAYLOAD_TOO_LARGE, Code::ResourceExhausted),
        ErrorCode::Overloaded => (StatusCode::TOO_MANY_REQUESTS, Code::ResourceExhausted),
        ErrorCode::LimitExceeded => (StatusCode::TOO_MANY_REQUESTS, Code::ResourceExhausted),
        ErrorCode::ShuttingDown => (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
        ErrorCode::Unavailable => (StatusCode::SERVICE_UNAVAILABLE, Code::Unavailable),
        ErrorCode::Timeout => (StatusCode::REQUEST_TIMEOUT, Code::DeadlineExceeded),
        ErrorCode::BadGateway => (StatusCode::BAD_GATEWAY, Code::Unavailable),
        ErrorCode::Internal => (StatusCode::INTERNAL_SERVER_ERROR, Code::Internal),
    }
}

/// The HTTP status of an error code.
pub fn http_status(code: ErrorCode) -> StatusCode {
    error_table(code).0
}

/// The gRPC code of an error code.
pub fn grpc_code(code: ErrorCode) -> tonic::Code {
    error_table(code).1
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_status() {
        // Three pairs share a status, told apart by the body's code: `unavailable` and
        // `shutting_down` (503), `limit_exceeded` (the caller's own limit) and `overloaded`
        // (the daemon's) (429), `permission_denied` (the session's rules) and `forbidden`
        // (the caller's role) (403).
        let shared = [
            ErrorCode::Unavailable,
            ErrorCode::LimitExceeded,
            ErrorCode::PermissionDenied,
        ];
        let mut statuses: Vec<u16> = ErrorCode::ALL
            .iter()
            .filter(|c| !shared.contains(c))
            .map(|c| http_status(*c).as_u16())
            .collect();
        statuses.sort_unstable();
        statuses.dedup();
        assert_eq!(statuses.len(), ErrorCode::ALL.len() - shared.len());
        assert_eq!(
            http_status(ErrorCode::PayloadTooLarge),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }

    #[test]
    fn grpc_codes_follow_the_table() {
        assert_eq!(grpc_code(ErrorCode::NotFound), tonic::Code::NotFound);
        assert_eq!(
            grpc_code(ErrorCode::InvalidRequest),
            tonic::Code::InvalidArgument
        );
        assert_eq!(
            grpc_code(ErrorCode::Unauthenticated),
            tonic::Code::Unauthenticated
        );
        // No error of toold's is reported as success or as an unknown failure.
        for code in ErrorCode::ALL {
            assert!(!matches!(
                grpc_code(code),
                tonic::Code::Ok | tonic::Code::Unknown
            ));
        }
    }
}
