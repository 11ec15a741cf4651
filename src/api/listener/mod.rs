//! The shared listener: one TCP listener serves both doors (DESIGN §4, "HTTP and gRPC share
//! one listener"). [`serve`] builds the one gate, the HTTP app and the gRPC routes behind it,
//! and the split between them (a request whose content type is `application/grpc*` goes to
//! the gRPC door, anything else to the HTTP app); `connections.rs` runs the accept loop
//! (HTTP/1.1 and HTTP/2 on every connection, graceful drain), `tls.rs` the certificate and the
//! handshake when `[server] tls_cert` is set (then every connection is TLS, both doors alike),
//! and `self_wake.rs` the wrapper each connection is served in.
//!
//! Not here: any route. The HTTP door keeps its router, the gRPC door its services; this
//! module only decides which one a request goes to.

mod connections;
mod self_wake;
mod tls;

pub use tls::{ServerCertificate, TlsError};

use std::sync::Arc;

use axum::Router;
use axum::extract::Request;
use axum::http::header::CONTENT_TYPE;
use tokio::sync::Semaphore;
use tower::ServiceExt;

use crate::api::ApiSettings;
use crate::api::gate::{DaemonStatus, Gate};
use crate::service::ToolService;

/// Serves both doors on `listener` (HTTP/1.1 and HTTP/2, which gRPC uses; over TLS when
/// `settings.tls` holds a certificate) until `drain` fires, then until running requests finish. Both doors pass the same gate, so
/// they shed on the same permits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Arc<ToolService>,
    settings: ApiSettings,
    status: Arc<DaemonStatus>,
    drain: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let mut settings = settings;
    // Known only now when the port was 0: MCP clients reach the listener by this address.
    settings.mcp.admit_listener(listener.local_addr()?);
    let gate = Arc::new(Gate {
        status,
        auth_tokens: settings.auth_tokens.clone(),
        session_tokens: service.session_tokens(),
        permits: Arc::new(Semaphore::new(settings.max_concurrent_requests)),
        request_timeout: settings.request_timeout,
        rate: crate::api::rate_limit::RateLimiter::new(settings.requests_per_second_per_principal),
        oidc: settings.oidc.clone(),
    });
    let forward = crate::api::forward::Forwarder::new(settings.fleet.clone());
    let grpc =
        crate::api::grpc::router(service.clone(), &settings, gate.clone(), forward.clone()).await;
    let http = crate::api::http::app(service, &settings, gate, forward);
    let doors = Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let door = if is_grpc(&request) {
            grpc.clone()
        } else {
            http.clone()
        };
        door.oneshot(request)
    }));
    let tls = match &settings.tls {
        Some(certificate) => Some(certificate.acceptor().map_err(std::io::Error::other)?),
        None => None,
    };
    connections::serve_connections(listener, doors, tls, settings.repoll_self_wake, drain).await
}

/// Whether a request is gRPC (any `application/grpc` content type: `+proto`, `+json`, ...).
fn is_grpc<B>(request: &axum::http::Request<B>) -> bool {
    request
        .headers()
        .get(CONTENT_TYPE)
        .and_then(|value| value.to_str().ok())
        .is_some_and(|value| value.starts_with("application/grpc"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn with_content_type(value: &str) -> axum::http::Request<()> {
        axum::http::Request::builder()
            .header(CONTENT_TYPE, value)
            .body(())
            .unwrap()
    }

    #[test]
    fn every_grpc_content_type_goes_to_the_grpc_door() {
        for value in [
            "application/grpc",
            "application/grpc+proto",
            "application/grpc+json",
        ] {
            assert!(is_grpc(&with_content_type(value)), "{value}");
        }
        for value in ["application/json", "text/event-stream", "text/plain"] {
            assert!(!is_grpc(&with_content_type(value)), "{value}");
        }
        assert!(!is_grpc(&axum::http::Request::new(())));
    }
}
