//! Each caller's default session: the session a door runs a request in when the request names
//! none (on the MCP door's `/mcp`: its stateless 2026-07-28 requests, DESIGN §8, and its
//! legacy 2025-era MCP sessions, docs/decisions/mcp.md). One per principal (one
//! bearer token names one principal; every caller is `local` when the daemon checks no
//! tokens), created on first use from the door's template and created again once the previous
//! one was closed. It belongs to that principal like any session it creates.
//!
//! A caller scoped to one session (a child session's token) has that session as its default:
//! it may create none.
//!
//! Not here: persistence. The map lives in memory, so after a restart a caller's first
//! request gets a fresh default session (the old one stays open and listed, like any other).

use super::{CreateSessionRequest, ServiceError, ToolService};
use crate::permission::Principal;

impl ToolService {
    /// The id of `caller`'s default session, created from `template` if it has none open.
    pub async fn default_session(
        &self,
        caller: &Principal,
        template: &CreateSessionRequest,
    ) -> Result<String, ServiceError> {
        if let Some(scope) = &caller.session_scope {
            return Ok(self
                .session_for(caller, scope, super::access::Access::Read)?
                .info
                .id
                .clone());
        }
        // Held across the creation, so two first requests of one caller make one session.
        let mut defaults = self.default_sessions.lock().await;
        let key = caller.name.clone();
        if let Some(id) = defaults.get(&key)
            && self.session(id).is_ok()
        {
            return Ok(id.clone());
        }
        let info = self.create_session(caller, template.clone()).await?;
        defaults.insert(key, info.id.clone());
        Ok(info.id)
    }
}
