//! The gRPC door's gates, the same as HTTP's in the same order, answered as gRPC statuses:
//! shutting down (UNAVAILABLE), bearer auth from `authorization` metadata (UNAUTHENTICATED),
//! load shedding on the permits HTTP uses too (RESOURCE_EXHAUSTED) and the request timeout
//! on the response head (DEADLINE_EXCEEDED; streams run on). Health checks pass every gate but
//! the first, like `/healthz`. Not here: the rules themselves (`api::http::middleware`).
//!
//! Every request is counted (`telemetry::GRPC_REQUESTS`), refused ones too, as HTTP's are.
//!
//! A client's deadline (`grpc-timeout`, gRPC over HTTP/2) shortens the request timeout for its
//! call: past it the call is answered DEADLINE_EXCEEDED and its work dropped, as when the
//! server's own timeout passes. A malformed `grpc-timeout` is INVALID_ARGUMENT, naming it.

use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tokio::sync::Semaphore;

use crate::api::DaemonStatus;
use crate::api::http::{CallerToken, authorised};
use crate::service::{ErrorCode, ServiceError};

/// What the gates need (the permits are shared with the HTTP door).
pub struct GrpcGates {
    pub status: Arc<DaemonStatus>,
    pub auth_tokens: Vec<String>,
    pub permits: Arc<Semaphore>,
    pub request_timeout: Duration,
}

fn refuse(code: ErrorCode, message: String) -> Response {
    super::status(ServiceError::new(code, message)).into_http()
}

pub async fn gate(State(gates): State<Arc<GrpcGates>>, request: Request, next: Next) -> Response {
    let method = request.uri().path().to_owned();
    let response = pass(&gates, request, next).await;
    let code = response
        .headers()
        .get("grpc-status")
        .and_then(|status| status.to_str().ok()?.parse::<i32>().ok())
        .map_or(tonic::Code::Ok, tonic::Code::from);
    // A method not served answers UNIMPLEMENTED: counted under one label, so that made-up
    // paths cannot grow the label set.
    let method = if code == tonic::Code::Unimplemented {
        "unknown".to_owned()
    } else {
        method
    };
    crate::telemetry::record_grpc_request(method, code_label(code));
    response
}

/// The status codes' names as gRPC's own libraries print them (`OK`, `NotFound`, …).
fn code_label(code: tonic::Code) -> &'static str {
    use tonic::Code;
    match code {
        Code::Ok => "OK",
        Code::Cancelled => "Canceled",
        Code::Unknown => "Unknown",
        Code::InvalidArgument => "InvalidArgument",
        Code::DeadlineExceeded => "DeadlineExceeded",
        Code::NotFound => "NotFound",
        Code::AlreadyExists => "AlreadyExists",
        Code::PermissionDenied => "PermissionDenied",
        Code::ResourceExhausted => "ResourceExhausted",
        Code::FailedPrecondition => "FailedPrecondition",
        Code::Aborted => "Aborted",
        Code::OutOfRange => "OutOfRange",
        Code::Unimplemented => "Unimplemented",
        Code::Internal => "Internal",
        Code::Unavailable => "Unavailable",
        Code::DataLoss => "DataLoss",
        Code::Unauthenticated => "Unauthenticated",
    }
}

async fn pass(gates: &GrpcGates, mut request: Request, next: Next) -> Response {
    if gates.status.shutting_down.load(Ordering::Acquire) {
        return refuse(ErrorCode::ShuttingDown, "toold is shutting down".into());
    }
    if request.uri().path().starts_with("/grpc.health.v1.Health/") {
        return next.run(request).await;
    }
    let mut caller = CallerToken(None);
    if !gates.auth_tokens.is_empty() {
        match authorised(&gates.auth_tokens, request.headers()) {
            Some(token) => caller = CallerToken(Some(token.to_owned())),
            None => {
                return refuse(
                    ErrorCode::Unauthenticated,
                    "a valid bearer token is required (metadata authorization: Bearer TOKEN)"
                        .into(),
                );
            }
        }
    }
    // Who resolves an approval is recorded by token fingerprint, as over HTTP.
    request.extensions_mut().insert(caller);
    let Ok(_permit) = gates.permits.clone().try_acquire_owned() else {
        return refuse(
            ErrorCode::Overloaded,
            "too many requests in flight; retry later".into(),
        );
    };
    let deadline = match client_deadline(&request) {
        Ok(Some(deadline)) if deadline < gates.request_timeout => Deadline::Client(deadline),
        Ok(_) => Deadline::Server(gates.request_timeout),
        Err(message) => return refuse(ErrorCode::InvalidRequest, message),
    };
    match tokio::time::timeout(deadline.duration(), next.run(request)).await {
        Ok(response) => response,
        Err(_) => refuse(ErrorCode::Timeout, deadline.passed()),
    }
}

/// Which timeout a call runs under: the server's, or the client's shorter one.
enum Deadline {
    Server(Duration),
    Client(Duration),
}

impl Deadline {
    fn duration(&self) -> Duration {
        match self {
            Deadline::Server(duration) | Deadline::Client(duration) => *duration,
        }
    }

    fn passed(&self) -> String {
        match self {
            Deadline::Server(duration) => {
                format!("the request took longer than {} ms", duration.as_millis())
            }
            Deadline::Client(duration) => format!(
                "the client's deadline (grpc-timeout, {} ms) passed",
                duration.as_millis()
            ),
        }
    }
}

/// The request's `grpc-timeout` (gRPC over HTTP/2: at most eight digits and a unit, `H`, `M`,
/// `S`, `m`, `u` or `n`), if it has one; a message naming it if it is malformed.
fn client_deadline(request: &Request) -> Result<Option<Duration>, String> {
    let Some(value) = request.headers().get("grpc-timeout") else {
        return Ok(None);
    };
    let malformed = || {
        format!(
            "malformed grpc-timeout {:?}: expected up to 8 digits and a unit (H, M, S, m, u, n)",
            String::from_utf8_lossy(value.as_bytes())
        )
    };
    let text = value.to_str().map_err(|_| malformed())?;
    let digits = text.len().saturating_sub(1);
    let (amount, unit) = text.split_at(digits);
    if amount.is_empty() || amount.len() > 8 || !amount.bytes().all(|b| b.is_ascii_digit()) {
        return Err(malformed());
    }
    // At most eight digits: it fits.
    let amount: u64 = amount.parse().map_err(|_| malformed())?;
    let duration = match unit {
        "H" => Duration::from_secs(amount * 3600),
        "M" => Duration::from_secs(amount * 60),
        "S" => Duration::from_secs(amount),
        "m" => Duration::from_millis(amount),
        "u" => Duration::from_micros(amount),
        "n" => Duration::from_nanos(amount),
        _ => return Err(malformed()),
    };
    Ok(Some(duration))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn deadline_of(value: &str) -> Result<Option<Duration>, String> {
        let request = Request::builder()
            .header("grpc-timeout", value)
            .body(axum::body::Body::empty())
            .unwrap();
        client_deadline(&request)
    }

    #[test]
    fn every_unit_of_the_spec_reads() {
        let table = [
            ("2H", Duration::from_secs(7200)),
            ("3M", Duration::from_secs(180)),
            ("5S", Duration::from_secs(5)),
            ("250m", Duration::from_millis(250)),
            ("99999999u", Duration::from_micros(99_999_999)),
            ("7n", Duration::from_nanos(7)),
        ];
        for (value, expected) in table {
            assert_eq!(deadline_of(value), Ok(Some(expected)), "{value}");
        }
    }

    #[test]
    fn malformed_values_are_refused_naming_them() {
        for value in [
            "",
            "m",
            "10",
            "10x",
            "-5S",
            "123456789S",
            "1.5S",
            "5 S",
            "S5",
        ] {
            let err = deadline_of(value).unwrap_err();
            assert!(err.contains(&format!("{value:?}")), "{value}: {err}");
        }
    }

    #[test]
    fn no_header_is_no_deadline() {
        let request = Request::builder().body(axum::body::Body::empty()).unwrap();
        assert_eq!(client_deadline(&request), Ok(None));
    }
}
