//! [`McpHandler`], rmcp's `ServerHandler` for toold: `initialize` (a legacy MCP session on
//! `/mcp` creates its own toold session), `tools/list` (the session's pool in the MCP format,
//! a page at a time), `tools/call` (a one-call batch through [`ToolService::execute_batch`];
//! through [`ToolService::execute_stream`] with its progress when the request's `_meta` carries
//! a `progressToken`, each report then a `notifications/progress` before the result; an
//! offloaded output adds a `resource_link`) and the resources that read offloaded outputs
//! back (`results`). Each request first finds its toold session: the one a stdio
//! connection's handler was made for (`for_session`), the one its legacy MCP session was
//! bound to at `initialize` (created then on `/mcp`, the named one on
//! `/v1/sessions/{id}/mcp`; the MCP session is refused on any other path), the one the path
//! names, or the caller's default session.
//!
//! Only translation lives here; a tool failure is an `isError` result, an unknown tool a
//! JSON-RPC error (`-32602`, as the MCP revisions say), and every other decision the service's.

use std::sync::{Arc, OnceLock};

use axum::http::request::Parts;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, CustomRequest,
    CustomResult, ErrorData, Implementation, InitializeRequestParams, InitializeResult,
    ListResourceTemplatesResult, ListToolsResult, MetaObject, PaginatedRequestParams,
    ProgressNotificationParam, ProgressToken, ReadResourceRequestParams, ReadResourceResponse,
    ServerCapabilities, ServerConfig, Tool,
};
use rmcp::service::RequestContext;
use rmcp::{RoleServer, ServerHandler};
use serde_json::Value;

use super::{McpBinding, results};
use crate::api::gate::CallerToken;
use crate::registry::calls::BatchRequest;
use crate::service::{
    BatchItem, CreateSessionRequest, ErrorCode, ServiceError, StreamDetail, StreamRequest,
    ToolService,
};
use crate::tool::{ErrorKind, ToolCall, ToolResult};

/// Tools per `tools/list` page; `nextCursor` leads to the next.
const TOOLS_PAGE: usize = 50;

/// One per legacy MCP session (rmcp keeps it for the session's life) or per stateless request.
pub struct McpHandler {
    service: Arc<ToolService>,
    template: Arc<CreateSessionRequest>,
    legacy: Arc<LegacySession>,
}

/// The toold session a legacy MCP session was bound to at `initialize`. An MCP session lives
/// on the path that opened it: its later requests on another path are refused.
struct LegacySession {
    service: Arc<ToolService>,
    bound: OnceLock<Bound>,
}

enum Bound {
    /// Created at `initialize` on `/mcp`; closed when the MCP session ends (DELETE, idle
    /// timeout, shutdown), which is when rmcp drops its handler. An rmcp session does not
    /// outlive the process, so its toold session is not left open for a client that can only
    /// start a new one.
    Own(String),
    /// The existing session `/v1/sessions/{id}/mcp` named; left open.
    Existing(String),
    /// The one session of a connection that is not HTTP (`toold mcp` over stdio), bound when
    /// the handler is made: every request runs in it, and whoever made the handler closes
    /// it (awaited, as the process ends), so it is not closed on drop.
    Connection(String),
}

impl Drop for LegacySession {
    fn drop(&mut self) {
        let Some(Bound::Own(id)) = self.bound.take() else {
            return;
        };
        let service = self.service.clone();
        // rmcp drops a session's handler inside its runtime; without one (a process exiting)
        // the session stays open, as any session does over a restart.
        if let Ok(runtime) = tokio::runtime::Handle::try_current() {
            runtime.spawn(async move {
                if let Err(err) = service.close_session(&id).await {
                    tracing::debug!(session = %id, %err, "closing an MCP session's own session");
                }
            });
        }
    }
}

impl McpHandler {
    pub fn new(service: Arc<ToolService>, template: Arc<CreateSessionRequest>) -> McpHandler {
        McpHandler {
            legacy: Arc::new(LegacySession {
                service: service.clone(),
                bound: OnceLock::new(),
            }),
            service,
            template,
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
            (Some(Bound::Own(id)), Some(McpBinding::Own)) => Ok(id.clone()),
            (Some(Bound::Existing(id)), Some(McpBinding::Session(named))) if id == named => {
                Ok(id.clone())
            }
            (Some(Bound::Own(id) | Bound::Existing(id)), _) => Err(ErrorData::invalid_request(
                format!("this MCP session is bound to session \"{id}\" on the path that opened it"),
                None,
            )),
            (None, Some(McpBinding::Session(named))) => Ok(named.clone()),
            (None, _) => {
                let caller = parts
                    .and_then(|p| p.extensions.get::<CallerToken>())
                    .and_then(|CallerToken(token)| token.as_deref());
                self.service
                    .default_session(caller, &self.template)
                    .await
                    .map_err(rpc_error)
            }
        }
    }

    /// Binds a legacy MCP session at `initialize`: to a session created now on `/mcp`, to the
    /// named one on `/v1/sessions/{id}/mcp`.
    async fn bind(&self, path: Option<&McpBinding>) -> Result<(), ErrorData> {
        let bound = match path {
            Some(McpBinding::Session(id)) => Bound::Existing(id.clone()),
            Some(McpBinding::Own) | None => {
                let info = self
                    .service
                    .create_session((*self.template).clone())
                    .await
                    .map_err(rpc_error)?;
                Bound::Own(info.id)
            }
        };
        // rmcp runs `initialize` once per handler; were it to run twice, a created session
        // that lost the race is closed at once rather than left open.
        if let Err(Bound::Own(id)) = self.legacy.bound.set(bound) {
            self.service.close_session(&id).await.map_err(rpc_error)?;
        }
        Ok(())
    }
}

impl ServerHandler for McpHandler {
    fn get_info(&self) -> ServerConfig {
        let capabilities = ServerCapabilities::builder()
            .enable_tools()
            .enable_resources()
            .build();
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
            self.bind(path).await?;
        }
        context.peer.set_peer_info(request.clone());
        self.negotiate_initialize(&request)
    }

    async fn list_tools(
        &self,
        request: Option<PaginatedRequestParams>,
        context: RequestContext<RoleServer>,
    ) -> Result<ListToolsResult, ErrorData> {
        let session = self.session_for(&context).await?;
        let definitions = self
            .service
            .list_tools(&session, "mcp")
            .map_err(rpc_error)?;
        let cursor = request.and_then(|r| r.cursor);
        let page = ToolsPage::at(cursor.as_deref(), definitions.len())?;
        let tools = definitions[page.start..page.end]
            .iter()
            .map(|definition| serde_json::from_value::<Tool>(definition.clone()))
            .collect::<Result<Vec<Tool>, _>>()
            .map_err(|err| ErrorData::internal_error(format!("a tool definition: {err}"), None))?;
        let mut result = ListToolsResult::with_all_items(tools);
        result.next_cursor = page.next_cursor;
        Ok(result)
    }

    async fn list_resource_templates(
        &self,
        _request: Option<PaginatedRequestParams>,
        _context: RequestContext<RoleServer>,
    ) -> Result<ListResourceTemplatesResult, ErrorData> {
        Ok(ListResourceTemplatesResult::with_all_items(vec![
            results::template(),
        ]))
    }

    async fn read_resource(
        &self,
        request: ReadResourceRequestParams,
        _context: RequestContext<RoleServer>,
    ) -> Result<ReadResourceResponse, ErrorData> {
        results::read(&self.service, &request.uri)
            .await
            .map(ReadResourceResponse::from)
    }

    async fn call_tool(
        &self,
        request: CallToolRequestParams,
        context: RequestContext<RoleServer>,
    ) -> Result<CallToolResponse, ErrorData> {
        let session = self.session_for(&context).await?;
        let input = Value::Object(request.arguments.unwrap_or_default());
        let call = ToolCall::new(format!("mcp-{}", context.id), request.name, input);
        let batch = BatchRequest::from_calls(vec![call], None)
            .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
        let result = match context.meta.get_progress_token() {
            None => self
                .service
                .execute_batch(&session, batch)
                .await
                .map_err(rpc_error)?
                .results
                .first()
                .cloned(),
            Some(token) => {
                self.call_with_progress(&session, batch, token, &context)
                    .await?
            }
        };
        let Some(result) = result else {
            return Err(ErrorData::internal_error(
                "the batch returned no result",
                None,
            ));
        };
        call_result(&result).map(CallToolResponse::from)
    }

    /// rmcp takes a request it cannot parse as its method's for a custom one: an unknown
    /// method, or a known one whose params do not fit it.
    async fn on_custom_request(
        &self,
        request: CustomRequest,
        _context: RequestContext<RoleServer>,
    ) -> Result<CustomResult, ErrorData> {
        Err(custom_request_error(&request.method, request.params))
    }
}

impl McpHandler {
    /// Runs a one-call batch as a stream with its progress, sending each report as
    /// `notifications/progress` for `token` before the result comes back. `progress` is the
    /// count of reports so far (it must increase; a call's total is not known), `message` the
    /// report's JSON text.
    async fn call_with_progress(
        &self,
        session: &str,
        batch: BatchRequest,
        token: ProgressToken,
        context: &RequestContext<RoleServer>,
    ) -> Result<Option<ToolResult>, ErrorData> {
        let mut stream = self
            .service
            .execute_stream(session, StreamRequest::known(batch, StreamDetail::Progress))
            .await
            .map_err(rpc_error)?;
        let mut reports: u32 = 0;
        while let Some(item) = stream.items.recv().await {
            match item {
                BatchItem::Progress(update) => {
                    reports += 1;
                    let notification =
                        ProgressNotificationParam::new(token.clone(), reports.into())
                            .with_message(update.data.to_string());
                    // A client that went away misses its progress; the call runs on and is
                    // recorded, as any streamed batch's.
                    if let Err(err) = context.peer.notify_progress(notification).await {
                        tracing::debug!(%err, "an MCP progress notification was not sent");
                    }
                }
                // The batch holds this one call: its result is the answer.
                BatchItem::Result(result) => return Ok(Some(result)),
                // Only asked for with `StreamDetail::Events`.
                BatchItem::Event(_) => {}
            }
        }
        Ok(None)
    }
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

/// The `_meta` key of a failed call's toold error kind (`permission_denied`, `timeout`, ...),
/// for clients that tell failures apart; the model reads the content's text.
const ERROR_KIND_META: &str = "dev.toold/errorKind";

/// A toold result as MCP's: an unknown tool is a protocol error, any other failure an
/// `isError` result the model reads.
fn call_result(result: &ToolResult) -> Result<CallToolResult, ErrorData> {
    if result.error_kind == Some(ErrorKind::UnknownTool) {
        return Err(ErrorData::invalid_params(result.output.clone(), None));
    }
    let mut content = vec![ContentBlock::text(result.output.clone())];
    if let Some(offloaded) = &result.offloaded {
        content.push(results::resource_link(offloaded));
    }
    let mut answer = if result.is_error {
        CallToolResult::error(content)
    } else {
        CallToolResult::success(content)
    };
    answer.structured_content = result.structured.clone();
    if let Some(kind) = result.error_kind {
        let mut meta = serde_json::Map::new();
        meta.insert(ERROR_KIND_META.to_owned(), kind.as_str().into());
        answer.meta = Some(MetaObject(meta));
    }
    Ok(answer)
}

/// A service error as a JSON-RPC error: a request the service refused is invalid params,
/// anything else an internal error; the message is the service's.
/// `-32602` for a method this server serves whose params rmcp could not parse (the reason
/// from parsing them as that method's), `-32601` for any other.
fn custom_request_error(method: &str, params: Option<Value>) -> ErrorData {
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
        "tools/list" | "resources/templates/list" => reason::<PaginatedRequestParams>(params),
        "resources/read" => reason::<ReadResourceRequestParams>(params),
        "initialize" => reason::<InitializeRequestParams>(params),
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

fn rpc_error(err: ServiceError) -> ErrorData {
    match err.code {
        ErrorCode::InvalidRequest | ErrorCode::NotFound | ErrorCode::Conflict => {
            ErrorData::invalid_params(err.message, None)
        }
        _ => ErrorData::internal_error(err.message, None),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

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
    fn an_unknown_tool_is_a_protocol_error_and_other_failures_are_results() {
        let call = ToolCall::new("c", "reed_file", serde_json::json!({}));
        let unknown = ToolResult::refused(&call, ErrorKind::UnknownTool, "unknown tool");
        assert_eq!(
            call_result(&unknown).unwrap_err().code,
            rmcp::model::ErrorCode::INVALID_PARAMS
        );
        let denied = ToolResult::refused(&call, ErrorKind::PermissionDenied, "no");
        let answer = call_result(&denied).unwrap();
        assert_eq!(answer.is_error, Some(true));
        let meta = answer.meta.unwrap();
        assert_eq!(meta.0[ERROR_KIND_META], "permission_denied");
    }
}
