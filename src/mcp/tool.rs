//! A server's tool as a toold [`Tool`]: its spec from the server's listing and the entry's
//! settings, its calls sent to whichever connection the server has now.
//!
//! - **Flags.** Every tool of a server requires the entry's `permission`. It is serial, not
//!   read-only and destructive (the fail-closed defaults), unless `trust_annotations` lets the
//!   server's `readOnlyHint` (read-only, parallel-safe) and `destructiveHint: false` say
//!   otherwise. `interrupt_behavior` is cancel: an interrupt sends `notifications/cancelled`.
//! - **Timeout.** The entry's `tool_timeout_ms` is the spec's timeout, so the dispatcher
//!   times the call out (kind `timeout`) as it does any tool's; the cancellation that follows
//!   sends `notifications/cancelled` to the server.
//! - **Results** up to the default 30 000 characters are given whole; longer ones are
//!   offloaded like any tool's ([`super::content`] says what the model sees).
//! - **Bridged offloads are re-offloaded here.** A server that offloads its own large outputs
//!   (another toold, whose result is a preview ending "read the rest with read_result
//!   {res_…}" plus a `resource_link` to `toold://results/res_…`) names an id only it knows:
//!   toold's `read_result` and `resources/read` would answer "unknown result". So when a
//!   result links a `toold://results/` resource, the bridge reads the whole of it from the
//!   server (`resources/read`, page by page with `?offset=&limit=`, up to
//!   [`MAX_REFETCH_CHARS`]) and makes that the call's output instead of the server's
//!   preview; toold's offload phase then stores it in toold's own store with toold's own
//!   preview and pointer, which toold's `read_result` and `resources/read` serve. Rewriting
//!   the pointer to the bridged `mcp__{server}__read_result` was the other choice; it was not
//!   taken because that tool may be deferred, filtered out or not permitted, and toold's
//!   `resources/read` still could not serve the link. A link that cannot be read leaves the
//!   server's answer as it was (its pointer then names the server's store).

use std::sync::{Arc, Weak};
use std::time::Duration;

use async_trait::async_trait;
use rmcp::model::{
    CallToolRequest, CallToolRequestParams, CancelledNotification, CancelledNotificationParam,
    ClientNotification, ClientRequest, CustomResult, RequestMetaObject, ServerResult,
};
use rmcp::service::{PeerRequestOptions, ServiceError};
use serde_json::Value;

use std::sync::atomic::Ordering;

use super::connection::MAX_MESSAGE_BYTES;
use super::content;
use super::instance::Instance;
use crate::tool::{
    BuildError, ErrorKind, InterruptBehavior, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

/// The largest result given to the model whole.
const MAX_RESULT_CHARS: usize = 30_000;
/// How long a cancellation notice may take to be sent.
const CANCEL_SEND: Duration = Duration::from_secs(2);

/// One tool of one running server.
pub struct BridgedTool {
    spec: ToolSpec,
    /// The server's own name for the tool.
    raw_name: String,
    /// The instance, weakly: a pool that outlives its server's instance finds it gone.
    instance: Weak<Instance>,
    server: String,
}

impl BridgedTool {
    /// The tool `listed` (as the server listed it, in JSON) of `instance`, named `name`.
    pub fn new(
        instance: &Arc<Instance>,
        name: String,
        listed: &Value,
    ) -> Result<BridgedTool, BuildError> {
        let settings = instance.settings();
        let field = |key: &str| listed.get(key).and_then(Value::as_str);
        let raw_name = field("name").unwrap_or_default().to_owned();
        let description = field("description")
            .filter(|d| !d.trim().is_empty())
            .map(str::to_owned)
            .unwrap_or_else(|| {
                format!(
                    "The tool \"{raw_name}\" of the MCP server \"{}\".",
                    settings.name
                )
            });
        let hint = |key: &str| {
            listed
                .get("annotations")
                .and_then(|a| a.get(key))
                .and_then(Value::as_bool)
        };
        let trusted = settings.trust_annotations;
        let read_only = trusted && hint("readOnlyHint") == Some(true);
        let destructive = !(trusted && (read_only || hint("destructiveHint") == Some(false)));
        let mut builder = ToolSpec::builder(name)
            .description(description)
            .input_schema(listed.get("inputSchema").cloned().unwrap_or(Value::Null))
            .read_only(read_only)
            .concurrency_safe(read_only)
            .destructive(destructive)
            .permission(settings.permission)
            .interrupt_behavior(InterruptBehavior::Cancel)
            .should_defer(settings.defer)
            .idempotent(trusted && hint("idempotentHint") == Some(true))
            .open_world(!(trusted && hint("openWorldHint") == Some(false)))
            .max_result_size_chars(Some(MAX_RESULT_CHARS))
            .timeout(Duration::from_millis(settings.tool_timeout_ms));
        if let Some(schema) = listed.get("outputSchema").filter(|s| s.is_object()) {
            builder = builder.output_schema(schema.clone());
        }
        Ok(BridgedTool {
            spec: builder.build()?,
            raw_name,
            instance: Arc::downgrade(instance),
            server: settings.name.clone(),
        })
    }

    fn failure(&self, problem: impl std::fmt::Display) -> ToolOutput {
        ToolOutput {
            error_kind: Some(ErrorKind::Execution),
            ..ToolOutput::failure(format!("MCP server \"{}\": {problem}", self.server))
        }
    }
}

#[async_trait]
impl Tool for BridgedTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let Some(instance) = self.instance.upgrade() else {
            return Ok(self.failure("the server was stopped"));
        };
        let peer = match instance.ready_peer(&ctx.cancellation).await {
            Ok(peer) => peer,
            Err(why) => return Ok(self.failure(why)),
        };
        let mut params = CallToolRequestParams::new(self.raw_name.clone());
        params.arguments = match input {
            Value::Object(arguments) => Some(arguments),
            _ => None,
        };
        // The call's trace context as `_meta.traceparent` (SEP-414), over either transport:
        // rmcp's HTTP client sets its headers per connection, not per request.
        if let Some(context) = crate::tool::trace::current() {
            let mut meta = RequestMetaObject::new();
            meta.0.set_traceparent(context.traceparent());
            if let Some(state) = context.tracestate {
                meta.0.set_tracestate(state);
            }
            params.meta = Some(meta);
        }
        let request = ClientRequest::CallToolRequest(CallToolRequest::new(params));
        let handle = match peer
            .send_cancellable_request(request, PeerRequestOptions::no_options())
            .await
        {
            Ok(handle) => handle,
            Err(err) => return Ok(self.failure(describe(&err))),
        };
        let id = handle.id.clone();
        let oversized_before = instance.routes().oversized.load(Ordering::Acquire);
        let _progress = instance
            .routes()
            .route_progress(handle.progress_token.clone(), ctx.progress.clone());
        let answer_id = serde_json::to_string(&id).unwrap_or_default();
        let discarded = async {
            loop {
                let added = instance.routes().oversized_answer.notified();
                if instance.routes().take_oversized(&answer_id) {
                    return;
                }
                added.await;
            }
        };
        let response = tokio::select! {
            response = handle.await_response() => response,
            () = discarded => {
                return Ok(self.failure(format!(
                    "its answer was over {} MiB, the most a message may have, and was discarded",
                    MAX_MESSAGE_BYTES >> 20
                )));
            }
            () = ctx.cancellation.cancelled() => {
                let notice = CancelledNotification::new(CancelledNotificationParam::new(
                    Some(id),
                    Some("cancelled by toold (timeout, interrupt or session close)".into()),
                ));
                let sent = tokio::time::timeout(
                    CANCEL_SEND,
                    peer.send_notification(ClientNotification::CancelledNotification(notice)),
                )
                .await;
                let told = if matches!(sent, Ok(Ok(()))) { "" } else { " (the notice could not be sent)" };
                let mut why = format!("the call was cancelled{told}");
                if instance.routes().oversized.load(Ordering::Acquire) != oversized_before {
                    why.push_str(&format!(
                        "; meanwhile the server sent a message over {} MiB, which was discarded \
                         (it may have been this call's answer)",
                        MAX_MESSAGE_BYTES >> 20
                    ));
                }
                return Ok(self.failure(why));
            }
        };
        let not_a_result = "its answer to tools/call could not be read as a tool result \
             (toold's bridge answers no input requests and runs no tasks)";
        match response {
            // Over stdio: the result's JSON as the server sent it (see `super::stdio`).
            Ok(ServerResult::CustomResult(CustomResult(result))) if tool_result(&result) => {
                Ok(refetched(&peer, result).await)
            }
            // Over HTTP: rmcp's reading.
            Ok(ServerResult::CallToolResult(result)) => match serde_json::to_value(&result) {
                Ok(result) => Ok(refetched(&peer, result).await),
                Err(err) => Ok(self.failure(format!("its result could not be read: {err}"))),
            },
            Ok(_) => Ok(self.failure(not_a_result)),
            Err(err) => Ok(self.failure(describe(&err))),
        }
    }
}

/// Characters of a bridged offload read back at most (64 Mi): past that the server's own
/// preview and pointer stay.
const MAX_REFETCH_CHARS: u64 = 64 << 20;

/// Characters asked for per `resources/read` page (a toold server caps its pages at 256 Ki).
const REFETCH_PAGE: u64 = 256 << 10;

/// The URI scheme of a toold server's offloaded outputs.
const TOOLD_RESULTS: &str = "toold://results/";

/// `result` as the call's output; when it links a toold server's offloaded output, with the
/// whole output read back from the server in place of its preview (the module header).
async fn refetched(peer: &rmcp::service::Peer<rmcp::RoleClient>, mut result: Value) -> ToolOutput {
    let Some(blocks) = result.get_mut("content").and_then(Value::as_array_mut) else {
        return content::to_output(&result);
    };
    let link = blocks.iter().position(|block| {
        block["type"] == "resource_link"
            && block["uri"]
                .as_str()
                .is_some_and(|uri| uri.starts_with(TOOLD_RESULTS) && !uri.contains('?'))
    });
    let Some(link) = link else {
        return content::to_output(&result);
    };
    let uri = blocks[link]["uri"].as_str().unwrap_or_default().to_owned();
    let size = blocks[link]["size"].as_u64();
    match read_whole(peer, &uri, size).await {
        Ok(whole) => {
            // The preview (the text block before the link) and the link give way to the
            // whole output; any other block stays.
            let preview = link
                .checked_sub(1)
                .filter(|at| blocks[*at]["type"] == "text");
            blocks[link] = serde_json::json!({"type": "text", "text": whole});
            if let Some(at) = preview {
                blocks.remove(at);
            }
        }
        Err(why) => {
            tracing::debug!(%uri, %why, "a bridged offload was not read back; its pointer stays");
        }
    }
    content::to_output(&result)
}

/// The text of the toold resource `uri` (`size` characters, when the link says), page by page.
async fn read_whole(
    peer: &rmcp::service::Peer<rmcp::RoleClient>,
    uri: &str,
    size: Option<u64>,
) -> Result<String, String> {
    if size.is_some_and(|size| size > MAX_REFETCH_CHARS) {
        return Err(format!("over {MAX_REFETCH_CHARS} characters"));
    }
    let mut whole = String::new();
    let mut read: u64 = 0;
    loop {
        let page_uri = format!("{uri}?offset={read}&limit={REFETCH_PAGE}");
        let page = peer
            .read_resource(rmcp::model::ReadResourceRequestParams::new(page_uri))
            .await
            .map_err(|err| err.to_string())?;
        let text = page
            .contents
            .iter()
            .find_map(|contents| match contents {
                rmcp::model::ResourceContents::TextResourceContents { text, .. } => Some(text),
                _ => None,
            })
            .ok_or("a page without text")?;
        let chars = text.chars().count() as u64;
        whole.push_str(text);
        read += chars;
        let done = match size {
            Some(size) => read >= size,
            None => chars < REFETCH_PAGE,
        };
        if done || chars == 0 {
            return Ok(whole);
        }
        if read > MAX_REFETCH_CHARS {
            return Err(format!("over {MAX_REFETCH_CHARS} characters"));
        }
    }
}

/// Whether `result` (a `tools/call` result's JSON) is a tool's result as rmcp reads one into
/// its `CallToolResult` (at rmcp 3.11): an object with `content` (an array), `structuredContent`
/// (any value, even null) or `isError` (a boolean), and no `resultType` other than `complete`
/// (an input request or a task is something else). Its content blocks are rendered whatever
/// their type ([`content::render`]), where rmcp would refuse a type it does not know.
pub(super) fn tool_result(result: &Value) -> bool {
    let Some(result) = result.as_object() else {
        return false;
    };
    let present = |key: &str| result.get(key).filter(|value| !value.is_null());
    let complete = present("resultType").is_none_or(|kind| kind == "complete");
    let content = present("content");
    let is_error = present("isError");
    complete
        && content.is_none_or(Value::is_array)
        && is_error.is_none_or(Value::is_boolean)
        && (content.is_some() || is_error.is_some() || result.contains_key("structuredContent"))
}

/// An rmcp error as the reason a call failed.
fn describe(err: &ServiceError) -> String {
    match err {
        ServiceError::TransportClosed | ServiceError::TransportSend(_) => {
            "the connection closed during the call (the server exited or was stopped)".into()
        }
        ServiceError::McpError(data) => format!("the server refused the call: {}", data.message),
        other => other.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::tool_result;

    #[test]
    fn a_tool_result_is_read_as_rmcp_reads_one() {
        let results = [
            (json!({"content": []}), true),
            (json!({"structuredContent": null}), true),
            (json!({"isError": true}), true),
            (json!({"content": [], "resultType": "complete"}), true),
            (json!({"content": [{"type": "mystery"}]}), true),
            (json!({}), false),
            (json!({"_meta": {}}), false),
            (json!({"content": null, "isError": null}), false),
            (json!({"content": "text"}), false),
            (json!({"isError": "yes"}), false),
            (
                json!({"content": [], "resultType": "input_required"}),
                false,
            ),
            (json!({"tools": []}), false),
            (json!([]), false),
        ];
        for (result, expected) in results {
            assert_eq!(tool_result(&result), expected, "{result}");
        }
    }
}
