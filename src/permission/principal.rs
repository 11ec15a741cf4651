//! Who is calling: a [`Principal`] (the name a bearer token was configured with) and its
//! [`Role`] (DESIGN §10). Plain data, known to the whole daemon: the settings name roles, the
//! doors' gate turns a token into a principal, the service decides with it what the caller may
//! do (`service::access`) and records its name on sessions, audit rows and events.
//!
//! A principal may be *scoped* to one session (`session_scope`): the caller holds a child
//! session's token (the `agent` tool's sub-agent, `service::children`) and may act on that
//! session alone; the service enforces it (`service::access`).
//!
//! Deliberately absent: tokens (they stay in the gate and the service's child-token table, as
//! SHA-256 digests, compared with [`digests_equal`]) and the rules of who may do what (the
//! service's).

use std::fmt;
use std::sync::Arc;

use serde::{Deserialize, Serialize};

/// What a principal may do (DESIGN §10).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Role {
    /// Everything.
    Admin,
    /// Creates sessions and acts only on the sessions it created.
    Agent,
    /// Reads everything, changes nothing.
    Observer,
}

impl Role {
    pub fn as_str(self) -> &'static str {
        match self {
            Role::Admin => "admin",
            Role::Agent => "agent",
            Role::Observer => "observer",
        }
    }
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An authenticated caller. Cheap to clone: the name is shared.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub struct Principal {
    pub name: Arc<str>,
    pub role: Role,
    /// `Some(id)`: the caller may act on session `id` only (a child session's token).
    pub session_scope: Option<Arc<str>>,
}

impl Principal {
    /// The name of whoever calls a daemon that checks no tokens, or `toold mcp` over stdio:
    /// the local user, an admin.
    pub const LOCAL: &'static str = "local";

    pub fn new(name: impl Into<Arc<str>>, role: Role) -> Principal {
        Principal {
            name: name.into(),
            role,
            session_scope: None,
        }
    }

    /// This principal restricted to session `session_id`.
    pub fn scoped_to(mut self, session_id: impl Into<Arc<str>>) -> Principal {
        self.session_scope = Some(session_id.into());
        self
    }

    /// See [`Principal::LOCAL`].
    pub fn local() -> Principal {
        Principal::new(Principal::LOCAL, Role::Admin)
    }

    pub fn is_admin(&self) -> bool {
        self.role == Role::Admin
    }
}

impl fmt::Display for Principal {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{} ({})", self.name, self.role)?;
        match &self.session_scope {
            Some(session) => write!(f, " scoped to session \"{session}\""),
            None => Ok(()),
        }
    }
}

/// Whether two SHA-256 digests are equal, in time independent of where they differ: token
/// checks compare every known digest with this, so timing tells nothing of a secret.
pub fn digests_equal(a: &[u8; 32], b: &[u8; 32]) -> bool {
    a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}
