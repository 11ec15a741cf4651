//! The gRPC door (DESIGN §4): `toold.v1.ToolService` from `proto/toold/v1/toold.proto`, plus
//! `grpc.health.v1` and server reflection (v1 and v1alpha), served on the HTTP listener.
//!
//! [`router`] builds the gRPC routes as an axum router behind the gRPC gates (`gates.rs`);
//! `api::listener` sends every request whose content type is `application/grpc*` here and the
//! rest to the HTTP app. Each RPC (`sessions.rs`, `batches.rs`, `events.rs`, `providers.rs`,
//! `files.rs`, `images.rs`) only translates messages to and from [`crate::service`] calls; errors go
//! through the one table in `api` ([`crate::api::grpc_code`]). Not here: any rule about
//! sessions, batches, events, files or snapshots.

/// Returns the answer of the daemon that runs what an RPC concerns, when that is not this one
/// (`api::forward`); otherwise carries on. `$message` moves only when forwarded.
macro_rules! forward_rpc {
    ($door:expr, $concerns:expr, $extensions:expr, $metadata:expr, $message:expr, $rpc:ident) => {
        if let Some(mut relay) = $door.relay($concerns, &$extensions).await? {
            let answer = relay.client.$rpc(relay.request($metadata, $message)).await;
            return relay.answer(&$door.service, answer);
        }
    };
}

mod batches;
mod events;
mod files;
mod gates;
mod images;
mod providers;
mod sessions;

use std::sync::Arc;

use tonic::{Request, Response, Status, Streaming};

use crate::api::forward::Forwarder;
use crate::api::forward::Hop;
use crate::api::forward::grpc::{Relay, RpcConcerns};
use crate::api::gate::Gate;
use crate::api::{ApiSettings, grpc_code};
use crate::permission::Principal;
use crate::service::{ErrorCode, ServiceError, ToolService};

/// The generated messages, server and client (`toold.v1`), and the descriptor set that
/// reflection serves. Clients in Rust (tests, benches, tools) use `proto::tool_service_client`.
#[allow(clippy::all, clippy::pedantic, missing_docs)]
pub mod proto {
    tonic::include_proto!("toold.v1");

    /// The encoded `FileDescriptorSet` of `toold.proto`.
    pub const FILE_DESCRIPTOR_SET: &[u8] = tonic::include_file_descriptor_set!("toold_descriptor");
}

/// The fully qualified name of the service (health reports it).
pub const SERVICE_NAME: &str = "toold.v1.ToolService";

/// What the gRPC RPCs share: the core service and the event buffer of subscriptions.
#[derive(Clone)]
pub struct GrpcDoor {
    service: Arc<ToolService>,
    event_buffer: usize,
    /// Relays an RPC for a session another daemon of the fleet runs.
    forward: Arc<Forwarder>,
}

/// Every gRPC service behind `gate` (shared with the HTTP door): toold's, health and
/// reflection.
pub async fn router(
    service: Arc<ToolService>,
    settings: &ApiSettings,
    gate: Arc<Gate>,
    forward: Arc<Forwarder>,
) -> axum::Router {
    let door = GrpcDoor {
        service,
        event_buffer: settings.event_buffer,
        forward: forward.clone(),
    };
    let tool_service = proto::tool_service_server::ToolServiceServer::new(door)
        .max_decoding_message_size(settings.body_limit_bytes)
        .max_encoding_message_size(usize::MAX);
    let (health_reporter, health) = tonic_health::server::health_reporter();
    // Serving from the start: the router exists only once the daemon is ready; while it
    // shuts down the gates answer UNAVAILABLE.
    health_reporter
        .set_service_status(SERVICE_NAME, tonic_health::ServingStatus::Serving)
        .await;
    let reflection = || {
        tonic_reflection::server::Builder::configure()
            .register_encoded_file_descriptor_set(proto::FILE_DESCRIPTOR_SET)
            .register_encoded_file_descriptor_set(tonic_health::pb::FILE_DESCRIPTOR_SET)
    };
    let mut routes = tonic::service::Routes::builder();
    routes.add_service(tool_service).add_service(health);
    match (reflection().build_v1(), reflection().build_v1alpha()) {
        (Ok(v1), Ok(v1alpha)) => {
            routes.add_service(v1).add_service(v1alpha);
        }
        // The descriptor sets are compiled in; failing to read them is a build defect, and
        // the door still serves without reflection.
        (v1, v1alpha) => tracing::error!(
            v1 = ?v1.err(),
            v1alpha = ?v1alpha.err(),
            "gRPC reflection unavailable"
        ),
    }
    routes
        .routes()
        .into_axum_router()
        // Inside the gates: a hop's secret is checked once the request is admitted.
        .layer(axum::middleware::from_fn_with_state(
            forward,
            crate::api::forward::grpc::check_hop,
        ))
        .layer(axum::middleware::from_fn_with_state(gate, gates::gate))
        .layer(axum::middleware::from_fn(
            crate::api::trace_parent::grpc_request,
        ))
}

/// The RPCs, each a one-line hand-off to its translation (in `sessions`, `batches`, `events`,
/// `providers`, `files`, `images`).
#[tonic::async_trait]
impl proto::tool_service_server::ToolService for GrpcDoor {
    type ExecuteStream = batches::ExecuteResponses;
    type SubscribeStream = events::EventStream;
    type ProvideToolsStream = providers::ProvideToolsResponses;
    type GetFileStream = files::GetFileResponses;

    async fn create_session(
        &self,
        request: Request<proto::CreateSessionRequest>,
    ) -> Result<Response<proto::Session>, Status> {
        GrpcDoor::create_session(self, request).await
    }

    async fn close_session(
        &self,
        request: Request<proto::CloseSessionRequest>,
    ) -> Result<Response<proto::CloseSessionResponse>, Status> {
        GrpcDoor::close_session(self, request).await
    }

    async fn list_tools(
        &self,
        request: Request<proto::ListToolsRequest>,
    ) -> Result<Response<proto::ListToolsResponse>, Status> {
        GrpcDoor::list_tools(self, request).await
    }

    async fn execute_batch(
        &self,
        request: Request<proto::ExecuteBatchRequest>,
    ) -> Result<Response<proto::ExecuteBatchResponse>, Status> {
        GrpcDoor::execute_batch(self, request).await
    }

    async fn execute(
        &self,
        request: Request<Streaming<proto::ExecuteRequest>>,
    ) -> Result<Response<Self::ExecuteStream>, Status> {
        GrpcDoor::execute(self, request).await
    }

    async fn subscribe(
        &self,
        request: Request<proto::SubscribeRequest>,
    ) -> Result<Response<Self::SubscribeStream>, Status> {
        GrpcDoor::subscribe(self, request).await
    }

    async fn get_result(
        &self,
        request: Request<proto::GetResultRequest>,
    ) -> Result<Response<proto::GetResultResponse>, Status> {
        GrpcDoor::get_result(self, request).await
    }

    async fn interrupt(
        &self,
        request: Request<proto::InterruptRequest>,
    ) -> Result<Response<proto::InterruptResponse>, Status> {
        GrpcDoor::interrupt(self, request).await
    }

    async fn resolve_approval(
        &self,
        request: Request<proto::ResolveApprovalRequest>,
    ) -> Result<Response<proto::ResolveApprovalResponse>, Status> {
        GrpcDoor::resolve_approval(self, request).await
    }

    async fn list_mcp_servers(
        &self,
        request: Request<proto::ListMcpServersRequest>,
    ) -> Result<Response<proto::ListMcpServersResponse>, Status> {
        GrpcDoor::list_mcp_servers(self, request).await
    }

    async fn provide_tools(
        &self,
        request: Request<Streaming<proto::ProvideToolsRequest>>,
    ) -> Result<Response<Self::ProvideToolsStream>, Status> {
        GrpcDoor::provide_tools(self, request).await
    }

    async fn list_providers(
        &self,
        request: Request<proto::ListProvidersRequest>,
    ) -> Result<Response<proto::ListProvidersResponse>, Status> {
        GrpcDoor::list_providers(self, request).await
    }

    async fn put_file(
        &self,
        request: Request<Streaming<proto::PutFileRequest>>,
    ) -> Result<Response<proto::PutFileResponse>, Status> {
        GrpcDoor::put_file(self, request).await
    }

    async fn get_file(
        &self,
        request: Request<proto::GetFileRequest>,
    ) -> Result<Response<Self::GetFileStream>, Status> {
        GrpcDoor::get_file(self, request).await
    }

    async fn snapshot(
        &self,
        request: Request<proto::SnapshotRequest>,
    ) -> Result<Response<proto::SnapshotResponse>, Status> {
        GrpcDoor::snapshot(self, request).await
    }

    async fn fork(
        &self,
        request: Request<proto::ForkRequest>,
    ) -> Result<Response<proto::ForkResponse>, Status> {
        GrpcDoor::fork(self, request).await
    }

    async fn pull_image(
        &self,
        request: Request<proto::PullImageRequest>,
    ) -> Result<Response<proto::PullImageResponse>, Status> {
        GrpcDoor::pull_image(self, request).await
    }
}

impl GrpcDoor {
    /// A relay to the daemon that runs what the RPC concerns, if that is not this one.
    async fn relay(
        &self,
        concerns: RpcConcerns<'_>,
        extensions: &tonic::Extensions,
    ) -> Result<Option<Relay>, Status> {
        self.forward
            .relay(
                &self.service,
                concerns,
                extensions.get::<Hop>(),
                extensions.get::<Principal>(),
            )
            .await
    }
}

/// A service error as a gRPC status, through the one table. A caller over one of its
/// `[limits]` is also told when to retry (`retry-after` metadata, seconds, as HTTP's header).
fn status(err: ServiceError) -> tonic::Status {
    let limited = err.code == ErrorCode::LimitExceeded;
    let mut status = tonic::Status::new(grpc_code(err.code), err.message);
    if limited {
        status.metadata_mut().insert(
            "retry-after",
            tonic::metadata::MetadataValue::from_static("1"),
        );
    }
    status
}

/// Who the caller is, as the gate recorded it; a request the gate did not admit (which
/// cannot reach a method) is refused rather than served as anyone.
fn caller<T>(request: &Request<T>) -> Result<Principal, tonic::Status> {
    request
        .extensions()
        .get::<Principal>()
        .cloned()
        .ok_or_else(|| {
            status(ServiceError::new(
                ErrorCode::Unauthenticated,
                "the request has no authenticated caller",
            ))
        })
}

/// A malformed field of a request message.
fn invalid(message: impl Into<String>) -> tonic::Status {
    status(ServiceError::invalid(message))
}
