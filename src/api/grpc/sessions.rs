//! Session RPCs: `CreateSession`, `CloseSession`, `ListTools`, `Interrupt`,
//! `ResolveApproval`. Each unwraps the message, calls the service and shapes the answer.

use serde_json::{Map, Value};
use tonic::{Request, Response, Status};

use super::proto::{self, CloseSessionResponse, InterruptResponse, ResolveApprovalResponse};
use super::{GrpcDoor, caller, invalid, status};
use crate::api::forward::grpc::RpcConcerns;
use crate::api::gate::CallerToken;
use crate::permission::Approver;
use crate::service::{CreateSessionRequest, ResolveApprovalRequest, SessionInfo};

impl GrpcDoor {
    pub(super) async fn create_session(
        &self,
        request: Request<proto::CreateSessionRequest>,
    ) -> Result<Response<proto::Session>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        forward_rpc!(
            self,
            RpcConcerns::NewSession,
            extensions,
            metadata,
            message,
            create_session
        );
        let request = create_request(message)?;
        let info = self
            .service
            .create_session(&caller, request)
            .await
            .map_err(status)?;
        Ok(Response::new(session(info)))
    }

    pub(super) async fn close_session(
        &self,
        request: Request<proto::CloseSessionRequest>,
    ) -> Result<Response<CloseSessionResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        let concerns = RpcConcerns::Session(&message.session_id);
        forward_rpc!(self, concerns, extensions, metadata, message, close_session);
        let session_id = message.session_id;
        self.service
            .close_session(&caller, &session_id)
            .await
            .map_err(status)?;
        Ok(Response::new(CloseSessionResponse {}))
    }

    pub(super) async fn list_tools(
        &self,
        request: Request<proto::ListToolsRequest>,
    ) -> Result<Response<proto::ListToolsResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, request) = request.into_parts();
        let concerns = RpcConcerns::Session(&request.session_id);
        forward_rpc!(self, concerns, extensions, metadata, request, list_tools);
        let format = if request.format.is_empty() {
            "toold"
        } else {
            &request.format
        };
        let tools = self
            .service
            .list_tools(&caller, &request.session_id, format)
            .map_err(status)?;
        Ok(Response::new(proto::ListToolsResponse {
            tools_json: Value::Array(tools).to_string(),
        }))
    }

    pub(super) async fn list_mcp_servers(
        &self,
        request: Request<proto::ListMcpServersRequest>,
    ) -> Result<Response<proto::ListMcpServersResponse>, Status> {
        let caller = caller(&request)?;
        let servers = self
            .service
            .mcp_servers(&caller)
            .into_iter()
            .map(|server| proto::McpServer {
                name: server.name,
                scope: server.scope.to_owned(),
                session_id: server.session_id.unwrap_or_default(),
                transport: server.transport.to_owned(),
                state: server.state.to_owned(),
                pid: server.pid.unwrap_or_default(),
                tools: server.tools,
                last_error: server.last_error.unwrap_or_default(),
                restarts: server.restarts,
            })
            .collect();
        Ok(Response::new(proto::ListMcpServersResponse { servers }))
    }

    pub(super) async fn interrupt(
        &self,
        request: Request<proto::InterruptRequest>,
    ) -> Result<Response<InterruptResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        let concerns = RpcConcerns::Session(&message.session_id);
        forward_rpc!(self, concerns, extensions, metadata, message, interrupt);
        self.service
            .interrupt(&caller, &message.session_id)
            .map_err(status)?;
        Ok(Response::new(InterruptResponse {}))
    }

    pub(super) async fn resolve_approval(
        &self,
        request: Request<proto::ResolveApprovalRequest>,
    ) -> Result<Response<ResolveApprovalResponse>, Status> {
        let token = request
            .extensions()
            .get::<CallerToken>()
            .and_then(|CallerToken(token)| token.clone());
        let approver = Approver::new("grpc", token.as_deref());
        let caller = caller(&request)?;
        let (metadata, extensions, request) = request.into_parts();
        let concerns = RpcConcerns::Session(&request.session_id);
        forward_rpc!(
            self,
            concerns,
            extensions,
            metadata,
            request,
            resolve_approval
        );
        let resolution = ResolveApprovalRequest {
            decision: request.decision,
            reason: Some(request.reason).filter(|reason| !reason.is_empty()),
            remember: request.remember,
        };
        self.service
            .resolve_approval(
                &caller,
                &request.session_id,
                &request.approval_id,
                resolution,
                approver,
            )
            .await
            .map_err(status)?;
        Ok(Response::new(ResolveApprovalResponse {}))
    }
}

/// The HTTP body the message stands for: `options_json` with the typed fields set over it
/// (an empty string or `false` leaves a field to the options or its default).
fn create_request(request: proto::CreateSessionRequest) -> Result<CreateSessionRequest, Status> {
    let mut body = if request.options_json.trim().is_empty() {
        Map::new()
    } else {
        match serde_json::from_str(&request.options_json) {
            Ok(Value::Object(options)) => options,
            Ok(_) => return Err(invalid("options_json must be a JSON object")),
            Err(err) => return Err(invalid(format!("options_json is not JSON: {err}"))),
        }
    };
    if !request.working_directory.is_empty() {
        body.insert("working_directory".into(), request.working_directory.into());
    }
    if !request.permission_mode.is_empty() {
        body.insert("permission_mode".into(), request.permission_mode.into());
    }
    if request.interactive {
        body.insert("interactive".into(), true.into());
    }
    serde_json::from_value(Value::Object(body))
        .map_err(|err| invalid(format!("invalid session request: {err}")))
}

pub(super) fn session(info: SessionInfo) -> proto::Session {
    proto::Session {
        id: info.id,
        working_directory: info.working_directory.display().to_string(),
        permission_mode: info.permission_mode.as_str().to_owned(),
        interactive: info.interactive,
        owner: info.owner,
        principal: info.principal.unwrap_or_default(),
    }
}
