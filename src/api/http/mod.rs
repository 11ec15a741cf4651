//! The HTTP door (DESIGN §4): axum routes under `/v1`, SSE streams, the ops endpoints, and
//! the layers every request passes (request id, tracing, the request counter, the gates of
//! `api::gate`, the body limit). The MCP door's routes (`api::mcp`) are merged in behind the
//! same layers.
//!
//! [`router`] builds the whole app from a service, so tests can drive it without a socket;
//! `api::listener` serves it beside the gRPC door. Handlers only translate: every decision is
//! the service's. Every route is documented by its handler (`openapi`) and counted by
//! `middleware::count_request`.

mod audit;
mod batches;
mod document;
mod error;
mod events;
mod images;
mod middleware;
mod oauth;
mod openapi;
mod ops;
mod providers;
mod sessions;
mod snapshots;
mod ui;
mod workspace;

use std::sync::Arc;

use axum::Router;
use axum::extract::{DefaultBodyLimit, FromRef};
use axum::http::HeaderName;
use tokio::sync::Semaphore;
use tower::ServiceBuilder;
use tower_http::request_id::{MakeRequestUuid, PropagateRequestIdLayer, SetRequestIdLayer};
use tower_http::trace::TraceLayer;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

pub use error::ApiError;

use crate::api::ApiSettings;
use crate::api::forward::Forwarder;
use crate::api::forward::http::{ForwardState, forward};
use crate::api::gate::{DaemonStatus, Gate};
use crate::service::ToolService;

/// The handlers' state.
#[derive(Clone)]
pub struct HttpState {
    pub service: Arc<ToolService>,
    pub status: Arc<DaemonStatus>,
    pub event_buffer: usize,
    /// `/openapi.json`, rendered once when the app is built (or why it could not be).
    pub openapi: Arc<Result<String, String>>,
    /// HTTP provider connections registered whose stream is not open yet.
    pub providers: Arc<providers::Parked>,
    /// The configured issuers (`[auth.oidc]`), for the protected-resource metadata.
    pub oidc: Option<Arc<crate::api::oidc::OidcVerifier>>,
}

impl FromRef<HttpState> for Arc<ToolService> {
    fn from_ref(state: &HttpState) -> Arc<ToolService> {
        state.service.clone()
    }
}

const REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The app behind a gate of its own (for tests without a listener).
pub fn router(
    service: Arc<ToolService>,
    settings: &ApiSettings,
    status: Arc<DaemonStatus>,
) -> Router {
    let gate = Arc::new(Gate {
        status,
        auth_tokens: settings.auth_tokens.clone(),
        session_tokens: service.session_tokens(),
        permits: Arc::new(Semaphore::new(settings.max_concurrent_requests)),
        request_timeout: settings.request_timeout,
        rate: crate::api::rate_limit::RateLimiter::new(settings.requests_per_second_per_principal),
        oidc: settings.oidc.clone(),
    });
    let forward = Forwarder::new(settings.fleet.clone());
    app(service, settings, gate, forward)
}

/// The app: every route of DESIGN §4 behind `gate` (which the listener shares with the gRPC
/// door, so both shed on the same permits), and `forwarder` to the daemons of the fleet.
pub fn app(
    service: Arc<ToolService>,
    settings: &ApiSettings,
    gate: Arc<Gate>,
    forwarder: Arc<Forwarder>,
) -> Router {
    let forwarding = ForwardState {
        service: service.clone(),
        forwarder,
    };
    let (routes, api) = routes().split_for_parts();
    let (tool_names, mcp_servers) = service.nameable();
    let facts = document::DocumentFacts {
        tool_names,
        mcp_servers,
    };
    let state = HttpState {
        service,
        status: gate.status.clone(),
        event_buffer: settings.event_buffer,
        openapi: Arc::new(document::render(&api, &facts)),
        providers: Arc::default(),
        oidc: gate.oidc.clone(),
    };
    let mcp = crate::api::mcp::routes(state.service.clone(), &settings.mcp);
    routes
        .fallback(error::not_found)
        .with_state(state)
        // The MCP door's routes, behind the same layers as every route here.
        .merge(mcp)
        // Outermost first: an id for every request (kept if the client sent one), a log span
        // carrying it, the exported span, the id echoed on the response, the request counter,
        // then the gates, the body limit, and forwarding (an admitted request for another
        // daemon's session goes there before any handler reads its body).
        .layer(
            ServiceBuilder::new()
                .layer(SetRequestIdLayer::new(REQUEST_ID, MakeRequestUuid))
                .layer(TraceLayer::new_for_http())
                // The request's span for export, its parent the incoming `traceparent`.
                .layer(axum::middleware::from_fn(
                    crate::api::trace_parent::http_request,
                ))
                .layer(PropagateRequestIdLayer::new(REQUEST_ID))
                // Outside the gates, so 401/429/503 answers are counted too.
                .layer(axum::middleware::from_fn(middleware::count_request))
                .layer(axum::middleware::from_fn_with_state(gate, middleware::gate))
                .layer(DefaultBodyLimit::max(settings.body_limit_bytes))
                .layer(axum::Extension(error::BodyLimit(settings.body_limit_bytes)))
                .layer(axum::middleware::from_fn_with_state(forwarding, forward)),
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
        .routes(routes!(sessions::every_approval))
        .routes(routes!(sessions::resolve_approval))
        .routes(routes!(sessions::calls))
        .routes(routes!(sessions::batch_calls))
        .routes(routes!(audit::list))
        .routes(routes!(audit::export))
        .routes(routes!(events::session))
        .routes(routes!(events::all))
        .routes(routes!(events::result))
        .routes(routes!(ops::catalogue))
        .routes(routes!(ops::mcp_servers))
        .routes(routes!(images::pull))
        .routes(routes!(images::list))
        .routes(routes!(images::delete))
        .routes(routes!(providers::list, providers::register))
        .routes(routes!(providers::invocations))
        .routes(routes!(providers::progress))
        .routes(routes!(providers::result))
        .routes(routes!(providers::disconnect))
        .routes(routes!(ops::healthz))
        .routes(routes!(ops::readyz))
        .routes(routes!(ops::metrics))
        .routes(routes!(openapi::document))
        .routes(routes!(oauth::protected_resource))
        .routes(routes!(oauth::protected_resource_mcp))
        .routes(routes!(ui::page))
        .routes(routes!(ui::style))
        .routes(routes!(ui::script))
        .routes(routes!(ui::tail_script))
        .routes(routes!(ui::audit_script))
        .routes(routes!(workspace::put_file, workspace::get_file))
        .route(
            "/v1/sessions/{id}/files/{path}/{*rest}",
            axum::routing::put(workspace::put_nested_file).get(workspace::get_nested_file),
        )
        .routes(routes!(workspace::post_archive, workspace::get_archive))
        .routes(routes!(snapshots::take))
        .routes(routes!(snapshots::list))
        .routes(routes!(snapshots::get, snapshots::delete))
        .routes(routes!(snapshots::fork))
}
