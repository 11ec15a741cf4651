//! `tools/call` (DESIGN §8): a one-call batch through [`ToolService::execute_stream`], so its
//! batch id is known while it runs: its progress as `notifications/progress` when the
//! request's `_meta` carries a `progressToken`; cancelled alone when rmcp cancels the request;
//! an approval it waits for asked of the client (`elicitation` in the 2025 era,
//! `input_required` in the 2026 era, whose retry is served here too); its result as MCP's (a
//! failure an `isError` result, an offloaded output with a `resource_link` from revision
//! 2025-06-18 on and as text alone before it (see [`ContentShape`]), an unknown tool a
//! `-32602` error). The handler finds the session and the call id; the rest is here. Each
//! call is a span whose parent is `_meta.traceparent` when the request has one.

use std::sync::Arc;

use axum::http::request::Parts;
use futures::future::BoxFuture;
use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, CallToolResponse, CallToolResult, ContentBlock, ErrorData, MetaObject,
    ProgressNotificationParam, ProtocolVersion,
};
use rmcp::service::RequestContext;
use serde_json::Value;

use super::elicitation::{ApprovalAsk, ApprovalAsks, ApprovalChannel, elicit_approval};
use super::handler::{McpCaller, rpc_error};
use super::input_required::{self, ApprovalState, Retry, Round, StateBinding};
use super::results;
use crate::registry::calls::BatchRequest;
use crate::service::{BatchItem, StreamDetail, StreamRequest, ToolService};
use crate::tool::trace::{self, TraceContext};
use crate::tool::{ErrorKind, ToolCall, ToolResult};

/// Who the audit row of a call its MCP client cancelled names.
pub(super) const MCP_CLIENT: &str = "mcp_client";

/// Answers `request`, run in `session` as call `call_id`, or the retry it is, in a span of
/// its own: its parent the `traceparent` in the request's `_meta` (SEP-414), else the
/// request's HTTP `traceparent` header when rmcp serves the request off the HTTP request's
/// task (a 2025-era session's), else the span it runs in.
pub async fn call_tool(
    service: &Arc<ToolService>,
    session: &str,
    call_id: String,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    // rmcp leaves `_meta` in the params or moves it to the context, depending on the era.
    let from_meta = [request.meta.as_ref(), Some(&context.meta)]
        .into_iter()
        .flatten()
        .find_map(|meta| TraceContext::parse(meta.0.get_traceparent()?, meta.0.get_tracestate()));
    let incoming = from_meta.or_else(|| {
        let from_task = trace::incoming();
        let from_headers = context
            .extensions
            .get::<Parts>()
            .and_then(|parts| crate::api::trace_parent::from_headers(&parts.headers));
        from_headers.filter(|_| from_task.is_none())
    });
    let span = crate::api::trace_parent::request_span(
        || format!("tools/call {}", request.name).into(),
        incoming.as_ref(),
        || {
            vec![
                ("mcp.method.name", "tools/call".into()),
                ("gen_ai.tool.name", request.name.to_string().into()),
            ]
        },
    );
    let incoming = incoming.or_else(trace::incoming);
    trace::scope(
        incoming,
        span.within(answer_call(service, session, call_id, request, context)),
    )
    .await
}

async fn answer_call(
    service: &Arc<ToolService>,
    session: &str,
    call_id: String,
    request: CallToolRequestParams,
    context: &RequestContext<RoleServer>,
) -> Result<CallToolResponse, ErrorData> {
    let caller = McpCaller::of(context);
    let shape = ContentShape::of(context);
    if let Some(sealed) = request.request_state.as_deref() {
        let retry = Retry {
            service,
            session,
            caller: &caller,
            request: &request,
            context,
        };
        return match retry.run(sealed).await? {
            Round::Done(result) => call_result(&result, shape).map(CallToolResponse::from),
            Round::InputRequired(asked) => Ok(asked.into()),
        };
    }
    let input = Value::Object(request.arguments.unwrap_or_default());
    let call = ToolCall::new(call_id.clone(), request.name.clone(), input.clone());
    let batch = BatchRequest::from_calls(vec![call], None)
        .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
    match run_call(service, session, batch, context, &caller).await? {
        CallOutcome::Done(result) => call_result(&result, shape).map(CallToolResponse::from),
        CallOutcome::Asked { batch_id, ask } => {
            let state = ApprovalState {
                session: session.to_owned(),
                batch: batch_id,
                call: call_id,
                approval: ask.approval_id.clone(),
            };
            let token = caller.token.as_deref();
            let binding = StateBinding::new(session, token, &request.name, &input);
            input_required::ask(&ask, &state, &binding).map(CallToolResponse::from)
        }
    }
}

/// How a `tools/call`'s batch went, as far as this request follows it.
enum CallOutcome {
    Done(ToolResult),
    /// The call waits for `ask`, which goes to the client in an input-required result; the
    /// batch runs on (`input_required`).
    Asked {
        batch_id: String,
        ask: ApprovalAsk,
    },
}

/// Runs a one-call batch as a stream and answers with its result. With a `progressToken`
/// in the request's `_meta`, each progress report goes out first as
/// `notifications/progress` (`progress` the count of reports so far, which must increase
/// as a call's total is not known; `message` the report's JSON text). When rmcp cancels
/// the request (`notifications/cancelled` in the 2025 era, the client closing a 2026
/// request's connection) the batch is cancelled alone, as an interrupt would, with
/// `mcp_client` in its audit row; the result then says so. An approval the call waits for
/// is also asked of a client that takes elicitations (`elicitation`), or, in the 2026
/// era, ends this request with the ask (`input_required`).
async fn run_call(
    service: &Arc<ToolService>,
    session: &str,
    batch: BatchRequest,
    context: &RequestContext<RoleServer>,
    caller: &McpCaller,
) -> Result<CallOutcome, ErrorData> {
    let channel = ApprovalChannel::of(context);
    // Subscribed before the batch starts, so its ask cannot be missed.
    let mut asks = ApprovalAsks::subscribe(service, channel);
    let mut stream = service
        .execute_stream(
            &caller.principal,
            session,
            StreamRequest::known(batch, StreamDetail::Progress),
        )
        .await
        .map_err(rpc_error)?;
    let batch_id = stream.batch_id.clone();
    let token = context.meta.get_progress_token();
    let mut reports: u32 = 0;
    let mut cancelled = false;
    // Polled here, in the request's task: see `elicitation`'s header.
    let mut elicitation: Option<BoxFuture<'_, ()>> = None;
    loop {
        let item = tokio::select! {
            item = stream.items.recv() => item,
            ask = asks.next(&batch_id), if elicitation.is_none() => {
                if channel == ApprovalChannel::InputRequired {
                    return Ok(CallOutcome::Asked { batch_id, ask });
                }
                let peer = &context.peer;
                elicitation = Some(Box::pin(elicit_approval(service, session, peer, ask, caller)));
                continue;
            }
            () = async { if let Some(open) = elicitation.as_mut() { open.await } }, if elicitation.is_some() => {
                elicitation = None;
                continue;
            }
            () = context.ct.cancelled(), if !cancelled => {
                cancelled = true;
                // A batch queued or running is cancelled; one that ended meanwhile is neither,
                // and its result is on its way.
                if let Err(err) =
                    service.cancel_batch(&caller.principal, session, &stream.batch_id, MCP_CLIENT)
                {
                    tracing::debug!(%err, "an MCP cancellation found no queued or running call");
                }
                continue;
            }
        };
        // An elicitation still open when the call ends is dropped: its approval is settled.
        match item {
            None => {
                return Err(ErrorData::internal_error(
                    "the batch returned no result",
                    None,
                ));
            }
            Some(BatchItem::Progress(update)) => {
                let Some(token) = &token else { continue };
                reports += 1;
                let notification = ProgressNotificationParam::new(token.clone(), reports.into())
                    .with_message(update.data.to_string());
                // A client that went away misses its progress; the call runs on and is
                // recorded, as any streamed batch's.
                if let Err(err) = context.peer.notify_progress(notification).await {
                    tracing::debug!(%err, "an MCP progress notification was not sent");
                }
            }
            // The batch holds this one call: its result is the answer.
            Some(BatchItem::Result(result)) => return Ok(CallOutcome::Done(result)),
            // Only asked for with `StreamDetail::Events`.
            Some(BatchItem::Event(_)) => {}
        }
    }
}

/// The `_meta` key of a failed call's toold error kind (`permission_denied`, `timeout`, ...),
/// for clients that tell failures apart; the model reads the content's text.
const ERROR_KIND_META: &str = "dev.toold/errorKind";

/// Which content blocks a session's revision has for an offloaded output.
///
/// `resource_link` content arrived in revision 2025-06-18; the revisions before it (2025-03-26,
/// 2024-11-05) have text, image, audio and embedded resources only, and their SDKs refuse any
/// other block (the TypeScript SDK 1.11 with a `ZodError`, the Python SDK 1.9 with a
/// validation error), so the whole answer fails. A session negotiated before 2025-06-18 gets
/// the preview text, which already says how to read the rest (`read_result`), and a second
/// text block naming the resource `resources/read` pages (resources are in every revision);
/// from 2025-06-18 on the second block is the `resource_link`. The revision is the request's
/// (2026 era) or the one its session negotiated at `initialize` (rmcp keeps it in the peer's
/// info); none known means the latest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum ContentShape {
    /// 2025-06-18 and later: the preview and a `resource_link`.
    Linked,
    /// Before 2025-06-18: the preview and the resource's URI, as text.
    TextOnly,
}

impl ContentShape {
    fn of(context: &RequestContext<RoleServer>) -> ContentShape {
        ContentShape::for_revision(context.protocol_version().as_ref())
    }

    fn for_revision(revision: Option<&ProtocolVersion>) -> ContentShape {
        match revision {
            Some(revision) if *revision < ProtocolVersion::V_2025_06_18 => ContentShape::TextOnly,
            _ => ContentShape::Linked,
        }
    }
}

/// A toold result as MCP's: an unknown tool is a protocol error, any other failure an
/// `isError` result the model reads.
fn call_result(result: &ToolResult, shape: ContentShape) -> Result<CallToolResult, ErrorData> {
    if result.error_kind == Some(ErrorKind::UnknownTool) {
        return Err(ErrorData::invalid_params(result.output.clone(), None));
    }
    let mut content = vec![ContentBlock::text(result.output.clone())];
    if let Some(offloaded) = &result.offloaded {
        content.push(match shape {
            ContentShape::Linked => results::resource_link(offloaded),
            ContentShape::TextOnly => ContentBlock::text(results::resource_pointer(offloaded)),
        });
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn an_unknown_tool_is_a_protocol_error_and_other_failures_are_results() {
        let call = ToolCall::new("c", "reed_file", serde_json::json!({}));
        let unknown = ToolResult::refused(&call, ErrorKind::UnknownTool, "unknown tool");
        assert_eq!(
            call_result(&unknown, ContentShape::Linked)
                .unwrap_err()
                .code,
            rmcp::model::ErrorCode::INVALID_PARAMS
        );
        let denied = ToolResult::refused(&call, ErrorKind::PermissionDenied, "no");
        let answer = call_result(&denied, ContentShape::Linked).unwrap();
        assert_eq!(answer.is_error, Some(true));
        let meta = answer.meta.unwrap();
        assert_eq!(meta.0[ERROR_KIND_META], "permission_denied");
    }

    #[test]
    fn revisions_before_2025_06_18_get_no_resource_link() {
        let shape = |revision: &str| {
            ContentShape::for_revision(Some(&serde_json::from_value(revision.into()).unwrap()))
        };
        assert_eq!(shape("2024-11-05"), ContentShape::TextOnly);
        assert_eq!(shape("2025-03-26"), ContentShape::TextOnly);
        assert_eq!(shape("2025-06-18"), ContentShape::Linked);
        assert_eq!(shape("2026-07-28"), ContentShape::Linked);
        assert_eq!(ContentShape::for_revision(None), ContentShape::Linked);
        let call = ToolCall::new("c", "bash", serde_json::json!({}));
        let mut offloaded = ToolResult::refused(&call, ErrorKind::PermissionDenied, "preview");
        offloaded.is_error = false;
        offloaded.error_kind = None;
        offloaded.offloaded = Some(crate::tool::OffloadedResult {
            result_id: "res_7".into(),
            total_chars: 99,
        });
        let old = call_result(&offloaded, ContentShape::TextOnly).unwrap();
        assert!(old.content.iter().all(|block| block.as_text().is_some()));
        let text = old.content[1].as_text().unwrap();
        assert!(text.text.contains("toold://results/res_7"), "{}", text.text);
        let new = call_result(&offloaded, ContentShape::Linked).unwrap();
        assert!(matches!(new.content[1], ContentBlock::ResourceLink(_)));
    }
}
