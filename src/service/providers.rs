//! Tools provided from outside, as the doors reach them: registering a connection, answering
//! its invocations, listing and ending connections. The rules live in `crate::provider`'s hub;
//! here only the caller's right to touch a connection and the refusals' error codes.
//!
//! A connection belongs to the principal that registered it: only it (or an admin) may answer
//! its invocations or end it; to anyone else it is an unknown connection.

use std::sync::Arc;

use serde_json::Value;

use super::{ErrorCode, ServiceError, ToolService};
use crate::permission::Principal;
use crate::provider::{
    ProviderConnection, ProviderHub, ProviderStatus, Refusal, RefusalKind, Registration, Transport,
};

impl ToolService {
    /// Mounts `hub`'s providers: their tools join the pools of the sessions that see them.
    pub fn with_providers(mut self, hub: Arc<ProviderHub>) -> ToolService {
        self.providers = hub;
        self
    }

    /// The hub (the server wiring hands it the child-sessions port).
    pub fn provider_hub(&self) -> &Arc<ProviderHub> {
        &self.providers
    }

    /// Registers a connection of `registration` for `caller`: `invalid` for a bad name, schema
    /// or flag, `conflict` for a name another principal holds (or connected with other tools),
    /// `forbidden` for `global` by a non-admin or any observer.
    pub fn provide_tools(
        &self,
        caller: &Principal,
        registration: Registration,
        transport: Transport,
    ) -> Result<ProviderConnection, ServiceError> {
        super::access::unscoped(caller, "provide tools")?;
        self.providers
            .connect(caller, registration, transport)
            .map_err(refusal)
    }

    /// The connected providers `caller` sees (all for an admin or observer, its own for an
    /// agent).
    pub fn providers(&self, caller: &Principal) -> Vec<ProviderStatus> {
        // A token scoped to a (child) session sees no provider, its principal's neither.
        if caller.session_scope.is_some() {
            return Vec::new();
        }
        self.providers.status(caller)
    }

    /// Progress of `invocation_id` from `caller`'s connection `connection_id`.
    pub fn provider_progress(
        &self,
        caller: &Principal,
        connection_id: &str,
        invocation_id: &str,
        data: Value,
    ) -> Result<(), ServiceError> {
        self.own_connection(caller, connection_id)?;
        self.providers.progress(connection_id, invocation_id, data);
        Ok(())
    }

    /// The result of `invocation_id` from `caller`'s connection `connection_id`; whether a call
    /// in flight took it (an unknown or answered invocation is ignored).
    pub fn provider_result(
        &self,
        caller: &Principal,
        connection_id: &str,
        invocation_id: &str,
        output: String,
        is_error: bool,
    ) -> Result<bool, ServiceError> {
        self.own_connection(caller, connection_id)?;
        Ok(self
            .providers
            .result(connection_id, invocation_id, output, is_error))
    }

    /// Ends `caller`'s connection `connection_id` (its calls in flight fail naming the
    /// provider).
    pub fn disconnect_provider(
        &self,
        caller: &Principal,
        connection_id: &str,
    ) -> Result<(), ServiceError> {
        self.own_connection(caller, connection_id)?;
        self.providers.disconnect(connection_id);
        Ok(())
    }

    /// `not_found` unless `connection_id` is connected and `caller` registered it (or is an
    /// admin).
    pub fn own_connection(
        &self,
        caller: &Principal,
        connection_id: &str,
    ) -> Result<(), ServiceError> {
        match self.providers.connection_owner(connection_id) {
            Some(owner)
                if caller.session_scope.is_none()
                    && (caller.is_admin() || owner.name == caller.name) =>
            {
                Ok(())
            }
            _ => Err(ServiceError::not_found(format!(
                "unknown provider connection \"{connection_id}\""
            ))),
        }
    }
}

fn refusal(refusal: Refusal) -> ServiceError {
    let code = match refusal.kind {
        RefusalKind::Invalid => ErrorCode::InvalidRequest,
        RefusalKind::Held => ErrorCode::Conflict,
        RefusalKind::Forbidden => ErrorCode::Forbidden,
    };
    ServiceError::new(code, refusal.message)
}
