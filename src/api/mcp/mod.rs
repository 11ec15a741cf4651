//! The MCP door (DESIGN §8): `POST /mcp` and `POST /v1/sessions/{id}/mcp` (GET and DELETE for
//! the 2025 era) on the HTTP door's router, inside its gate, so bearer auth, load shedding and
//! the request timeout apply as to every other route. Only this module names `rmcp`; it
//! translates MCP requests into [`crate::service`] calls (`handler`) and lets rmcp own the
//! protocol: JSON-RPC framing, Streamable HTTP, both eras, sessions, header checks.
//!
//! What rmcp 3.11 (pinned `=3.11.0`; features `server`, `transport-streamable-http-server`,
//! `transport-io`, `elicitation`, `request-state`) does, read from its source, and how it
//! shapes this door:
//!
//! - **Mounting.** `transport::streamable_http_server::StreamableHttpService<S, M>` is a tower
//!   service over `http::Request<B>`; its `handle(request)` answers with a
//!   `Response<BoxBody<Bytes, Infallible>>`. It is built from a factory `Fn() -> Result<S>`
//!   (called once per legacy MCP session at `initialize`, once per stateless request, and
//!   again whenever it looks up a tool's schema for header checks), a session manager
//!   (`LocalSessionManager`: in memory, a session idles out after 5 minutes) and a
//!   `StreamableHttpServerConfig`. The routes below are plain axum handlers that call `handle`,
//!   so each can first add what the handler needs to the request.
//! - **Eras.** One service serves both, per request (`tower.rs`, `is_legacy_request`): an
//!   `initialize` is always the legacy (2025-11-25) lifecycle and, with `legacy_session_mode`,
//!   creates an rmcp session answered with `Mcp-Session-Id`; later requests carrying that
//!   header go to the same handler instance. A request whose `_meta` carries the 2026-07-28
//!   keys (`io.modelcontextprotocol/protocolVersion`, client capabilities), or a
//!   `server/discover`, runs statelessly on a fresh handler (`serve_directly`). A request with
//!   neither an `Mcp-Session-Id` nor 2026 `_meta` that is not `initialize` gets 400 ("session
//!   id required"). `MCP-Protocol-Version` must agree with the body (`-32020` header mismatch,
//!   HTTP 400), as must `Mcp-Method`/`Mcp-Name` from 2026-07-28 on. For 2026 requests rmcp
//!   fills `resultType`, `ttlMs` and `cacheScope` and strips them for older peers. A GET or
//!   DELETE whose `MCP-Protocol-Version` is 2026-07-28 answers 405; one without the header is
//!   taken for the legacy era (400 without an `Mcp-Session-Id`).
//! - **Reaching the handler.** rmcp puts the request's `http::request::Parts` into the
//!   request context's `extensions`; everything the HTTP door's layers put into the request's
//!   extensions travels with them. So the gate's [`CallerToken`] and this door's
//!   [`McpBinding`] reach the handler without rmcp knowing either.
//! - **Origin and Host.** rmcp checks `Host` against `allowed_hosts` (default: loopback
//!   names; an entry without a port matches any port) and `Origin` against `allowed_origins`
//!   (validation only when the list is non-empty or `enforce_origin_validation` is called: a
//!   missing Origin passes, any other unlisted one is 403). This door enforces Origin with the
//!   listener's own origins plus `[mcp] allowed_origins`, and admits as `Host` the loopback
//!   names, the advertised address and the listener's own (any on `0.0.0.0`/`::`, where
//!   tokens are required).
//! - **Response heads and the gate's timeout.** With `json_response`, a 2026 request is
//!   answered as JSON once its handler's first message is ready, so the head of a `tools/call`
//!   waits for the call and the request timeout bounds it, as it bounds `POST .../batches`. A
//!   legacy request's answer is an SSE stream whose head goes out at once, so its call runs on
//!   outside the timeout. A handler that sends a notification first (progress) turns the 2026
//!   answer into a stream too.
//! - **Lifetimes.** `config.cancellation_token` ends every rmcp session and open stream when
//!   cancelled; it is the service's shutdown signal, or an open GET stream would hold the
//!   daemon's drain for its whole grace period. A legacy session also ends after 5 minutes
//!   without a request (`LocalSessionManager`'s `SessionConfig::keep_alive`), or on DELETE;
//!   either way rmcp drops its handler, which closes the toold session it created. rmcp
//!   answers a DELETE 202; this door says 204 (the Python SDK accepts only 200 or 204 there).
//! - **Body limit.** rmcp reads the body itself (axum's `DefaultBodyLimit` does not apply) and
//!   answers 413 past `max_request_body_bytes`; it is set to the server's body limit, and
//!   `post` stops its own read one frame past it.
//! - **Bad input.** rmcp parses a POST body as one `ClientJsonRpcMessage` and answers what
//!   it cannot parse with a plain-text 415; so `post` reads the body first (bounded by the
//!   limit) and checks its outline (`envelope`), passes a message on byte for byte, and
//!   answers a body rmcp would refuse with a JSON-RPC error, once rmcp's head checks have
//!   passed. A known method whose params rmcp cannot parse reaches the handler as a custom
//!   request, which answers `-32602`. What each case gets, in the order it is checked (the
//!   gate first: 401, 429, 503):
//!
//! | case | HTTP | body |
//! |---|---|---|
//! | `Host` not the listener's, a foreign `Origin` | 403 | text |
//! | `Accept` without JSON and SSE | 406 | text |
//! | `Content-Type` not JSON | 415 | text |
//! | body past the limit (16 MiB; `Content-Length` or read) | 413 | text |
//! | not JSON, empty | 400 | `-32700`, id null |
//! | batch array, non-object, not JSON-RPC 2.0 (`jsonrpc`, `id`, `method`, `params`) | 400 | `-32600`, its id or null |
//! | no `Mcp-Session-Id` on a request without 2026 `_meta` (not `initialize`) | 400 | text |
//! | unknown `Mcp-Session-Id` | 404 | text |
//! | legacy: `MCP-Protocol-Version` unknown | 400 | text |
//! | `initialize` whose `MCP-Protocol-Version` disagrees with its body | 400 | `-32600` |
//! | `initialize` with a version the server lacks | 200 | its own, 2025-11-25 |
//! | 2026: `MCP-Protocol-Version` missing or disagreeing with `_meta` | 400 | `-32020` |
//! | 2026: `Mcp-Method`, `Mcp-Name` missing or disagreeing with the body | 400 | `-32020` |
//! | 2026: `_meta` version unsupported | 400 | `-32022`, supported versions |
//! | unknown method (`initialize` in 2026 too) | 404 (2026), 200 (legacy) | `-32601` |
//! | params not fitting the method, unknown tool | 200 | `-32602` |
//!
//! Over stdio (`toold mcp`), `stdio` serves the same handler bound to one session, and answers
//! a line that is not one JSON-RPC message with the same `-32700`/`-32600` as HTTP.
//!
//! - **Progress.** rmcp moves a request's `_meta` into its context (`context.meta`, where the
//!   `progressToken` is read) and routes a `notifications/progress` carrying that token to the
//!   request's own answer: the legacy session's SSE stream for the request
//!   (`LocalSessionManager` maps the token to it), the stateless request's stream in 2026.
//!
//! - **Prompts, completion, resources.** Skills are served as prompts when skills are
//!   configured (`prompts`: got through the `skill` tool), `completion/complete` is served (a
//!   completion of a known reference is empty), `resources/list` lists nothing (offloaded
//!   outputs are found through their calls), and a resource-not-found error carries `data.uri`
//!   (SEP-2164). With the feature `mcp-conformance-fixtures`, `fixtures` adds the official
//!   conformance suite's tools, resources and prompts (`tests/mcp-conformance/`).
//! - **Pool changes** are announced as `notifications/tools/list_changed` (`list_changed`).
//! - **Cancellation.** rmcp cancels a request's `context.ct` on `notifications/cancelled`
//!   (2025 era) and when a 2026 request's connection closes (its serve loop's token); the
//!   door then cancels that call's batch alone, running or still waiting for its turn
//!   (`calls`).
//! - **Elicitation** needs rmcp's `elicitation` feature (`create_elicitation`); rmcp refuses
//!   server-to-client requests in the 2026 era (`elicitation`), where an approval is asked in
//!   an input-required result instead, its `requestState` sealed with rmcp's
//!   `RequestStateCodec` (feature `request-state`; `input_required`).

mod calls;
mod elicitation;
mod envelope;
#[cfg(feature = "mcp-conformance-fixtures")]
mod fixtures;
mod handler;
mod input_required;
mod list_changed;
mod post;
mod prompts;
mod results;
mod stdio;

use std::net::SocketAddr;
use std::sync::Arc;

use axum::Router;
use axum::extract::{Extension, Path, Request, State};
use axum::http::{Method, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::any;
use rmcp::transport::streamable_http_server::session::local::LocalSessionManager;
use rmcp::transport::streamable_http_server::{StreamableHttpServerConfig, StreamableHttpService};

use self::handler::McpHandler;
pub use self::stdio::{StdioError, serve_stdio};
use crate::api::http::ApiError;
use crate::permission::Principal;
use crate::service::{CreateSessionRequest, ToolService};

#[cfg(doc)]
use crate::api::gate::CallerToken;

/// What the MCP door is configured with (from `[mcp]` and `[server]`; the server builds it).
#[derive(Clone, Debug, Default)]
pub struct McpDoorSettings {
    /// What the sessions the door creates itself are created with.
    pub session_template: CreateSessionRequest,
    /// Browser origins accepted besides none and the listener's own.
    pub allowed_origins: Vec<String>,
    /// `Host` values accepted (host or `host:port`), besides the listener's own address.
    pub allowed_hosts: Vec<String>,
    /// Request bodies above this are refused with 413.
    pub body_limit_bytes: usize,
}

impl McpDoorSettings {
    /// Accepts the listener's own address as a `Host` and its origins as an `Origin`. On an
    /// unspecified address (`0.0.0.0`, `::`) any `Host` is accepted: the daemon is meant to be
    /// reached by names it cannot list, and it requires bearer tokens there (auth may be off
    /// only on a loopback address), which a rebound browser page does not have.
    pub fn admit_listener(&mut self, address: SocketAddr) {
        if address.ip().is_unspecified() {
            // rmcp reads an empty list as "any Host".
            self.allowed_hosts.clear();
            return;
        }
        let port = address.port();
        let mut hosts = vec![address.ip().to_string()];
        if address.ip().is_loopback() {
            hosts.push("localhost".to_owned());
        }
        for host in hosts {
            let bracketed = if host.contains(':') {
                format!("[{host}]")
            } else {
                host
            };
            self.allowed_origins
                .push(format!("http://{bracketed}:{port}"));
            self.allowed_hosts.push(format!("{bracketed}:{port}"));
        }
    }
}

/// Which toold session a request to the MCP door runs in, as its path says.
#[derive(Clone, Debug)]
pub enum McpBinding {
    /// `/mcp`: a legacy MCP session's own session, or the caller's default session.
    Own,
    /// `/v1/sessions/{id}/mcp`: that existing session.
    Session(String),
}

type HttpService = StreamableHttpService<McpHandler, LocalSessionManager>;

/// The MCP routes, to be merged into the HTTP door's router inside its layers.
pub fn routes(service: Arc<ToolService>, settings: &McpDoorSettings) -> Router {
    #[cfg(feature = "mcp-conformance-fixtures")]
    fixtures::log_startup_notice();
    let template = Arc::new(settings.session_template.clone());
    let factory_service = service.clone();
    let config = StreamableHttpServerConfig::default()
        .with_allowed_hosts(settings.allowed_hosts.clone())
        .with_allowed_origins(settings.allowed_origins.clone())
        .enforce_origin_validation()
        .with_max_request_body_bytes(settings.body_limit_bytes)
        // Open streams and legacy sessions end when the daemon starts shutting down, so they
        // do not hold the drain for its whole grace period.
        .with_cancellation_token(service.shutting_down())
        // A result that is the whole answer goes out as JSON rather than a one-event stream.
        .with_json_response(true);
    let http: Arc<HttpService> = Arc::new(StreamableHttpService::new(
        move || Ok(McpHandler::new(factory_service.clone(), template.clone())),
        Arc::new(LocalSessionManager::default()),
        config,
    ));
    Router::new()
        .route("/mcp", any(own_session))
        .route("/v1/sessions/{id}/mcp", any(bound_session))
        .with_state(McpDoor {
            service,
            http,
            body_limit_bytes: settings.body_limit_bytes,
            heads: Arc::new(post::KnownHeads {
                origins: settings.allowed_origins.clone(),
                hosts: settings.allowed_hosts.clone(),
            }),
        })
}

#[derive(Clone)]
struct McpDoor {
    service: Arc<ToolService>,
    http: Arc<HttpService>,
    body_limit_bytes: usize,
    heads: Arc<post::KnownHeads>,
}

async fn own_session(State(door): State<McpDoor>, mut request: Request) -> Response {
    request.extensions_mut().insert(McpBinding::Own);
    serve(&door, request).await
}

/// 404 for an unknown (or closed) session, or one the caller may not see, before rmcp sees
/// the request.
async fn bound_session(
    State(door): State<McpDoor>,
    Path(id): Path<String>,
    Extension(caller): Extension<Principal>,
    mut request: Request,
) -> Response {
    if let Err(err) = door.service.check_session(&caller, &id) {
        return ApiError(err).into_response();
    }
    request.extensions_mut().insert(McpBinding::Session(id));
    serve(&door, request).await
}

async fn serve(door: &McpDoor, request: Request) -> Response {
    let delete = request.method() == Method::DELETE;
    if request.method() == Method::POST {
        return post::serve_post(&door.http, &door.heads, request, door.body_limit_bytes).await;
    }
    let mut response = door.http.handle(request).await.map(axum::body::Body::new);
    // rmcp answers an ended session 202 with no body; the Python SDK takes only 200 or 204 for
    // a DELETE's success (and logs a failed termination otherwise). 204 says the same thing.
    if delete && response.status() == StatusCode::ACCEPTED {
        *response.status_mut() = StatusCode::NO_CONTENT;
    }
    response
}
