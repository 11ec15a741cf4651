//! Provider RPCs: `ProvideTools` (a provider's connection, both ways) and `ListProviders`.
//! Messages are translated here into the service's registration and answers, and the hub's
//! outbound messages into `Invoke`/`Cancel`; the connection's rules are the hub's.
//!
//! The connection lives while both directions are open: the provider closing its side, the
//! response stream being dropped (the client went away), or the daemon shutting down ends it.

use std::pin::Pin;
use std::sync::Arc;

use futures::{Stream, StreamExt};
use tokio_util::sync::CancellationToken;
use tonic::{Request, Response, Status, Streaming};

use super::proto::{self, provide_tools_request, provide_tools_response};
use super::{GrpcDoor, caller, invalid, status};
use crate::permission::Principal;
use crate::service::{Outbound, Registration, ToolDeclaration, ToolService, Transport};

pub type ProvideToolsResponses =
    Pin<Box<dyn Stream<Item = Result<proto::ProvideToolsResponse, Status>> + Send + 'static>>;

impl GrpcDoor {
    pub(super) async fn provide_tools(
        &self,
        request: Request<Streaming<proto::ProvideToolsRequest>>,
    ) -> Result<Response<ProvideToolsResponses>, Status> {
        let caller = caller(&request)?;
        let mut incoming = request.into_inner();
        let first = incoming
            .message()
            .await?
            .ok_or_else(|| invalid("the stream ended before its registration"))?;
        let Some(provide_tools_request::Kind::Register(registration)) = first.kind else {
            return Err(invalid(
                "the first message of ProvideTools must be `register`",
            ));
        };
        let registration = registration_from(registration)?;
        let connection = self
            .service
            .provide_tools(&caller, registration, Transport::Grpc)
            .map_err(status)?;
        let registered = proto::ProvideToolsResponse {
            kind: Some(provide_tools_response::Kind::Registered(
                proto::ProviderRegistered {
                    provider: connection.provider.clone(),
                    connection_id: connection.id.clone(),
                    tools: connection.tools.clone(),
                },
            )),
        };
        // Ends with the provider's side, or when the daemon starts shutting down.
        let closed = self.service.shutting_down();
        tokio::spawn(read_answers(
            self.service.clone(),
            caller,
            connection.id.clone(),
            incoming,
            closed.clone(),
        ));
        let invocations = futures::stream::unfold(
            (connection, closed),
            |(mut connection, closed)| async move {
                let message = tokio::select! {
                    message = connection.outbound.recv() => message?,
                    () = closed.cancelled() => return None,
                };
                Some((Ok(outbound(message)), (connection, closed)))
            },
        );
        let responses = futures::stream::once(async { Ok(registered) }).chain(invocations);
        Ok(Response::new(Box::pin(responses)))
    }

    pub(super) async fn list_providers(
        &self,
        request: Request<proto::ListProvidersRequest>,
    ) -> Result<Response<proto::ListProvidersResponse>, Status> {
        let caller = caller(&request)?;
        let providers = self
            .service
            .providers(&caller)
            .into_iter()
            .map(|provider| proto::Provider {
                name: provider.name,
                principal: provider.principal,
                global: provider.global,
                tools: provider.tools,
                connections: provider
                    .connections
                    .into_iter()
                    .map(|c| proto::ProviderConnection {
                        connection_id: c.connection_id,
                        transport: match c.transport {
                            Transport::Grpc => "grpc".into(),
                            Transport::Http => "http".into(),
                        },
                        in_flight: c.in_flight,
                        invoked: c.invoked,
                    })
                    .collect(),
            })
            .collect();
        Ok(Response::new(proto::ListProvidersResponse { providers }))
    }
}

/// Hands the provider's progress and results to the service until its side closes (or
/// fails), then ends the connection's stream.
async fn read_answers(
    service: Arc<ToolService>,
    caller: Principal,
    connection_id: String,
    mut incoming: Streaming<proto::ProvideToolsRequest>,
    closed: CancellationToken,
) {
    let _closed = closed.drop_guard();
    while let Ok(Some(message)) = incoming.message().await {
        let answered = match message.kind {
            Some(provide_tools_request::Kind::Progress(progress)) => {
                let data = serde_json::from_str(&progress.data_json)
                    .unwrap_or(serde_json::Value::String(progress.data_json));
                service.provider_progress(&caller, &connection_id, &progress.invocation_id, data)
            }
            Some(provide_tools_request::Kind::Result(result)) => service
                .provider_result(
                    &caller,
                    &connection_id,
                    &result.invocation_id,
                    result.output,
                    result.is_error,
                )
                .map(|_| ()),
            Some(provide_tools_request::Kind::Register(_)) | None => {
                tracing::info!(connection = %connection_id, "a provider message that is neither progress nor result ignored");
                Ok(())
            }
        };
        if answered.is_err() {
            // The connection is gone (ended by `DELETE`).
            return;
        }
    }
}

/// The hub's message as the wire's.
fn outbound(message: Outbound) -> proto::ProvideToolsResponse {
    let kind = match message {
        Outbound::Invoke(invocation) => provide_tools_response::Kind::Invoke(proto::Invoke {
            invocation_id: invocation.invocation_id,
            session_id: invocation.session_id,
            call_id: invocation.call_id,
            tool: invocation.tool,
            input_json: invocation.input.to_string(),
            deadline_unix_ms: invocation.deadline_unix_ms,
            child_session: invocation.child_session.map(|child| proto::ChildSession {
                session_id: child.session_id,
                token: child.token,
            }),
            traceparent: invocation.traceparent.unwrap_or_default(),
        }),
        Outbound::Cancel {
            invocation_id,
            reason,
        } => provide_tools_response::Kind::Cancel(proto::Cancel {
            invocation_id,
            reason,
        }),
    };
    proto::ProvideToolsResponse { kind: Some(kind) }
}

/// The wire's registration as the service's; a malformed field is INVALID_ARGUMENT naming it.
fn registration_from(registration: proto::ProviderRegistration) -> Result<Registration, Status> {
    let tools = registration
        .tools
        .into_iter()
        .map(|tool| {
            let field = |what: &str, err: &dyn std::fmt::Display| {
                invalid(format!("tool \"{}\": {what}: {err}", tool.name))
            };
            let input_schema = if tool.input_schema_json.trim().is_empty() {
                None
            } else {
                Some(
                    serde_json::from_str(&tool.input_schema_json)
                        .map_err(|err| field("input_schema_json is not JSON", &err))?,
                )
            };
            let required_permission = match tool.required_permission.as_str() {
                "" => None,
                text => Some(
                    text.parse()
                        .map_err(|err| field("required_permission", &err))?,
                ),
            };
            let interrupt_behavior = match tool.interrupt_behavior.as_str() {
                "" => None,
                text => Some(
                    serde_json::from_value(serde_json::Value::String(text.to_owned()))
                        .map_err(|_| field("interrupt_behavior", &"must be `cancel` or `block`"))?,
                ),
            };
            Ok(ToolDeclaration {
                name: tool.name.clone(),
                description: tool.description,
                input_schema,
                read_only: tool.read_only,
                concurrency_safe: tool.concurrency_safe,
                destructive: tool.destructive,
                required_permission,
                interrupt_behavior,
                max_result_size_chars: (tool.max_result_size_chars > 0)
                    .then_some(tool.max_result_size_chars),
                timeout_ms: (tool.timeout_ms > 0).then_some(tool.timeout_ms),
            })
        })
        .collect::<Result<Vec<_>, Status>>()?;
    Ok(Registration {
        provider: registration.provider,
        tools,
        global: registration.global,
    })
}
