//! The gRPC door's gates: the one admission sequence of `api::gate`, its refusals answered as
//! gRPC statuses through the one error table: shutting down is UNAVAILABLE, a missing or
//! wrong `authorization` metadata token UNAUTHENTICATED, load shedding (on the permits HTTP
//! uses too) RESOURCE_EXHAUSTED, the request timeout on the response head DEADLINE_EXCEEDED
//! (streams run on). Health checks pass every gate but the first, like `/healthz`. Not here:
//! the rules themselves; here: what only gRPC has.
//!
//! Every request is counted (`telemetry::GRPC_REQUESTS`), refused ones too, as HTTP's are.
//!
//! A client's deadline (`grpc-timeout`, gRPC over HTTP/2) shortens the request timeout for its
//! call: past it the call is answered DEADLINE_EXCEEDED and its work dropped, as when the
//! server's own timeout passes. A malformed `grpc-timeout` is INVALID_ARGUMENT, naming it.

use std::sync::Arc;
use std::time::Duration;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;

use crate::api::gate::{Admission, Door, Gate};
use crate::service::ServiceError;

fn refuse(refusal: ServiceError) -> Response {
    super::status(refusal).into_http()
}

pub async fn gate(State(gate): State<Arc<Gate>>, request: Request, next: Next) -> Response {
    let method = request.uri().path().to_owned();
    let response = pass(&gate, request, next).await;
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

async fn pass(gate: &Gate, mut request: Request, next: Next) -> Response {
    let admission = gate
        .admit(Door::Grpc, request.uri().path(), request.headers())
        .await;
    let mut admitted = match admission {
        Ok(Admission::Admitted(admitted)) => admitted,
        Ok(Admission::Probe) => return next.run(request).await,
        Err(refusal) => return refuse(refusal),
    };
    match client_deadline(&request) {
        Ok(Some(deadline)) => admitted.shorten_deadline(deadline, "grpc-timeout"),
        Ok(None) => {}
        Err(message) => return refuse(ServiceError::invalid(message)),
    }
    // Who resolves an approval is recorded by token fingerprint, as over HTTP.
    admitted.identify(request.extensions_mut());
    match admitted.respond_within(next.run(request)).await {
        Ok(response) => response,
        Err(refusal) => refuse(refusal),
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
