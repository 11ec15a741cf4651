//! [`McpHandler`], rmcp's `ServerHandler` for toold: `initialize` (a legacy MCP session on
//! `/mcp` creates its own toold session), `tools/list` (the session's pool in the MCP format,
//! a page at a time), `tools/call` (run by `calls`: a one-call streamed batch, with progress,
//! cancellation and approvals asked of the client), prompts (`prompts`), completion, and the
//! resources that read offloaded outputs back (`results`). Each request first finds its toold
//! session: the one a stdio connection's handler was made for (`for_session`), the one its
//! legacy MCP session was bound to at `initialize` (on `/mcp` the default session of the
//! principal that opened it, the named one on `/v1/sessions/{id}/mcp`; the MCP session is
//! refused on any other path), the one the path names, or the caller's default session.
//!
//! A legacy (2025-era) MCP session on `/mcp` is bound to its principal's default session, the
//! one that principal's stateless (2026-era) requests run in (DESIGN §8's "one per token,
//! created on first use from `[mcp]`"), not to a session of its own: clients that open an
//! MCP session per call (langchain-mcp-adapters' default) or per window then share one
//! workspace, file-state cache and shell directory, as a 2026-era client does, instead of
//! losing their files between calls. Ending the MCP session (DELETE, idle timeout) therefore
//! closes no toold session; the default session is closed like any other (`DELETE
//! /v1/sessions/{id}`), and the next request then creates a new one. A client that wants a
//! session of its own creates one (`POST /v1/sessions`) and speaks MCP on
//! `/v1/sessions/{id}/mcp`. Every service call names the request's caller
//! ([`McpCaller`]: the gate's token and principal; `local`, an admin, over stdio), so the
//! service decides what it may do, as for the other doors: a legacy MCP session opened by one
//! principal serves another's requests only as far as the service lets that one act.
//!
//! Only translation lives here; a request the service refuses is a JSON-RPC error
//! ([`rpc_error`]), a request rmcp could not parse `-32601` or `-32602`, and every other
//! decision the service's.

use std::sync::{Arc, OnceLock};

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CompleteRequestParams, CompleteResult, CompletionInfo,
    CustomRequest, CustomResult, ErrorData, GetPromptRequestMethod, GetPromptRequestParams,
    GetPromptResponse, Implementation, InitializeRequestParams, InitializeResult,
    ListPromptsRequestMethod, ListPromptsResult, ListResourceTemplatesResult, ListResourcesResult,
    ListToolsResult, PaginatedRequestParams, Prompt, ProtocolVersion, ReadResourceRequestParams,
    ReadResourceResponse, Reference, Resource, ResourceTemplate, ServerCapabilities, ServerConfig,
    SubscriptionFilter, Tool,
};
use rmcp::service::{NotificationContext, RequestContext, SubscriptionContext};
use rmcp::{RoleServer, ServerHandler};
use serde_json::Value;
use tokio_util::sync::CancellationToken;

#[cfg(feature = "mcp-conformance-fixtures")]
use super::fixtures;
use super::{McpBinding, calls, list_changed, prompts, results};
use crate::api::gate::CallerToken;
use crate::permission::{Principal, Role};
use crate::service::{CreateSessionRequest, ErrorCode, ServiceError, ToolService};

/// Who a request to the MCP door comes from, as the gate found: its bearer token (approvers
/// are recorded by its fingerprint, input-required states bound to it) and its principal.
#[derive(Clone, Debug)]
pub struct McpCaller {
    pub token: Option<String>,
    pub principal: Principal,
}

impl McpCaller {
    /// The caller of `context`'s request; without HTTP parts (stdio) the local user.
    pub fn of(context: &RequestContext<RoleServer>) -> McpCaller {
        let Some(parts) = context.extensions.get::<Parts>() else {
            return McpCaller::local();
        };
        McpCaller {
            token: parts
                .extensions
                .get::<CallerToken>()
                .and_then(|CallerToken(token)| token.clone()),
            // The gate names the principal of every request it admits; a request without one
            // is nobody's, so it may act on nothing that exists.
            principal: parts
                .extensions
                .get::<Principal>()
                .cloned()
                .unwrap_or_else(|| Principal::new("unidentified", Role::Agent)),
        }
    }

    /// `toold mcp`: the person who started the process, an admin.
    pub fn local() -> McpCaller {
        McpCaller {
            token: None,
            principal: Principal::local(),
        }
    }
}

/// Tools per `tools/list` page; `nextCursor` leads to the next.
const TOOLS_PAGE: usize = 50;

/// One per legacy MCP session (rmcp keeps it for the session's life) or per stateless request.
pub struct McpHandler {
    service: Arc<ToolService>,
    template: Arc<CreateSessionRequest>,
    legacy: Arc<LegacySession>,
    /// The conformance fixtures' state for this handler's MCP session.
    #[cfg(feature = "mcp-conformance-fixtures")]
    fixtures: fixtures::FixtureSession,
    /// Put before each JSON-RPC id to make a call id: `mcp-{prefix}-{id}`. JSON-RPC ids are
    /// unique only within one MCP session (a legacy session's handler) or one request (a
    /// stateless one's), and clients count them from 1, so within a toold session that
    /// several MCP sessions and requests share they repeat; the handler's own random prefix
    /// keeps the audit log's call ids apart while still showing the client's id.
    call_prefix: String,
}

/// The toold session a legacy MCP session was bound to at `initialize`. An MCP session lives
/// on the path that opened it: its later requests on another path are refused.
struct LegacySession {
    bound: OnceLock<Bound>,
    /// Who opened the MCP session (at `initialize`): its default session is found, and its
    /// tool list watched, as that principal.
    opened_by: OnceLock<Principal>,
    /// Fires when the MCP session ends (its handler is dropped): what was started for it
    /// (the `list_changed` announcer) stops.
    ended: CancellationToken,
}

enum Bound {
    /// On `/mcp`: the default session of the principal that opened the MCP session, looked up
    /// again for each request (a closed one is replaced, as for a stateless request); the id
    /// is the one it had at `initialize`, whose tool list the MCP session is told about. Left
    /// open when the MCP session ends.
    Default(String),
    /// The existing session `/v1/sessions/{id}/mcp` named; left open.
    Existing(String),
    /// The one session of a connection that is not HTTP (`toold mcp` over stdio), bound when
    /// the handler is made: every request runs in it, and whoever made the handler closes
    /// it (awaited, as the process ends), so it is not closed on drop.
    Connection(String),
}

impl Drop for LegacySession {
    fn drop(&mut self) {
        self.ended.cancel();
    }
}

impl LegacySession {
    fn opened_by(&self) -> Principal {
        self.opened_by
            .get()
            .cloned()
            .unwrap_or_else(Principal::local)
    }
}

impl McpHandler {
    pub fn new(service: Arc<ToolService>, template: Arc<CreateSessionRequest>) -> McpHandler {
        McpHandler {
            legacy: Arc::new(LegacySession {
                bound: OnceLock::new(),
                opened_by: OnceLock::new(),
                ended: CancellationToken::new(),
            }),
            service,
            template,
            #[cfg(feature = "mcp-conformance-fixtures")]
            fixtures: fixtures::FixtureSession::default(),
            call_prefix: call_prefix(),
        }
    }

    /// A handler whose every request runs in `session`, an existing session it does not
    /// close (`toold mcp`: one connection, one session, closed by the caller at the end).
    pub fn for_session(service: Arc<ToolService>, session: String) -> McpHandler {
        let handler = McpHandler::new(service, Arc::new(CreateSessionRequest::default()));
        // A fresh handler's cell is empty, so this cannot fail.
        let _ = handler.legacy.bound.set(Bound::Connection(session));
        handler
    }

    /// The toold session `context`'s request runs in: the legacy MCP session's, the one the
    /// path names, or (a stateless request on `/mcp`) the caller's default session.
    async fn session_for(&self, context: &RequestContext<RoleServer>) -> Result<String, ErrorData> {
        let parts = context.extensions.get::<Parts>();
        let path = parts.and_then(|p| p.extensions.get::<McpBinding>());
        match (self.legacy.bound.get(), path) {
            (Some(Bound::Connection(id)), _) => Ok(id.clone()),
            (Some(Bound::Default(_)), Some(McpBinding::Own)) => self
                .service
                .default_session(&self.legacy.opened_by(), &self.template)
                .await
                .map_err(rpc_error),
            (Some(Bound::Existing(id)), Some(McpBinding::Session(named))) if id == named => {
                Ok(id.clone())
            }
            (Some(Bound::Default(id) | Bound::Existing(id)), _) => Err(ErrorData::invalid_request(
                format!("this MCP session is bound to session \"{id}\" on the path that opened it"),
                None,
            )),
            (None, Some(McpBinding::Session(named))) => Ok(named.clone()),
            (None, _) => {
                let caller = McpCaller::of(context);
                self.service
                    .default_session(&caller.principal, &self.template)
                    .await
                    .map_err(rpc_error)
            }
        }
    }

    /// Binds a legacy MCP session at `initialize`: to its principal's default session on
    /// `/mcp` (created now if it has none), to the named one on `/v1/sessions/{id}/mcp`.
    async fn bind(&self, path: Option<&McpBinding>, caller: &Principal) -> Result<(), ErrorData> {
        let _ = self.legacy.opened_by.set(caller.clone());
        let bound = match path {
            Some(McpBinding::Session(id)) => Bound::Existing(id.clone()),
            Some(McpBinding::Own) | None => Bound::Default(
                self.service
                    .default_session(caller, &self.template)
                    .await
                    .map_err(rpc_error)?,
            ),
        };
        // rmcp runs `initialize` once per handler; a second binding would change nothing.
        let _ = self.legacy.bound.set(bound);
        Ok(())
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let builder = ServerCapabilities::builder()
            .enable_tools()
            .enable_tool_list_changed()
            .enable_resources()
            .enable_completions();
        let capabilities = if self.offers_prompts() {
            builder.enable_prompts().build()
        } else {
            builder.build()
        };
        InitializeResult::new(capabilities)
            .with_server_info(Implementation::new("toold", env!("CARGO_PKG_VERSION")))
    }

    async fn initialize(
        &self,
        request: InitializeRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<InitializeResult, ErrorData> {
        let path = context
            .extensions
            .get::<Parts>()
            .and_then(|p| p.extensions.get::<McpBinding>());
        // A connection's handler was bound to its session when it was made.
        if !matches!(self.legacy.bound.get(), Some(Bound::Connection(_))) {
            self.bind(path, &McpCaller::of(&context).principal).await?;
        }
        context.peer.set_peer_info(request.clone());
        let result = self.negotiate_initialize(&request)?;
        #[cfg(feature = "mcp-conformance-fixtures")]
        let result = fixtures::extend_initialize(result);
        Ok(result)
    }

    async fn on_initialized(&self, context: NotificationContext<RoleServer>) {
        if let Some(Bound::Default(id) | Bound::Existing(id) | Bound::Connection(id)) =
            self.legacy.bound.get()
        {
            list_changed::announce_to_peer(
                &self.service,
                &self.legacy.opened_by(),
                id,
                context.peer,
                self.legacy.ended.clone(),
            );
        }
    }

    fn accepted_subscription_filter(
        &self,
        _requested: &SubscriptionFilter,
    ) -> Option<SubscriptionFilter> {
        Some(list_changed::accepted_filter())
    }

    async fn listen(&self, subscription: SubscriptionContext) -> Result<(), ErrorData> {
        let session = self.session_for(subscription.request_context()).await?;
        let caller = McpCaller::of(subscription.request_context());
        list_changed::listen(&self.service, &caller.principal, &session, subscription).await;
        Ok(())
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let session = self.session_for(&context).await?;
        let definitions = self
            .service
            .list_tools(&McpCaller::of(&context).principal, &session, "mcp")
            .map_err(rpc_error)?;
        let mut tools = definitions
            .iter()
            .map(|definition| serde_json::from_value::<Tool>(definition.clone()))
            .collect::<Result<Vec<Tool>, _>>()
            .map_err(|err| ErrorData::internal_error(format!("a tool definition: {err}"), None))?;
        #[cfg(feature = "mcp-conformance-fixtures")]
        tools.extend(fixtures::tools(&context)?);
        let cursor = request.and_then(|r| r.cursor);
        let page = ToolsPage::at(cursor.as_deref(), tools.len())?;
        let tools = tools.drain(page.start..page.end).collect();
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    async fn list_resources(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourcesResult, ErrorData> {
        Ok(ListResourcesResult::with_all_items(resources()?))
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(
            resource_templates()?,
        ))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        #[cfg(feature = "mcp-conformance-fixtures")]
        if let Some(answer) = fixtures::read_resource(&request.uri) {
            return answer;
        }
        results::read(
            &self.service,
            &McpCaller::of(&context).principal,
            &request.uri,
        )
        .await
        .map(ReadResourceResponse::from)
    }

    async fn list_prompts(
        &self,
        _request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListPromptsResult, ErrorData> {
        if !self.offers_prompts() {
            return Err(ErrorData::method_not_found::<ListPromptsRequestMethod>());
        }
        Ok(ListPromptsResult::with_all_items(
            self.prompts(&context).await?,
        ))
    }

    /// A fixture prompt, else a skill (through the `skill` tool); an unknown name is
    /// invalid params.
    async fn get_prompt(
        &self,
        request: GetPromptRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<GetPromptResponse, ErrorData> {
        #[cfg(feature = "mcp-conformance-fixtures")]
        if let Some(answer) = fixtures::get_prompt(&request, &context) {
            return answer;
        }
        if !self.offers_prompts() {
            return Err(ErrorData::method_not_found::<GetPromptRequestMethod>());
        }
        let session = self.session_for(&context).await?;
        let call_id = format!("mcp-{}-prompt-{}", self.call_prefix, context.id);
        let caller = McpCaller::of(&context);
        prompts::get(&self.service, &caller.principal, &session, call_id, request)
            .await
            .map(GetPromptResponse::from)
    }

    /// No prompt argument or template variable the door serves has a closed set of values,
    /// so a completion of a known one is empty; an unknown reference is invalid params.
    async fn complete(
        &self,
        request: CompleteRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CompleteResult, ErrorData> {
        let known = match &request.r#ref {
            Reference::Prompt(prompt) => self
                .prompts(&context)
                .await?
                .iter()
                .any(|p| p.name == prompt.name),
            Reference::Resource(template) => resource_templates()?
                .iter()
                .any(|t| t.uri_template == template.uri),
            // A kind of reference newer than this door.
            _ => false,
        };
        if !known {
            let reference = serde_json::to_string(&request.r#ref).unwrap_or_default();
            return Err(ErrorData::invalid_params(
                format!("unknown completion reference {reference}"),
                None,
            ));
        }
        Ok(CompleteResult::new(CompletionInfo::default()))
    }

    #[cfg(feature = "mcp-conformance-fixtures")]
    #[expect(
        deprecated,
        reason = "logging/setLevel is the 2025 era's, which this door serves"
    )]
    async fn set_level(
        &self,
        request: rmcp::model::SetLevelRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        fixtures::set_level(&self.fixtures, &request);
        Ok(())
    }

    #[cfg(feature = "mcp-conformance-fixtures")]
    async fn subscribe(
        &self,
        request: rmcp::model::SubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        fixtures::subscribe(&self.fixtures, &request);
        Ok(())
    }

    #[cfg(feature = "mcp-conformance-fixtures")]
    async fn unsubscribe(
        &self,
        request: rmcp::model::UnsubscribeRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<(), ErrorData> {
        fixtures::unsubscribe(&self.fixtures, &request);
        Ok(())
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        #[cfg(feature = "mcp-conformance-fixtures")]
        if let Some(answer) = fixtures::call_tool(&self.fixtures, &request, &context).await {
            return answer;
        }
        let session = self.session_for(&context).await?;
        let call_id = format!("mcp-{}-{}", self.call_prefix, context.id);
        calls::call_tool(&self.service, &session, call_id, request, &context).await
    }

    /// rmcp takes a request it cannot parse as its method's for a custom one: an unknown
    /// method, or a known one whose params do not fit it.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        let stateless = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        Err(custom_request_error(
            &request.method,
            request.params,
            stateless,
        ))
    }
}

impl McpHandler {
    /// Prompts are offered when skills are configured (and in a fixture build).
    fn offers_prompts(&self) -> bool {
        self.service.skills_configured() || cfg!(feature = "mcp-conformance-fixtures")
    }

    /// The prompts the door serves: the session's skills, and the conformance fixtures'.
    async fn prompts(
        &self,
        context: &RequestContext<RoleServer>,
    ) -> Result<Vec<Prompt>, ErrorData> {
        let mut prompts = Vec::new();
        if self.service.skills_configured() {
            let session = self.session_for(context).await?;
            let caller = McpCaller::of(context);
            prompts.extend(prompts::list(&self.service, &caller.principal, &session).await?);
        }
        #[cfg(feature = "mcp-conformance-fixtures")]
        prompts.extend(fixtures::prompts(context)?);
        Ok(prompts)
    }
}

/// The resources listed: offloaded outputs are not (a client learns of one from its call),
/// the conformance fixtures' are.
fn resources() -> Result<Vec<Resource>, ErrorData> {
    #[cfg_attr(not(feature = "mcp-conformance-fixtures"), expect(unused_mut))]
    let mut resources = Vec::new();
    #[cfg(feature = "mcp-conformance-fixtures")]
    resources.extend(fixtures::resources()?);
    Ok(resources)
}

/// The offloaded-output template, and the conformance fixtures'.
fn resource_templates() -> Result<Vec<ResourceTemplate>, ErrorData> {
    #[cfg_attr(not(feature = "mcp-conformance-fixtures"), expect(unused_mut))]
    let mut templates = vec![results::template()];
    #[cfg(feature = "mcp-conformance-fixtures")]
    templates.extend(fixtures::resource_templates()?);
    Ok(templates)
}

/// 12 random hex digits (48 bits): the random tail of a v7 UUID, whose head is a timestamp.
fn call_prefix() -> String {
    let uuid = uuid::Uuid::now_v7().simple().to_string();
    uuid[uuid.len() - 12..].to_owned()
}

/// The tools a `tools/list` page holds: the cursor is the index of its first tool (opaque to
/// clients), and a page past which tools remain names the next one.
#[derive(Debug, PartialEq, Eq)]
struct ToolsPage {
    start: usize,
    end: usize,
    next_cursor: Option<String>,
}

impl ToolsPage {
    fn at(cursor: Option<&str>, tools: usize) -> Result<ToolsPage, ErrorData> {
        let start = match cursor {
            None => 0,
            Some(cursor) => cursor
                .parse::<usize>()
                .ok()
                .filter(|start| *start < tools)
                .ok_or_else(|| {
                    ErrorData::invalid_params(format!("invalid cursor \"{cursor}\""), None)
                })?,
        };
        let end = tools.min(start + TOOLS_PAGE);
        Ok(ToolsPage {
            start,
            end,
            next_cursor: (end < tools).then(|| end.to_string()),
        })
    }
}

/// `-32602` for a method this server serves whose params rmcp could not parse (the reason
/// from parsing them as that method's), `-32601` for any other; `initialize` is one of the
/// 2025 era's only: a `stateless` (2026-07-28) request for it is an unknown method, as the
/// conformance suite's `server-stateless` requires (404 with `-32601`).
fn custom_request_error(method: &str, params: Option<Value>, stateless: bool) -> ErrorData {
    fn reason<T: serde::de::DeserializeOwned>(params: Value) -> String {
        match serde_json::from_value::<T>(params) {
            Err(err) => err.to_string(),
            // Parsed alone, they fit: what rmcp refused was around them.
            Ok(_) => "they do not fit the method".to_owned(),
        }
    }
    let params = params.unwrap_or_else(|| Value::Object(Default::default()));
    let reason = match method {
        "tools/call" => reason::<CallToolRequestParams>(params),
        "tools/list" | "resources/list" | "resources/templates/list" | "prompts/list" => {
            reason::<PaginatedRequestParams>(params)
        }
        "prompts/get" => reason::<GetPromptRequestParams>(params),
        "completion/complete" => reason::<CompleteRequestParams>(params),
        "resources/read" => reason::<ReadResourceRequestParams>(params),
        "initialize" if !stateless => reason::<InitializeRequestParams>(params),
        _ => {
            return ErrorData::new(
                rmcp::model::ErrorCode::METHOD_NOT_FOUND,
                format!("method not found: \"{method}\""),
                None,
            );
        }
    };
    ErrorData::invalid_params(format!("invalid params for \"{method}\": {reason}"), None)
}

/// A service error as a JSON-RPC error: a request the service refused is invalid params, a
/// caller over one of its `[limits]` [`LIMIT_EXCEEDED`], anything else an internal error; the
/// message is the service's.
pub(super) fn rpc_error(err: ServiceError) -> ErrorData {
    match err.code {
        ErrorCode::InvalidRequest
        | ErrorCode::NotFound
        | ErrorCode::Conflict
        | ErrorCode::Forbidden
        | ErrorCode::PermissionDenied => ErrorData::invalid_params(err.message, None),
        ErrorCode::LimitExceeded => ErrorData::new(
            LIMIT_EXCEEDED,
            err.message,
            Some(serde_json::json!({"code": err.code.as_str(), "retry_after_seconds": 1})),
        ),
        _ => ErrorData::internal_error(err.message, None),
    }
}

/// The JSON-RPC error of a call over one of the caller's `[limits]` (a batch or session slot;
/// the request rate is refused before the MCP door, as HTTP 429): in the range JSON-RPC
/// leaves to servers, its `data` naming the API's code (`limit_exceeded`) and when to retry.
/// Not a tool result: the call did not run, and a retry may succeed.
pub const LIMIT_EXCEEDED: rmcp::model::ErrorCode = rmcp::model::ErrorCode(-32029);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_limit_is_its_own_json_rpc_error_and_other_refusals_are_invalid_params() {
        let limited = rpc_error(ServiceError::new(
            ErrorCode::LimitExceeded,
            "principal \"a\" has 1 batches running",
        ));
        assert_eq!(limited.code, LIMIT_EXCEEDED);
        assert_eq!(limited.data.unwrap()["code"], "limit_exceeded");
        let missing = rpc_error(ServiceError::not_found("unknown session \"s\""));
        assert_eq!(missing.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }

    #[test]
    fn pages_follow_their_cursors_to_the_last_tool() {
        let page = |cursor, tools| ToolsPage::at(cursor, tools).unwrap();
        assert_eq!(
            page(None, 3),
            ToolsPage {
                start: 0,
                end: 3,
                next_cursor: None
            }
        );
        let first = page(None, TOOLS_PAGE + 2);
        assert_eq!((first.start, first.end), (0, TOOLS_PAGE));
        let second = page(first.next_cursor.as_deref(), TOOLS_PAGE + 2);
        assert_eq!((second.start, second.end), (TOOLS_PAGE, TOOLS_PAGE + 2));
        assert_eq!(second.next_cursor, None);
        assert_eq!(page(None, 0).end, 0);
        for bad in ["x", "-1", "3", "99"] {
            assert!(ToolsPage::at(Some(bad), 3).is_err(), "{bad}");
        }
    }

    #[test]
    fn an_initialize_that_does_not_parse_is_bad_params_in_2025_and_unknown_in_2026() {
        use rmcp::model::ErrorCode as Code;
        let params = Some(serde_json::json!({"protocolVersion": 7}));
        let legacy = custom_request_error("initialize", params.clone(), false);
        assert_eq!(legacy.code, Code::INVALID_PARAMS, "{legacy:?}");
        let stateless = custom_request_error("initialize", params.clone(), true);
        assert_eq!(stateless.code, Code::METHOD_NOT_FOUND, "{stateless:?}");
        // Methods of both eras keep their params check.
        let call = custom_request_error("tools/call", params, true);
        assert_eq!(call.code, Code::INVALID_PARAMS, "{call:?}");
    }
}
