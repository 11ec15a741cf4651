//! The HTTP door (DESIGN §4): axum routes under `/v1`, SSE streams, the ops endpoints, and
//! the gates every request passes (request id, tracing, shutdown, auth, load shedding, body
//! limit, timeout).
//!
//! [`router`] builds the whole app from a service, so tests can drive it without a socket;
//! `server` binds it. Handlers only translate: every decision is the service's. Every route
//! is documented by its handler (`openapi`) and counted by `middleware::count_request`.

mod batches;
mod connections;
mod error;
mod events;
mod middleware;
mod openapi;
mod ops;
mod self_wake;
mod sessions;

use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef, Request};
use axum::http::HeaderName;
use tokio::sync::Semaphore;
use tower::{ServiceBuilder, ServiceExt};
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::ApiError;
pub use middleware::{CallerToken, DaemonStatus, authorised};

use crate::service::ToolService;
use middleware::Gates;

/// What the HTTP door is configured with (from `[server]`).
#[derive(Clone, Debug)]
pub struct HttpSettings {
    /// Empty: no auth.
    pub auth_tokens: Vec<String>,
    pub body_limit_bytes: usize,
    pub request_timeout: Duration,
    pub max_concurrent_requests: usize,
    /// Items buffered per event-stream subscriber.
    pub event_buffer: usize,
}

impl Default for HttpSettings {
    fn default() -> Self {
        let server = crate::config::ServerSettings::default();
        HttpSettings {
            auth_tokens: server.auth_tokens,
            body_limit_bytes: server.body_limit_bytes,
            request_timeout: server.request_timeout,
            max_concurrent_requests: server.max_concurrent_requests,
            event_buffer: server.event_buffer,
        }
    }
}

/// The handlers' state.
#[derive(Clone)]
pub struct HttpState {
    pub service: Arc<ToolService>,
    pub status: Arc<DaemonStatus>,
    pub event_buffer: usize,
}

impl FromRef<HttpState> for Arc<ToolService> {
    fn from_ref(state: &HttpState) -> Arc<ToolService> {
        state.service.clone()
    }
}

/// Serves both doors on `listener` (HTTP/1.1, and HTTP/2 without TLS, which gRPC uses)
/// until `drain` fires, then until running requests finish. A request whose content type is
/// `application/grpc*` goes to the gRPC door, anything else to the HTTP app; both share the
/// load-shedding permits.
pub async fn serve(
    listener: tokio::net::TcpListener,
    service: Arc<ToolService>,
    settings: HttpSettings,
    status: Arc<DaemonStatus>,
    drain: tokio_util::sync::CancellationToken,
) -> std::io::Result<()> {
    let permits = Arc::new(Semaphore::new(settings.max_concurrent_requests));
    let grpc =
        crate::api::grpc::router(service.clone(), &settings, status.clone(), permits.clone()).await;
    let http = app(service, &settings, status, permits);
    let doors = Router::new().fallback_service(tower::service_fn(move |request: Request| {
        let door = if crate::api::grpc::is_grpc(&request) {
            grpc.clone()
        } else {
            http.clone()
        };
        door.oneshot(request)
    }));
    connections::serve_connections(listener, doors, drain).await
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The app with default settings, ready at once (for tests without a daemon).
pub fn router(service: Arc<ToolService>) -> Router {
    let status = Arc::new(DaemonStatus::default());
    status
        .ready
        .store(true, std::sync::atomic::Ordering::Release);
    router_with(service, &HttpSettings::default(), status)
}

/// The app: every route of DESIGN §4 behind the gates.
pub fn router_with(
    service: Arc<ToolService>,
    settings: &HttpSettings,
    status: Arc<DaemonStatus>,
) -> Router {
    let permits = Arc::new(Semaphore::new(settings.max_concurrent_requests));
    app(service, settings, status, permits)
}

fn app(
    service: Arc<ToolService>,
    settings: &HttpSettings,
    status: Arc<DaemonStatus>,
    permits: Arc<Semaphore>,
) -> Router {
    let state = HttpState {
        service,
        status: status.clone(),
        event_buffer: settings.event_buffer,
    };
    let gates = Arc::new(Gates {
        status,
        auth_tokens: settings.auth_tokens.clone(),
        permits,
        request_timeout: settings.request_timeout,
    });
    let (routes, _document) = routes().split_for_parts();
    routes
        .fallback(error::not_found)
        .with_state(state)
        // Outermost first: an id for every request (kept if the client sent one), a span
        // carrying it, the id echoed on the response, the request counter, then the gates and
        // the body limit.
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(TraceLayer::new_for_http())
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                // Outside the gates, so 401/429/503 answers are counted too.
                .layer(axum::middleware::from_fn(middleware::count_request))
                .layer(axum::middleware::from_fn_with_state(
                    gates,
                    middleware::gate,
                ))
                .layer(DefaultBodyLimit::max(settings.body_limit_bytes))
                .layer(axum::Extension(error::BodyLimit(settings.body_limit_bytes))),
        )
}

/// Every route, each registered with its handler's `#[utoipa::path]`, so the OpenAPI
/// document (`/openapi.json`) is generated from exactly what is served.
fn routes() -> OpenApiRouter<HttpState> {
    OpenApiRouter::new()
        .routes(routes!(sessions::create, sessions::list))
        .routes(routes!(sessions::get, sessions::close))
        .routes(routes!(sessions::tools))
        .routes(routes!(batches::execute))
        .routes(routes!(batches::get))
        .routes(routes!(sessions::interrupt))
        .routes(routes!(sessions::approvals))
        .routes(routes!(sessions::resolve_approval))
        .routes(routes!(sessions::calls))
        .routes(routes!(events::session))
        .routes(routes!(events::all))
        .routes(routes!(events::result))
        .routes(routes!(ops::catalogue))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(openapi::document))
}
