//! Sessions across several daemons sharing one store: who runs a session, refusing batches
//! for a session another daemon runs, and taking over the sessions of a daemon that stopped.
//!
//! A session belongs to the daemon that created it (`SessionRecord.owner`, a node id). Only
//! the owner holds it live, so a batch sent elsewhere is refused (`conflict`) with a message
//! naming the owner's node id and address; the client sends it there. Reads (a session's
//! description, its audit log, results, events) are answered by any daemon from the store.
//! Forwarding was not chosen: a batch's answer may be a long SSE stream, and a proxy hop
//! would tie two daemons' lifetimes to one request.
//!
//! Deliberately absent: noticing that a daemon stopped (the server's fleet task does, by
//! heartbeats, and calls [`ToolService::take_over`] once it has claimed the silent node).

use std::sync::Arc;

use super::access::Access;
use super::sessions::{CreateSessionRequest, session_info};
use super::{ErrorCode, LiveSession, ServiceError, ToolService};
use crate::permission::Principal;
use crate::session::SessionSnapshot;
use crate::store::SessionRecord;

/// What taking over a stopped daemon's sessions did.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct TakeOver {
    /// Audit rows written for calls the stopped daemon never finished.
    pub interrupted_calls: u64,
    /// Sessions this daemon now runs.
    pub adopted: Vec<String>,
}

impl ToolService {
    /// The live session `id`, to run a batch in. A session another daemon runs is refused
    /// with a `conflict` naming that daemon (see the module header).
    pub(super) async fn owned_session(&self, id: &str) -> Result<Arc<LiveSession>, ServiceError> {
        if let Ok(live) = self.session(id) {
            return Ok(live);
        }
        match self.store.get_session(id).await? {
            Some(record) if record.closed_at.is_none() && record.owner != self.settings.node_id => {
                let address = self
                    .node_address(&record.owner)
                    .await
                    .unwrap_or_else(|| "an unknown address".into());
                Err(ServiceError::new(
                    ErrorCode::Conflict,
                    format!(
                        "session \"{id}\" is run by node \"{}\" at {address}, not by this \
                         daemon (\"{}\"); send its batches there",
                        record.owner, self.settings.node_id
                    ),
                ))
            }
            _ => Err(ServiceError::not_found(format!("unknown session \"{id}\""))),
        }
    }

    /// A session as `GET /v1/sessions/{id}` shows it, with its owner's node id and address:
    /// the live one, else the stored open one another daemon runs (a closed one is unknown,
    /// as on a single daemon).
    pub async fn describe_session(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<super::SessionInfo, ServiceError> {
        self.authorize(caller, id, Access::Read).await?;
        let mut info = match self.session(id) {
            Ok(live) => live.info.clone(),
            Err(not_live) => {
                let Some(record) = self
                    .store
                    .get_session(id)
                    .await?
                    .filter(|record| record.closed_at.is_none())
                else {
                    return Err(not_live);
                };
                let request = stored_request(&record)?;
                session_info(&record, &request)
            }
        };
        info.owner_address = self.node_address(&info.owner).await;
        Ok(info)
    }

    async fn node_address(&self, node_id: &str) -> Option<String> {
        match self.store.get_node(node_id).await {
            Ok(node) => node.map(|node| node.address),
            Err(err) => {
                tracing::warn!(node_id, error = %err, "cannot read a node's address");
                None
            }
        }
    }

    /// Takes over the open sessions of `stopped_node`, which the caller has claimed (so no
    /// other daemon does this at once): every call it left unfinished gets an interrupted
    /// audit row, and the sessions whose working directory this daemon sees are adopted
    /// (this daemon runs them from now on). The others stay with the stopped node, which
    /// takes them back when it restarts.
    pub async fn take_over(&self, stopped_node: &str) -> Result<TakeOver, ServiceError> {
        let mut done = TakeOver::default();
        for record in self.store.list_sessions(false).await? {
            if record.owner != stopped_node {
                continue;
            }
            done.interrupted_calls += self.store.mark_interrupted_calls(&record.id).await?;
            if !record.working_directory.is_dir()
                || !self
                    .store
                    .adopt_session(&record.id, stopped_node, &self.settings.node_id)
                    .await?
            {
                continue;
            }
            let adopted = SessionRecord {
                owner: self.settings.node_id.clone(),
                ..record
            };
            let snapshot: SessionSnapshot =
                serde_json::from_value(adopted.state.clone()).unwrap_or_default();
            self.go_live(&adopted, snapshot)?;
            done.adopted.push(adopted.id);
        }
        Ok(done)
    }

    /// At start, before anything runs: calls of this daemon's own sessions left unfinished by
    /// its previous run (a crash or `kill -9`) get interrupted audit rows. Returns how many.
    pub async fn mark_own_interrupted_calls(&self) -> Result<u64, ServiceError> {
        let mut marked = 0;
        for record in self.store.list_sessions(false).await? {
            if record.owner == self.settings.node_id {
                marked += self.store.mark_interrupted_calls(&record.id).await?;
            }
        }
        Ok(marked)
    }
}

fn stored_request(record: &SessionRecord) -> Result<CreateSessionRequest, ServiceError> {
    serde_json::from_value(record.options.clone())
        .map_err(|err| ServiceError::internal(format!("session \"{}\" options: {err}", record.id)))
}
