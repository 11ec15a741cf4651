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

    /// `Ok` when `caller` may change things at all (create a session): not an observer.
    pub(super) fn authorize_write(&self, caller: &Principal) -> Result<(), ServiceError> {
        match caller.role {
            Role::Observer => Err(forbidden(caller)),
            Role::Admin | Role::Agent => Ok(()),
        }
    }

    /// Whether `caller` sees session `session_id` at all (listings filter with this): its
    /// owner's name as known here, without a store read for admins and observers.
    pub(super) fn sees(caller: &Principal, owner: Option<&str>) -> bool {
        caller.role != Role::Agent || owner == Some(&*caller.name)
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
