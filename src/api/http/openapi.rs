//! The OpenAPI document's body schemas, and `/openapi.json`.
//!
//! The paths come from the handlers themselves (`#[utoipa::path]` beside each one, collected
//! by `utoipa_axum::routes!` as the router is built), so a route cannot be served without
//! being documented. Most handlers answer with `serde_json::Value` built by the service; the
//! types here describe those bodies for the document only and are never constructed. They
//! live in the door so the core and the service know nothing of OpenAPI.

// Documentation-only types: read by the `ToSchema` derive, never built.
#![allow(dead_code)]

use axum::http::header::CONTENT_TYPE;
use axum::response::{IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::HttpState;
use super::error::ApiError;
use crate::service::ErrorCode;
use axum::extract::State;

/// `GET /openapi.json`: the OpenAPI 3.1 document of every route (generated from the routes
/// the router serves, refined in `document`).
#[utoipa::path(get, path = "/openapi.json", tag = "ops",
    responses((status = 200, description = "the OpenAPI document", body = Object)))]
pub async fn document(State(state): State<HttpState>) -> Response {
    match state.openapi.as_ref() {
        Ok(json) => ([(CONTENT_TYPE, "application/json")], json.clone()).into_response(),
        Err(err) => ApiError::new(
            ErrorCode::Internal,
            format!("building the OpenAPI document: {err}"),
        )
        .into_response(),
    }
}

/// Every error: `{"error":{"code","message"}}`.
#[derive(Serialize, ToSchema)]
pub struct ErrorBody {
    pub error: ErrorDetail,
}

#[derive(Serialize, ToSchema)]
pub struct ErrorDetail {
    /// `invalid_request`, `unauthenticated`, `forbidden`, `not_found`, `conflict`,
    /// `payload_too_large`, `overloaded`, `limit_exceeded` (429 with `Retry-After`: over one
    /// of the caller's `[limits]`), `shutting_down`, `unavailable` (503 with `Retry-After`:
    /// nobody runs the session this moment), `timeout` or `internal`.
    pub code: String,
    pub message: String,
}

/// `POST /v1/sessions`.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct CreateSessionBody {
    /// An absolute path under an allowed root (403 otherwise; 404 when it does not exist);
    /// omitted or null: a fresh directory under the data directory.
    #[schema(pattern = "^/")]
    pub working_directory: Option<String>,
    /// Default `workspace_write`.
    pub permission_mode: Option<ModeBody>,
    #[schema(required = false)]
    pub rules: RulesInput,
    #[schema(required = false)]
    pub tools: ToolFilterInput,
    #[schema(required = false)]
    pub interactive: bool,
    /// Names of MCP servers from the server's settings.
    #[schema(required = false)]
    pub mcp_servers: Vec<String>,
    /// Names of tool providers whose tools the session gets (connected now or later).
    #[schema(required = false)]
    pub providers: Vec<String>,
    /// Kept with the session and shown back; null is `{}`.
    #[schema(value_type = Option<Object>)]
    pub metadata: Option<Value>,
    /// The JSON Schema `structured_output` validates against.
    #[schema(value_type = Option<Object>)]
    pub output_schema: Option<Value>,
    /// Network access for the session's sandboxed shells, where the server allows it.
    #[schema(required = false)]
    pub network: bool,
    /// Makes this a child of that session (the caller must be able to change it): the
    /// parent's workspace, rules and principal, a mode no wider than the parent's (asking
    /// for more is 403).
    pub parent_session_id: Option<String>,
    /// Start the session's filesystem as this snapshot (a fresh workspace over its layers;
    /// no `working_directory` with it). Another agent's snapshot is 404.
    pub from_snapshot: Option<String>,
    /// Runs the session in an image's filesystem (DESIGN §12): `image` or `rootfs`,
    /// `isolation`, `network`, `limits`, `env`, `workdir`, `user`.
    #[schema(value_type = Option<Object>)]
    pub environment: Option<Value>,
}

/// `POST /v1/images/pull`.
#[derive(Serialize, ToSchema)]
pub struct PullImageBody {
    /// An OCI image reference (a tag or `@sha256:` digest).
    pub image: String,
}

/// A cached image.
#[derive(Serialize, ToSchema)]
pub struct ImageBody {
    pub digest: String,
    pub references: Vec<String>,
    pub size_bytes: u64,
    pub layers: u64,
    pub env: Vec<String>,
    pub working_dir: Option<String>,
    pub user: Option<String>,
    pub pulled_at: String,
    pub in_use: u64,
}

/// `GET /v1/images`.
#[derive(Serialize, ToSchema)]
pub struct ImagesBody {
    pub images: Vec<ImageBody>,
}

/// A permission mode.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ModeBody {
    ReadOnly,
    WorkspaceWrite,
    DangerFullAccess,
}

/// Rules a session adds to the server's: `Tool` or `Tool(specifier)`.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct RulesInput {
    #[schema(required = false)]
    pub allow: Vec<Rule>,
    #[schema(required = false)]
    pub deny: Vec<Rule>,
    #[schema(required = false)]
    pub ask: Vec<Rule>,
}

/// One permission rule: a tool name (or alias), optionally with a specifier in parentheses.
#[derive(Serialize, ToSchema)]
#[schema(value_type = String, pattern = r"^[A-Za-z0-9_-]+(\(.*\))?$")]
pub struct Rule(String);

/// Which tools the session is offered.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ToolFilterInput {
    /// Tools (names or aliases) left out of the pool.
    #[schema(required = false)]
    pub deny: Vec<String>,
    /// Only tools whose least requirement fits this mode are offered.
    pub mode: Option<ModeBody>,
}

#[derive(Serialize, ToSchema)]
pub struct RulesBody {
    pub allow: Vec<String>,
    pub deny: Vec<String>,
    pub ask: Vec<String>,
}

#[derive(Serialize, ToSchema)]
pub struct ToolFilterBody {
    pub deny: Vec<String>,
    pub mode: Option<String>,
}

/// What an upload put in place.
#[derive(Serialize, ToSchema)]
pub struct UploadedBody {
    /// The file written (file uploads).
    pub path: Option<String>,
    /// `tar`, `tar.gz` or `zip` (archive uploads).
    pub format: Option<String>,
    /// Entries unpacked (archive uploads).
    pub entries: Option<u64>,
    /// Bytes written.
    pub bytes: u64,
}

/// A session.
#[derive(Serialize, ToSchema)]
pub struct SessionBody {
    pub id: String,
    pub working_directory: String,
    pub permission_mode: String,
    pub interactive: bool,
    /// The daemon that runs the session.
    pub owner: String,
    /// Where the owner is reached (`http://host:port`), when known.
    pub owner_address: Option<String>,
    /// RFC 3339.
    pub created_at: String,
    pub closed: bool,
    pub rules: RulesBody,
    pub tools: ToolFilterBody,
    pub mcp_servers: Vec<String>,
    pub providers: Vec<String>,
    #[schema(value_type = Object)]
    pub metadata: Value,
    /// The session asked for network access for its sandboxed shells.
    pub network: bool,
    /// The parent of a child session (absent for others).
    pub parent_session_id: Option<String>,
    /// Its environment (image, digest, isolation tier, network, limits, workdir), if any.
    #[schema(value_type = Option<Object>)]
    pub environment: Option<Value>,
    /// The snapshot the session started from (absent for others).
    pub from_snapshot: Option<String>,
    /// `cow` or `full`: how its view was made from the snapshot (in the create answer only).
    pub copy: Option<String>,
}

/// `POST /v1/sessions/{id}/snapshots` (the body may be empty).
#[derive(Serialize, ToSchema)]
pub struct SnapshotRequestBody {
    pub name: Option<String>,
}

/// A snapshot.
#[derive(Serialize, ToSchema)]
pub struct SnapshotBody {
    pub id: String,
    pub name: Option<String>,
    pub session_id: String,
    pub principal: Option<String>,
    /// Bytes of the files its own layer holds (0 until a fork's snapshot is measured).
    pub size_bytes: u64,
    /// `cow` (nothing copied) or `full`.
    pub copy: String,
    /// Layers a session from it stacks.
    pub layers: u64,
    pub created_at: String,
}

/// `GET /v1/snapshots`.
#[derive(Serialize, ToSchema)]
pub struct SnapshotList {
    pub snapshots: Vec<SnapshotBody>,
}

/// `POST /v1/sessions/{id}/fork`.
#[derive(Serialize, ToSchema)]
pub struct ForkBody {
    /// Sessions to make, 1 to 64.
    #[schema(minimum = 1, maximum = 64)]
    pub count: u64,
    pub name: Option<String>,
}

/// What a fork made.
#[derive(Serialize, ToSchema)]
pub struct ForkedBody {
    pub snapshot_id: String,
    pub sessions: Vec<SessionBody>,
    pub copy: String,
}

#[derive(Serialize, ToSchema)]
pub struct SessionList {
    pub sessions: Vec<SessionBody>,
}

/// Tool definitions in the asked format (or the full catalogue for `/v1/tools`).
#[derive(Serialize, ToSchema)]
pub struct ToolsBody {
    #[schema(value_type = Vec<Object>)]
    pub tools: Vec<Value>,
}

/// `GET /v1/mcp/servers`: every configured MCP server: each running instance (the daemon's,
/// and those of the sessions the caller sees), and a session-scoped server none of those
/// runs as one entry in state `not_started`.
#[derive(Serialize, ToSchema)]
pub struct McpServersBody {
    pub servers: Vec<McpServerBody>,
}

/// `GET /v1/providers`: the connected providers, by name.
#[derive(Serialize, ToSchema)]
pub struct ProvidersBody {
    pub providers: Vec<ProviderBody>,
}

/// A connected provider.
#[derive(Serialize, ToSchema)]
pub struct ProviderBody {
    pub name: String,
    /// The principal that registered it.
    pub principal: String,
    pub global: bool,
    /// The full names of its tools (`{provider}__{tool}`; `agent` for the agent provider).
    pub tools: Vec<String>,
    pub connections: Vec<ProviderConnectionBody>,
}

/// One connection of a provider.
#[derive(Serialize, ToSchema)]
pub struct ProviderConnectionBody {
    pub connection_id: String,
    /// `grpc` or `http`.
    pub transport: String,
    /// Calls sent and not answered yet.
    pub in_flight: u64,
    /// Calls sent since it connected.
    pub invoked: u64,
}

/// `POST /v1/providers`.
#[derive(Serialize, ToSchema)]
pub struct ProviderRegistrationBody {
    /// `^[A-Za-z0-9_-]+$`, without `__`, not `mcp`.
    pub provider: String,
    pub tools: Vec<ProvidedToolBody>,
    /// In every session's pool (admins only).
    pub global: Option<bool>,
}

/// A provided tool's declaration; unset flags take the fail-closed values.
#[derive(Serialize, ToSchema)]
pub struct ProvidedToolBody {
    pub name: String,
    pub description: Option<String>,
    /// A JSON Schema object with `"type": "object"` (default `{"type": "object"}`).
    #[schema(value_type = Option<Object>)]
    pub input_schema: Option<Value>,
    pub read_only: Option<bool>,
    pub concurrency_safe: Option<bool>,
    /// Default true.
    pub destructive: Option<bool>,
    /// `read_only`, `workspace_write` or `danger_full_access` (default).
    pub required_permission: Option<String>,
    /// `cancel` or `block` (default).
    pub interrupt_behavior: Option<String>,
    /// Default 30000.
    pub max_result_size_chars: Option<u64>,
    /// Default 120000.
    pub timeout_ms: Option<u64>,
}

/// A registered connection: open its stream at `/v1/providers/{connection_id}/invocations`.
#[derive(Serialize, ToSchema)]
pub struct ProviderRegisteredBody {
    pub provider: String,
    pub connection_id: String,
    pub tools: Vec<String>,
}

/// An invocation's progress: `data`, any JSON value, becomes the call's `tool:progress` event.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ProviderProgressBody {
    #[schema(value_type = Value)]
    pub data: Value,
}

/// An invocation's result.
#[derive(Serialize, ToSchema)]
pub struct ProviderResultBody {
    pub output: String,
    pub is_error: Option<bool>,
}

/// Whether a call in flight took the result.
#[derive(Serialize, ToSchema)]
pub struct ResultAcceptedBody {
    pub accepted: bool,
}

/// One instance of a bridged MCP server, or a session-scoped one no session runs.
#[derive(Serialize, ToSchema)]
pub struct McpServerBody {
    pub name: String,
    /// `session` or `daemon`.
    pub scope: String,
    /// The session a session-scoped instance belongs to; none for a daemon-scoped server and
    /// for a session-scoped one no session runs.
    pub session_id: Option<String>,
    /// `stdio` or `http`.
    pub transport: String,
    /// An instance's `starting`, `ready`, `restarting`, `failed` or `stopped`;
    /// `not_started` for a session-scoped server no session runs.
    pub state: String,
    /// The stdio process's pid, while one runs.
    pub pid: Option<u32>,
    /// The bridged names of the tools it offers now.
    pub tools: Vec<String>,
    pub last_error: Option<String>,
    pub restarts: u64,
}

/// One call of the toold shape.
#[derive(Serialize, ToSchema)]
pub struct CallBody {
    pub id: String,
    pub name: String,
    #[schema(value_type = Object)]
    pub input: Value,
}

/// `POST /v1/sessions/{id}/batches`: one of four shapes; the answer mirrors it.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchRequestBody {
    Toold {
        calls: Vec<CallBody>,
        idempotency_key: Option<String>,
    },
    /// `format: "anthropic"`; `tool_use` blocks of the assistant's content.
    Anthropic {
        format: String,
        #[schema(value_type = Vec<Object>)]
        content: Vec<Value>,
    },
    /// `format: "openai"`; `function_call` items of a Responses API output.
    OpenAi {
        format: String,
        #[schema(value_type = Vec<Object>)]
        output: Vec<Value>,
    },
    /// `format: "openai_chat"`; an assistant message with `tool_calls`.
    OpenAiChat {
        format: String,
        #[schema(value_type = Object)]
        message: Value,
    },
}

/// The batch's results in the request's shape.
#[derive(Serialize, ToSchema)]
#[serde(untagged)]
pub enum BatchResponseBody {
    Toold {
        batch_id: String,
        results: Vec<ResultBody>,
    },
    /// `{"role":"user","content":[tool_result blocks]}`.
    Anthropic {
        role: String,
        #[schema(value_type = Vec<Object>)]
        content: Vec<Value>,
    },
    /// `{"input":[function_call_output items]}`.
    OpenAi {
        #[schema(value_type = Vec<Object>)]
        input: Vec<Value>,
    },
    /// `{"messages":[tool messages]}`.
    OpenAiChat {
        #[schema(value_type = Vec<Object>)]
        messages: Vec<Value>,
    },
}

/// One result of the toold shape.
#[derive(Serialize, ToSchema)]
pub struct ResultBody {
    pub id: String,
    pub name: String,
    pub is_error: bool,
    pub output: String,
    pub error_kind: Option<String>,
    pub duration_ms: f64,
    pub offloaded: Option<OffloadedBody>,
}

#[derive(Serialize, ToSchema)]
pub struct OffloadedBody {
    pub result_id: String,
    pub total_chars: u64,
}

/// `GET /v1/sessions/{id}/batches/{batch_id}`.
#[derive(Serialize, ToSchema)]
pub struct BatchStatusBody {
    pub batch_id: String,
    pub session_id: String,
    /// `running`, `completed`, or `cut_off` (a restart cut it off before its calls were all
    /// recorded; a retry with its idempotency key settles it).
    pub status: String,
    pub format: String,
    pub calls: u64,
    pub created_at: String,
    pub completed_at: Option<String>,
    pub results: Vec<ResultBody>,
}

#[derive(Serialize, ToSchema)]
pub struct InterruptBody {
    pub session_id: String,
    pub interrupted: bool,
}

#[derive(Serialize, ToSchema)]
pub struct ApprovalsBody {
    pub approvals: Vec<ApprovalBody>,
}

#[derive(Serialize, ToSchema)]
pub struct ApprovalBody {
    pub id: String,
    pub session_id: String,
    pub call_id: String,
    pub tool: String,
    #[schema(value_type = Object)]
    pub input: Value,
    pub reason: String,
}

/// `POST .../approvals/{approval_id}`.
#[derive(Serialize, ToSchema)]
#[serde(deny_unknown_fields)]
pub struct ResolveApprovalBody {
    pub decision: DecisionBody,
    /// Shown in the denied call's result.
    pub reason: Option<String>,
    /// Apply the answer to the same call (bash line, resolved path, host, or tool) for the
    /// rest of the session.
    #[schema(required = false)]
    pub remember: bool,
}

#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum DecisionBody {
    Allow,
    Deny,
}

/// `format` of `GET /v1/sessions/{id}/tools`.
#[derive(Serialize, ToSchema)]
#[serde(rename_all = "snake_case")]
pub enum ToolFormatBody {
    Anthropic,
    Openai,
    OpenaiChat,
    Mcp,
    Toold,
}

#[derive(Serialize, ToSchema)]
pub struct ResolvedBody {
    pub id: String,
    pub decision: String,
}

/// A page of the audit log; `next_cursor` is null on the last page.
#[derive(Serialize, ToSchema)]
pub struct CallsPage {
    #[schema(value_type = Vec<Object>)]
    pub calls: Vec<Value>,
    pub next_cursor: Option<i64>,
}

/// One SSE frame's `data` (`id:` = `seq`, `event:` = `type`); `lagged` frames carry
/// `{"resume_after"}` instead.
#[derive(Serialize, ToSchema)]
pub struct EventBody {
    pub seq: u64,
    pub ts: String,
    #[serde(rename = "type")]
    pub event_type: String,
    pub session_id: String,
    pub batch_id: Option<String>,
    pub call_id: Option<String>,
    pub tool: Option<String>,
    /// The principal whose request caused the event; absent when none did.
    pub actor: Option<String>,
    #[schema(value_type = Object)]
    pub data: Value,
}

/// `GET /v1/results/{id}`: a character range of an offloaded output.
#[derive(Serialize, ToSchema)]
pub struct ResultPage {
    pub result_id: String,
    pub total_chars: u64,
    pub offset: u64,
    pub content: String,
}

#[derive(Serialize, ToSchema)]
pub struct StatusBody {
    /// `ok` (`/healthz`) or `ready` (`/readyz`).
    pub status: String,
}
