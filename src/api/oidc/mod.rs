//! Identity from the platform's provider (DESIGN §13): a JWT access token, checked against the
//! configured issuers, becomes a [`Principal`]. The gate (`api::gate`) calls
//! [`OidcVerifier::verify`] as its one authentication step for a bearer token that is neither
//! a static nor a child session's token, for every door alike.
//!
//! The check, in order (each failure a [`TokenRefusal`], counted by its reason):
//! 1. The token is three base64url parts whose header is JSON (`malformed`); its `alg` is one
//!    of RS256/384/512, PS256/384/512, ES256/384, EdDSA (`unsupported_algorithm`: `none` and
//!    every HMAC algorithm, whatever the key set holds).
//! 2. Its `iss` (read before the signature, only to pick the issuer) equals a configured
//!    `issuer` byte for byte (`wrong_issuer`).
//! 3. Its `kid` names a key of that issuer's set (`jwks`: fetched, cached, fetched again at most
//!    once per 30 s; `unknown_kid`, or `keys_unavailable` when no set was ever fetched) whose
//!    algorithms include the token's (`bad_signature`).
//! 4. `jsonwebtoken` checks the signature (`bad_signature`), `exp` (required; `expired`),
//!    `nbf` (`not_yet_valid`), `iss` again and `aud` against the configured audience
//!    (`wrong_audience`), 60 s leeway on times.
//! 5. The principal claim is present (`missing_claim`); the role comes from the roles claim
//!    through `[auth.oidc.roles]`, else from the scopes (`toold.read` observer, `toold.execute`
//!    agent, `toold.admin` admin). A valid token with neither is [`Verified::NoRole`]: the
//!    gate answers 403 `insufficient_scope`, not 401.
//!
//! Why `jsonwebtoken` (not `josekit`): it is the most used Rust JWT crate, verifies with pure
//! Rust crypto (`rust_crypto`: no OpenSSL to link, as josekit needs), parses JWKs into keys,
//! and refuses a token whose `alg` is not in the validation's list before any key is used
//! (`docs/decisions/auth.md`).
//!
//! A verified token is remembered by its SHA-256 (never the token) until its `exp` (plus the
//! leeway) or until the issuer's key set changes, so a client presenting the same token on
//! every call pays one signature check, not one per call; the cache is bounded and cleared
//! when full. Tokens are never logged: only the principal and the token's `jti` are.
//!
//! Not here: the HTTP answers (`metadata`: the protected-resource document and the
//! `WWW-Authenticate` challenges), and what a principal may do (the service's).

mod claims;
mod jwks;
pub mod metadata;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex};

use jsonwebtoken::errors::ErrorKind;
use jsonwebtoken::{Algorithm, Validation};
use serde_json::Value;
use sha2::{Digest, Sha256};

pub use self::jwks::REFETCH_INTERVAL;
use self::jwks::{KeyMiss, KeySet};
use crate::permission::Principal;

/// One issuer, as the server hands it over from `[auth.oidc]` (`config/oidc.rs` says what
/// each field means): the doors do not read the settings file's types.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuerSettings {
    pub issuer: String,
    pub jwks_uri: Option<String>,
    pub audience: String,
    pub principal_claim: String,
    pub roles_claim: String,
    pub roles: RoleNames,
}

/// `[auth.oidc.roles]`: the roles claim's values naming each role.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RoleNames {
    pub admin: Vec<String>,
    pub agent: Vec<String>,
    pub observer: Vec<String>,
}

/// Seconds of clock skew allowed on `exp` and `nbf`.
pub const LEEWAY_SECONDS: u64 = 60;

/// Verified tokens remembered at most; past it the cache starts again empty.
const VERIFIED_CACHE_ENTRIES: usize = 4096;

/// The algorithms a token may be signed with (DESIGN §13: RSA, ECDSA and EdDSA; no HMAC).
const ACCEPTED_ALGORITHMS: [Algorithm; 9] = [
    Algorithm::RS256,
    Algorithm::RS384,
    Algorithm::RS512,
    Algorithm::PS256,
    Algorithm::PS384,
    Algorithm::PS512,
    Algorithm::ES256,
    Algorithm::ES384,
    Algorithm::EdDSA,
];

/// Why a token was refused: each has its fixed word, the `reason` label of
/// `toold_auth_tokens_refused_total`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum TokenRefusal {
    #[error("the token is not a well-formed JWT")]
    Malformed,
    #[error("the token's signing algorithm is not accepted (RS*, PS*, ES256/384, EdDSA only)")]
    UnsupportedAlgorithm,
    #[error("the token's issuer is not configured")]
    WrongIssuer,
    #[error("the token names a signing key its issuer does not publish")]
    UnknownKid,
    #[error("the issuer's signing keys could not be fetched")]
    KeysUnavailable,
    #[error("the token's signature does not verify")]
    BadSignature,
    #[error("the token has expired")]
    Expired,
    #[error("the token is not valid yet")]
    NotYetValid,
    #[error("the token was not minted for this resource (aud)")]
    WrongAudience,
    #[error("the token lacks a required claim")]
    MissingClaim,
    /// Not a JWT, and no static token either.
    #[error("the token is not one this daemon knows")]
    UnknownToken,
}

impl TokenRefusal {
    pub fn reason(self) -> &'static str {
        match self {
            TokenRefusal::Malformed => "malformed",
            TokenRefusal::UnsupportedAlgorithm => "unsupported_algorithm",
            TokenRefusal::WrongIssuer => "wrong_issuer",
            TokenRefusal::UnknownKid => "unknown_kid",
            TokenRefusal::KeysUnavailable => "keys_unavailable",
            TokenRefusal::BadSignature => "bad_signature",
            TokenRefusal::Expired => "expired",
            TokenRefusal::NotYetValid => "not_yet_valid",
            TokenRefusal::WrongAudience => "wrong_audience",
            TokenRefusal::MissingClaim => "missing_claim",
            TokenRefusal::UnknownToken => "unknown_token",
        }
    }
}

/// A token that verified.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Verified {
    /// It names a principal with a role.
    Principal(Principal),
    /// It is valid but maps to no role and carries no toold scope: `insufficient_scope`.
    NoRole { principal: String },
}

/// One configured issuer, ready to verify its tokens.
struct Issuer {
    settings: IssuerSettings,
    keys: KeySet,
}

/// What a verified token is remembered as.
#[derive(Clone)]
struct Remembered {
    verified: Verified,
    /// The token's `exp`, seconds since the epoch.
    expires_at: u64,
    /// Which issuer's key-set generation verified it.
    issuer: usize,
    generation: usize,
}

/// Every configured issuer; shared by the doors' one gate.
pub struct OidcVerifier {
    issuers: Vec<Issuer>,
    verified: Mutex<HashMap<[u8; 32], Remembered>>,
    metadata: metadata::ResourceMetadata,
}

impl fmt::Debug for OidcVerifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let issuers: Vec<&str> = self
            .issuers
            .iter()
            .map(|i| i.settings.issuer.as_str())
            .collect();
        f.debug_struct("OidcVerifier")
            .field("issuers", &issuers)
            .finish()
    }
}

impl OidcVerifier {
    /// A verifier for `issuers` (checked settings; at least one). Keys are fetched on first
    /// need, with `client`.
    pub fn new(issuers: &[IssuerSettings], client: reqwest::Client) -> OidcVerifier {
        OidcVerifier {
            metadata: metadata::ResourceMetadata::new(issuers),
            issuers: issuers
                .iter()
                .map(|settings| Issuer {
                    keys: KeySet::new(
                        &settings.issuer,
                        settings.jwks_uri.as_deref(),
                        client.clone(),
                    ),
                    settings: settings.clone(),
                })
                .collect(),
            verified: Mutex::new(HashMap::new()),
        }
    }

    /// The verifier of the configured issuers, `None` when there are none; its key fetches go
    /// direct (no proxy from the environment) and follow no redirect.
    pub fn configured(
        issuers: &[IssuerSettings],
    ) -> Result<Option<Arc<OidcVerifier>>, reqwest::Error> {
        if issuers.is_empty() {
            return Ok(None);
        }
        let client = reqwest::Client::builder()
            .no_proxy()
            .redirect(reqwest::redirect::Policy::none())
            .build()?;
        Ok(Some(Arc::new(OidcVerifier::new(issuers, client))))
    }

    /// This verifier with its issuers' keys fetched again at most once per `interval`.
    #[cfg(test)]
    fn paced_by(mut self, interval: std::time::Duration) -> OidcVerifier {
        self.issuers = self
            .issuers
            .into_iter()
            .map(|issuer| Issuer {
                keys: issuer.keys.paced_by(interval),
                settings: issuer.settings,
            })
            .collect();
        self
    }

    /// The protected-resource metadata and challenges (`metadata`).
    pub fn metadata(&self) -> &metadata::ResourceMetadata {
        &self.metadata
    }

    /// Checks `token` (see the module header).
    pub async fn verify(&self, token: &str) -> Result<Verified, TokenRefusal> {
        let digest: [u8; 32] = Sha256::digest(token.as_bytes()).into();
        if let Some(verified) = self.remembered(&digest) {
            return Ok(verified);
        }
        let header = claims::header_of(token)?;
        let unverified = claims::unverified_claims(token)?;
        let issuer_name = unverified.get("iss").and_then(Value::as_str);
        let Some((index, issuer)) = self
            .issuers
            .iter()
            .enumerate()
            .find(|(_, issuer)| Some(issuer.settings.issuer.as_str()) == issuer_name)
        else {
            return Err(TokenRefusal::WrongIssuer);
        };
        let generation = issuer.keys.generation();
        let key = issuer
            .keys
            .key(header.kid.as_deref())
            .await
            .map_err(|miss| match miss {
                KeyMiss::UnknownKid => TokenRefusal::UnknownKid,
                KeyMiss::Unavailable => TokenRefusal::KeysUnavailable,
            })?;
        if !key.algorithms.contains(&header.alg) {
            return Err(TokenRefusal::BadSignature);
        }
        let validation = validation(&issuer.settings, header.alg);
        let data =
            jsonwebtoken::decode::<serde_json::Map<String, Value>>(token, &key.key, &validation)
                .map_err(|err| refusal_of(err.kind()))?;
        let verified = claims::principal_of(&issuer.settings, &data.claims)?;
        let jti = data.claims.get("jti").and_then(Value::as_str).unwrap_or("");
        let name = match &verified {
            Verified::Principal(principal) => principal.name.to_string(),
            Verified::NoRole { principal } => principal.clone(),
        };
        tracing::debug!(principal = %name, jti, "access token verified");
        let expires_at = data.claims.get("exp").and_then(Value::as_u64).unwrap_or(0);
        // A key set fetched during this check makes the generation read before it stale; the
        // next presentation verifies again, which is only slower.
        self.remember(
            digest,
            Remembered {
                verified: verified.clone(),
                expires_at,
                issuer: index,
                generation: generation.max(issuer.keys.generation()),
            },
        );
        Ok(verified)
    }

    fn remembered(&self, digest: &[u8; 32]) -> Option<Verified> {
        let cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        let entry = cache.get(digest)?;
        let now = jsonwebtoken::get_current_timestamp();
        let current = self.issuers[entry.issuer].keys.generation() == entry.generation;
        (current && now <= entry.expires_at.saturating_add(LEEWAY_SECONDS))
            .then(|| entry.verified.clone())
    }

    fn remember(&self, digest: [u8; 32], entry: Remembered) {
        let mut cache = self.verified.lock().unwrap_or_else(|p| p.into_inner());
        if cache.len() >= VERIFIED_CACHE_ENTRIES {
            cache.clear();
        }
        cache.insert(digest, entry);
    }
}

/// What `jsonwebtoken` checks for `issuer`'s tokens signed with `alg`.
fn validation(issuer: &IssuerSettings, alg: Algorithm) -> Validation {
    let mut validation = Validation::new(alg);
    validation.algorithms = vec![alg];
    validation.leeway = LEEWAY_SECONDS;
    validation.validate_exp = true;
    validation.validate_nbf = true;
    validation.set_issuer(&[&issuer.issuer]);
    validation.set_audience(&[&issuer.audience]);
    validation.set_required_spec_claims(&["exp", "iss", "aud"]);
    validation
}

/// The refusal for a `jsonwebtoken` error.
fn refusal_of(kind: &ErrorKind) -> TokenRefusal {
    match kind {
        ErrorKind::ExpiredSignature => TokenRefusal::Expired,
        ErrorKind::ImmatureSignature => TokenRefusal::NotYetValid,
        ErrorKind::InvalidAudience => TokenRefusal::WrongAudience,
        ErrorKind::InvalidIssuer => TokenRefusal::WrongIssuer,
        ErrorKind::MissingRequiredClaim(_) => TokenRefusal::MissingClaim,
        ErrorKind::InvalidAlgorithm
        | ErrorKind::InvalidAlgorithmName
        | ErrorKind::UnsupportedAlgorithm
        | ErrorKind::MissingAlgorithm => TokenRefusal::UnsupportedAlgorithm,
        ErrorKind::InvalidSignature
        | ErrorKind::InvalidEcdsaKey
        | ErrorKind::InvalidEddsaKey
        | ErrorKind::InvalidRsaKey(_)
        | ErrorKind::InvalidKeyFormat => TokenRefusal::BadSignature,
        _ => TokenRefusal::Malformed,
    }
}

#[cfg(test)]
#[path = "tests.rs"]
mod tests;
