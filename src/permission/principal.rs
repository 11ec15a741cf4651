//! Who is calling: a [`Principal`] (the name a bearer token was configured with) and its
//! [`Role`] (DESIGN §10). Plain data, known to the whole daemon: the settings name roles, the
//! doors' gate turns a token into a principal, the service decides with it what the caller may
//! do (`service::access`) and records its name on sessions, audit rows and events.
//!
//! Deliberately absent: tokens (they stay in the gate, as SHA-256 digests) and the rules of
//! who may do what (the service's).

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
}

impl Principal {
    /// The name of whoever calls a daemon that checks no tokens, or `toold mcp` over stdio:
    /// the local user, an admin.
    pub const LOCAL: &'static str = "local";

    pub fn new(name: impl Into<Arc<str>>, role: Role) -> Principal {
        Principal {
            name: name.into(),
            role,
        }
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
        write!(f, "{} ({})", self.name, self.role)
    }
}
