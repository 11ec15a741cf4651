//! Who may do what (DESIGN §10), decided here once for every door: each `ToolService`
//! method that touches a session takes the caller's [`Principal`] and asks [`ToolService::authorize`]
//! before anything else.
//!
//! - `admin`: everything.
//! - `agent`: creates sessions (they belong to it: `SessionRecord.principal`) and acts only
//!   on those. Any other session, and its batches, results, audit rows, events and approvals,
//!   is `not_found` with the very message a missing id gets (`unknown session "ID"`), so an
//!   agent cannot tell another's session from none. Listings (sessions, `GET /v1/events`,
//!   pending approvals) show only its own.
//! - `observer`: reads everything an admin reads and changes nothing: every write is
//!   `forbidden` (403), whether or not the session exists (an observer may see them all, so
//!   that tells it nothing new).
//!
//! - a principal *scoped* to a session (`Principal::session_scope`: it holds a child session's
//!   token, see `children`) acts on that session alone, within its role: any other session is
//!   `not_found` as above, creating a session or providing tools is `forbidden`, another's
//!   provider connection unknown, listings show that session only (and no providers).
//!   The check comes first, for every role, so an admin's child token is as narrow as an
//!   agent's.
//!
//! Ownership is read from the stored `principal` when the session is not live here, so a
//! session adopted by another daemon of a fleet keeps its owner. A session stored before
//! principals were recorded (`principal` NULL) belongs to no agent: only admins and observers
//! see it. Admins pay nothing for the check (no lookup).

use super::{ServiceError, ToolService};
use crate::permission::{Principal, Role};

/// What an operation does to a session.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Access {
    /// Reads it (its description, batches, results, audit rows, events, approvals, tools).
    Read,
    /// Changes it (runs a batch, interrupts, resolves an approval, closes) or creates one.
    Write,
}

impl ToolService {
    /// `Ok` when `caller` may `access` session `session_id`; else `forbidden` (an observer's
    /// write) or the `not_found` a missing session gets (an agent's look at another's).
    pub(super) async fn authorize(
        &self,
        caller: &Principal,
        session_id: &str,
        access: Access,
    ) -> Result<(), ServiceError> {
        if !in_scope(caller, session_id) {
            return Err(unknown_session(session_id));
        }
        match caller.role {
            Role::Admin => Ok(()),
            Role::Observer => match access {
                Access::Read => Ok(()),
                Access::Write => Err(forbidden(caller)),
            },
            Role::Agent => {
                if self.session_principal(session_id).await?.as_deref() == Some(&*caller.name) {
                    Ok(())
                } else {
                    Err(unknown_session(session_id))
                }
            }
        }
    }

    /// `Ok` when `caller` may change things at all: not an observer.
    pub(super) fn authorize_write(&self, caller: &Principal) -> Result<(), ServiceError> {
        match caller.role {
            Role::Observer => Err(forbidden(caller)),
            Role::Admin | Role::Agent => Ok(()),
        }
    }

    /// `Ok` when `caller` may create a session: it may write and is scoped to none.
    pub(super) fn authorize_create(&self, caller: &Principal) -> Result<(), ServiceError> {
        self.authorize_write(caller)?;
        unscoped(caller, "create sessions")
    }

    /// Whether `caller` sees session `session_id` at all (listings filter with this): in its
    /// scope, and its owner's name as known here, without a store read for admins and
    /// observers.
    pub(super) fn sees(caller: &Principal, session_id: &str, owner: Option<&str>) -> bool {
        in_scope(caller, session_id) && (caller.role != Role::Agent || owner == Some(&*caller.name))
    }

    /// The principal session `session_id` belongs to: the live one's, else the stored one's
    /// (another daemon's, or closed); `None` for a session stored without one, `not_found`
    /// for an unknown session.
    async fn session_principal(&self, session_id: &str) -> Result<Option<String>, ServiceError> {
        if let Some(live) = self.live().get(session_id) {
            return Ok(live.info.principal.clone());
        }
        match self.store.get_session(session_id).await? {
            Some(record) => Ok(record.principal),
            None => Err(unknown_session(session_id)),
        }
    }
}

/// `Ok` unless `caller` is scoped to a session: then `forbidden` to do `what` (anything that
/// is not an operation on that session: creating a session, providing tools).
pub(super) fn unscoped(caller: &Principal, what: &str) -> Result<(), ServiceError> {
    match &caller.session_scope {
        Some(scope) => Err(ServiceError::forbidden(format!(
            "this token is scoped to session \"{scope}\": it may not {what}"
        ))),
        None => Ok(()),
    }
}

/// Whether session `session_id` is within `caller`'s scope (every session when it has none).
pub(super) fn in_scope(caller: &Principal, session_id: &str) -> bool {
    caller
        .session_scope
        .as_deref()
        .is_none_or(|scope| scope == session_id)
}

/// The message every unknown (or hidden) session gets.
pub(super) fn unknown_session(session_id: &str) -> ServiceError {
    ServiceError::not_found(format!("unknown session \"{session_id}\""))
}

fn forbidden(caller: &Principal) -> ServiceError {
    ServiceError::forbidden(format!(
        "principal \"{}\" is an observer: it may read, not change anything",
        caller.name
    ))
}
