//! The doors: adapters that translate a wire protocol into calls on [`crate::service`] and
//! back, and nothing else. Only this module names axum, http (and later tonic).
//!
//! The one error table lives here: every [`ErrorCode`] maps to one HTTP status (and, with the
//! gRPC door, one gRPC code), so the doors cannot disagree.

pub mod http;

pub use self::http::{DaemonStatus, HttpSettings, serve as serve_http};

use axum::http::StatusCode;

use crate::service::ErrorCode;

/// The HTTP status of each error code (DESIGN §4).
pub fn http_status(code: ErrorCode) -> StatusCode {
    match code {
        ErrorCode::InvalidRequest => StatusCode::BAD_REQUEST,
        ErrorCode::Unauthenticated => StatusCode::UNAUTHORIZED,
        ErrorCode::NotFound => StatusCode::NOT_FOUND,
        ErrorCode::Conflict => StatusCode::CONFLICT,
        ErrorCode::PayloadTooLarge => StatusCode::PAYLOAD_TOO_LARGE,
        ErrorCode::Overloaded => StatusCode::TOO_MANY_REQUESTS,
        ErrorCode::ShuttingDown => StatusCode::SERVICE_UNAVAILABLE,
        ErrorCode::Timeout => StatusCode::REQUEST_TIMEOUT,
        ErrorCode::Internal => StatusCode::INTERNAL_SERVER_ERROR,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_code_has_a_distinct_status() {
        let mut statuses: Vec<u16> = ErrorCode::ALL
            .iter()
            .map(|c| http_status(*c).as_u16())
            .collect();
        statuses.sort_unstable();
        statuses.dedup();
        assert_eq!(statuses.len(), ErrorCode::ALL.len());
        assert_eq!(
            http_status(ErrorCode::PayloadTooLarge),
            StatusCode::PAYLOAD_TOO_LARGE
        );
    }
}
