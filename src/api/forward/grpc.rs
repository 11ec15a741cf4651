//! The gRPC side of forwarding: [`check_hop`], a middleware inside the gRPC door's gates,
//! refuses a hop without the right secret (UNAUTHENTICATED) and marks the request with its
//! [`Hop`]; an RPC that needs a live session asks [`Forwarder::relay`] whether another daemon
//! runs it and, if so, sends the same message there with a tonic client (one HTTP/2 channel
//! per daemon) and returns the owner's answer as its own: messages, then the status. What is
//! forwarded and why, timeouts and back-pressure: the module header of `forward`.

use std::sync::Arc;

use axum::extract::{Request, State};
use axum::middleware::Next;
use axum::response::Response;
use tonic::Status;
use tonic::metadata::{MetadataMap, MetadataValue};
use tonic::transport::{Channel, Endpoint};

use super::{FLEET_SECRET_NAME, FORWARDED_BY_NAME, Forwarder, Hop, not_here, unreachable};
use crate::api::grpc::proto::tool_service_client::ToolServiceClient;
use crate::api::grpc_code;
use crate::permission::Principal;
use crate::service::{ServiceError, SessionPlace, ToolService};

/// Checks the hop headers of every gRPC request (health checks too: a hop has no business
/// there either) and puts its [`Hop`] in the request's extensions.
pub async fn check_hop(
    State(forwarder): State<Arc<Forwarder>>,
    mut request: Request,
    next: Next,
) -> Response {
    match forwarder.check(request.headers()) {
        Ok(hop) => {
            request.extensions_mut().insert(hop);
            next.run(request).await
        }
        Err(refusal) => as_status(refusal).into_http(),
    }
}

/// An RPC on its way to the daemon that runs its session.
pub struct Relay {
    pub client: ToolServiceClient<Channel>,
    session_id: String,
    address: String,
    forwarder: Arc<Forwarder>,
}

/// Which session an RPC concerns, for [`Forwarder::relay`].
pub enum RpcConcerns<'a> {
    Session(&'a str),
    NewSession,
}

impl Forwarder {
    /// `None`: the RPC is answered here; `Some`: a relay to the daemon that runs `concerns`.
    pub async fn relay(
        self: &Arc<Self>,
        service: &ToolService,
        concerns: RpcConcerns<'_>,
        hop: Option<&Hop>,
        caller: Option<&Principal>,
    ) -> Result<Option<Relay>, Status> {
        let hop = hop.copied().unwrap_or(Hop::Direct);
        if hop == Hop::Direct && !self.enabled() {
            return Ok(None);
        }
        let (session_id, place) = match concerns {
            RpcConcerns::NewSession if hop == Hop::Forwarded => return Ok(None),
            RpcConcerns::NewSession => ("a new session", service.place_new_session().await),
            // Without a caller the RPC answers here (and refuses it).
            RpcConcerns::Session(id) => match caller {
                Some(caller) => (id, service.locate_session(caller, id).await),
                None => return Ok(None),
            },
        };
        let place = place.map_err(as_status)?;
        let address = match (place, hop) {
            (SessionPlace::Here, _) => return Ok(None),
            (_, Hop::Forwarded) => {
                return Err(as_status(not_here(session_id, &self.hop.node_id)));
            }
            (SessionPlace::Nobody { owner }, Hop::Direct) => {
                return Err(as_status(crate::service::nobody_runs(session_id, &owner)));
            }
            (SessionPlace::Node { address, .. }, Hop::Direct) => address,
        };
        let channel = self
            .channel(&address)
            .map_err(|err| as_status(unreachable(session_id, &address, err)))?;
        Ok(Some(Relay {
            client: ToolServiceClient::new(channel)
                .max_decoding_message_size(usize::MAX)
                .max_encoding_message_size(usize::MAX),
            session_id: session_id.to_owned(),
            address,
            forwarder: self.clone(),
        }))
    }

    /// The channel to `address`, made on first use (it connects lazily, and reconnects).
    fn channel(&self, address: &str) -> Result<Channel, tonic::transport::Error> {
        let mut channels = self.channels.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(channel) = channels.get(address) {
            return Ok(channel.clone());
        }
        let channel = Endpoint::from_shared(address.to_owned())?
            .connect_timeout(super::CONNECT_TIMEOUT)
            .tcp_nodelay(true)
            .connect_lazy();
        channels.insert(address.to_owned(), channel.clone());
        Ok(channel)
    }
}

impl Relay {
    /// `message` with the client's metadata (its `authorization`, its deadline) and the hop's.
    pub fn request<T>(&self, metadata: MetadataMap, message: T) -> tonic::Request<T> {
        let mut request = tonic::Request::new(message);
        *request.metadata_mut() = metadata;
        let forwarder = &self.forwarder;
        if let Some(secret) = &forwarder.secret_header
            && let Ok(value) = MetadataValue::try_from(secret.as_bytes())
        {
            request.metadata_mut().insert(FLEET_SECRET_NAME, value);
        }
        if let Ok(value) = MetadataValue::try_from(forwarder.node_header.as_bytes()) {
            request.metadata_mut().insert(FORWARDED_BY_NAME, value);
        }
        request
    }

    /// The owner's answer, as this daemon's; when the owner did not answer (UNAVAILABLE), the
    /// session's place is read from the store again next time.
    pub fn answer<T>(
        &self,
        service: &ToolService,
        answer: Result<tonic::Response<T>, Status>,
    ) -> Result<tonic::Response<T>, Status> {
        if let Err(status) = &answer
            && status.code() == tonic::Code::Unavailable
        {
            service.forget_place(&self.session_id);
            tracing::warn!(
                session_id = %self.session_id,
                address = %self.address,
                %status,
                "forwarding failed"
            );
        }
        answer
    }
}

fn as_status(err: ServiceError) -> Status {
    Status::new(grpc_code(err.code), err.message)
}
