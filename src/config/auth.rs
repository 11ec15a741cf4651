//! `[[auth.tokens]]`: the bearer tokens the daemon accepts, each with the principal it names
//! and that principal's role (DESIGN §10), checked when the settings load.
//!
//! A token is given as `sha256` (the hex digest of the token, what a deployment writes) or
//! `token` (the plain text, for tests and local use); exactly one of the two. Decisions where
//! DESIGN is silent:
//! - The `--auth-token`/`TOOLD_AUTH_TOKENS` tokens (`[server] auth_tokens`) are admins named
//!   `token-1`, `token-2`, … by their position in that list; a configured name may not take
//!   one of those names.
//! - Two entries with the same name, or with the same token, are refused: an audit row must
//!   name one principal, and a token must mean one.
//! - The daemon keeps only digests ([`AuthSettings::principals`]); a plain token is never shown
//!   by `Debug` (which logs would use).

use std::collections::HashSet;
use std::fmt;

use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};

use super::oidc::OidcIssuers;
use crate::permission::{Principal, Role};

/// `[auth]` in the settings file.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct AuthSettings {
    pub tokens: Vec<AuthToken>,
    /// `[auth.oidc]`: the issuers whose JWT access tokens are accepted too (`config/oidc.rs`).
    pub oidc: OidcIssuers,
}

/// One `[[auth.tokens]]` entry.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct AuthToken {
    /// The principal: recorded on its sessions, audit rows and events.
    pub name: String,
    /// The hex SHA-256 digest of the token.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// The token itself (tests, local use).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub token: Option<String>,
    pub role: Role,
}

impl fmt::Debug for AuthToken {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AuthToken")
            .field("name", &self.name)
            .field("sha256", &self.sha256)
            .field("token", &self.token.as_ref().map(|_| "<redacted>"))
            .field("role", &self.role)
            .finish()
    }
}

/// A `[[auth.tokens]]` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum AuthSettingsError {
    #[error("auth.tokens[{index}]: name must not be empty")]
    EmptyName { index: usize },
    #[error("auth.tokens[{index}] (\"{name}\"): give exactly one of sha256 and token, not {got}")]
    TokenSource {
        index: usize,
        name: String,
        got: &'static str,
    },
    #[error("auth.tokens[{index}] (\"{name}\"): sha256 must be 64 hex digits, got {value:?}")]
    BadDigest {
        index: usize,
        name: String,
        value: String,
    },
    #[error("auth.tokens[{index}]: the name \"{name}\" is taken by another token")]
    DuplicateName { index: usize, name: String },
    #[error("auth.tokens[{index}] (\"{name}\"): the same token as \"{other}\"")]
    DuplicateToken {
        index: usize,
        name: String,
        other: String,
    },
}

/// A token's digest and the principal it names.
pub type TokenPrincipal = ([u8; 32], Principal);

impl AuthSettings {
    /// Every accepted token as a digest with its principal: `admin_tokens` (`[server]
    /// auth_tokens`) first, as admins `token-<n>`, then `[[auth.tokens]]`; an error names the
    /// first entry that cannot be used.
    pub fn principals(
        &self,
        admin_tokens: &[String],
    ) -> Result<Vec<TokenPrincipal>, AuthSettingsError> {
        let mut all: Vec<TokenPrincipal> = admin_tokens
            .iter()
            .enumerate()
            .map(|(at, token)| {
                let name = format!("token-{}", at + 1);
                (digest(token), Principal::new(name, Role::Admin))
            })
            .collect();
        let mut names: HashSet<String> = all.iter().map(|(_, p)| p.name.to_string()).collect();
        for (index, entry) in self.tokens.iter().enumerate() {
            let name = entry.name.trim();
            if name.is_empty() {
                return Err(AuthSettingsError::EmptyName { index });
            }
            let sha256 = entry.digest(index)?;
            if !names.insert(name.to_owned()) {
                return Err(AuthSettingsError::DuplicateName {
                    index,
                    name: name.to_owned(),
                });
            }
            if let Some((_, other)) = all.iter().find(|(known, _)| *known == sha256) {
                return Err(AuthSettingsError::DuplicateToken {
                    index,
                    name: name.to_owned(),
                    other: other.name.to_string(),
                });
            }
            all.push((sha256, Principal::new(name, entry.role)));
        }
        Ok(all)
    }
}

impl AuthToken {
    fn digest(&self, index: usize) -> Result<[u8; 32], AuthSettingsError> {
        let source = |got| AuthSettingsError::TokenSource {
            index,
            name: self.name.clone(),
            got,
        };
        match (&self.sha256, &self.token) {
            (Some(_), Some(_)) => Err(source("both")),
            (None, None) => Err(source("neither")),
            (None, Some(token)) => Ok(digest(token)),
            (Some(hex), None) => {
                parse_hex_digest(hex).ok_or_else(|| AuthSettingsError::BadDigest {
                    index,
                    name: self.name.clone(),
                    value: hex.clone(),
                })
            }
        }
    }
}

/// The SHA-256 digest of a token as presented (surrounding blanks are not part of it).
pub fn digest(token: &str) -> [u8; 32] {
    Sha256::digest(token.trim().as_bytes()).into()
}

fn parse_hex_digest(hex: &str) -> Option<[u8; 32]> {
    let hex = hex.trim();
    if hex.len() != 64 || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return None;
    }
    let mut out = [0u8; 32];
    for (at, byte) in out.iter_mut().enumerate() {
        *byte = u8::from_str_radix(&hex[2 * at..2 * at + 2], 16).ok()?;
    }
    Some(out)
}

#[cfg(test)]
#[path = "auth_tests.rs"]
mod tests;
