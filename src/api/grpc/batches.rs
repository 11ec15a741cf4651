//! Batch RPCs: `ExecuteBatch` (whole), `Execute` (calls streamed in, events and ordered
//! results streamed out) and `GetResult`. Calls and results are translated here into the
//! service's typed requests and out of its outcomes; running them is the service's.

use std::pin::Pin;

use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::events::event;
use super::proto::{self, execute_request, execute_response};
use super::{GrpcDoor, caller, invalid, status};
use crate::api::forward::grpc::RpcConcerns;
use crate::registry::calls::BatchRequest;
use crate::service::{BatchItem, BatchStream, ServiceError, StreamDetail, StreamRequest};
use crate::tool::{CallInput, ToolCall, ToolResult};

/// Characters `GetResult` returns when no limit is given, and at most. At the default, a page
/// of 4-byte characters stays under the 4 MiB message limit most gRPC clients keep.
const DEFAULT_RESULT_PAGE: u64 = 256 << 10;
const MAX_RESULT_PAGE: u64 = 1 << 20;

pub type ExecuteResponses =
    Pin<Box<dyn Stream<Item = Result<proto::ExecuteResponse, Status>> + Send + 'static>>;

impl GrpcDoor {
    pub(super) async fn execute_batch(
        &self,
        request: Request<proto::ExecuteBatchRequest>,
    ) -> Result<Response<proto::ExecuteBatchResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        let concerns = RpcConcerns::Session(&message.session_id);
        forward_rpc!(self, concerns, extensions, metadata, message, execute_batch);
        let (session_id, batch) = batch_request(message)?;
        let outcome = self
            .service
            .execute_batch(&caller, &session_id, batch)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::ExecuteBatchResponse {
            batch_id: outcome.batch_id,
            results: outcome.results.iter().cloned().map(result).collect(),
            replayed: outcome.replayed,
        }))
    }

    pub(super) async fn execute(
        &self,
        request: Request<Streaming<proto::ExecuteRequest>>,
    ) -> Result<Response<ExecuteResponses>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, mut incoming) = request.into_parts();
        let session_id = started_session(&mut incoming).await?;
        let concerns = RpcConcerns::Session(&session_id);
        if let Some(mut relay) = self.relay(concerns, &extensions).await? {
            let outbound = relayed_calls(session_id.clone(), incoming);
            let answer = relay
                .client
                .execute(relay.request(metadata, outbound))
                .await;
            let answer = relay.answer(&self.service, answer)?;
            return Ok(Response::new(Box::pin(answer.into_inner())));
        }
        let request = StreamRequest::arriving(calls(incoming), StreamDetail::Events);
        let stream = self
            .service
            .execute_stream(&caller, &session_id, request)
            .await
            .map_err(status)?;
        Ok(Response::new(responses(stream)))
    }

    pub(super) async fn get_result(
        &self,
        request: Request<proto::GetResultRequest>,
    ) -> Result<Response<proto::GetResultResponse>, Status> {
        let caller = caller(&request)?;
        let request = request.into_inner();
        let limit = match request.limit {
            0 => DEFAULT_RESULT_PAGE,
            limit => limit.min(MAX_RESULT_PAGE),
        };
        let page = self
            .service
            .read_result(&caller, &request.result_id, request.offset, limit)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::GetResultResponse {
            result_id: page.result_id,
            total_chars: page.total_chars,
            offset: page.offset,
            content: page.content,
        }))
    }
}

/// The session and the typed batch of an `ExecuteBatch` message (an empty key is none).
fn batch_request(request: proto::ExecuteBatchRequest) -> Result<(String, BatchRequest), Status> {
    let calls = request.calls.into_iter().map(call).collect();
    let key = Some(request.idempotency_key).filter(|key| !key.is_empty());
    let batch = BatchRequest::from_calls(calls, key).map_err(|e| status(ServiceError::from(e)))?;
    Ok((request.session_id, batch))
}

/// The session of an `Execute` stream: its first message must be `start`.
async fn started_session(
    incoming: &mut Streaming<proto::ExecuteRequest>,
) -> Result<String, Status> {
    match incoming.message().await? {
        Some(proto::ExecuteRequest {
            kind: Some(execute_request::Kind::Start(start)),
        }) => Ok(start.session_id),
        _ => Err(invalid("the first Execute message must be `start`")),
    }
}

/// A streamed batch's items as `Execute` responses: its events and ordered results, then
/// `done`.
fn responses(stream: BatchStream) -> ExecuteResponses {
    let done = proto::ExecuteResponse {
        kind: Some(execute_response::Kind::Done(proto::BatchDone {
            batch_id: stream.batch_id,
        })),
    };
    let items = futures::stream::unfold(stream.items, |mut items| async move {
        items.recv().await.map(|item| (item, items))
    });
    let responses = items
        .filter_map(|item| {
            futures::future::ready(match item {
                BatchItem::Event(e) => Some(execute_response::Kind::Event(event(&e))),
                BatchItem::Result(r) => Some(execute_response::Kind::Result(result(r))),
                // Progress is among the events (`tool:progress`).
                BatchItem::Progress(_) => None,
            })
        })
        .map(|kind| proto::ExecuteResponse { kind: Some(kind) })
        .chain(futures::stream::once(async move { done }))
        .map(Ok);
    Box::pin(responses)
}

/// The rest of an `Execute` stream as the owner is sent it: `start` again, then every message
/// the client sends, up to its end or its first error (the owner then sees the stream end).
fn relayed_calls(
    session_id: String,
    incoming: Streaming<proto::ExecuteRequest>,
) -> impl Stream<Item = proto::ExecuteRequest> + Send + 'static {
    let start = proto::ExecuteRequest {
        kind: Some(execute_request::Kind::Start(proto::ExecuteStart {
            session_id,
        })),
    };
    let rest = futures::stream::unfold(incoming, |mut incoming| async move {
        match incoming.message().await {
            Ok(Some(message)) => Some((message, incoming)),
            Ok(None) => None,
            Err(err) => {
                tracing::warn!(error = %err, "Execute stream failed; the relayed batch ends");
                None
            }
        }
    });
    futures::stream::once(async move { start }).chain(rest)
}

/// The calls of an `Execute` stream, up to `end` (or the client closing its side). A
/// message without a call ends the batch too: a second `start` or an empty one is logged.
fn calls(incoming: Streaming<proto::ExecuteRequest>) -> impl Stream<Item = ToolCall> + Send {
    futures::stream::unfold(incoming, |mut incoming| async move {
        match incoming.message().await {
            Ok(Some(proto::ExecuteRequest {
                kind: Some(execute_request::Kind::Call(message)),
            })) => Some((call(message), incoming)),
            Ok(Some(proto::ExecuteRequest {
                kind: Some(execute_request::Kind::End(_)),
            }))
            | Ok(None) => None,
            Ok(Some(other)) => {
                tracing::warn!(message = ?other, "unexpected Execute message ends the batch");
                None
            }
            Err(err) => {
                tracing::warn!(error = %err, "Execute stream failed; the batch ends");
                None
            }
        }
    })
}

/// Invalid JSON in `input_json` stays that call's `input_validation` error.
fn call(message: proto::ToolCall) -> ToolCall {
    ToolCall {
        id: message.id,
        name: message.name,
        input: CallInput::from_arguments(&message.input_json),
    }
}

fn result(result: ToolResult) -> proto::ToolResult {
    let (result_id, total_chars) = result
        .offloaded
        .map_or((String::new(), 0), |o| (o.result_id, o.total_chars));
    proto::ToolResult {
        id: result.id,
        name: result.name,
        is_error: result.is_error,
        output: result.output,
        error_kind: result
            .error_kind
            .map_or_else(String::new, |kind| kind.as_str().to_owned()),
        duration_ms: result.duration_ms,
        result_id,
        total_chars,
    }
}
