//! Reading a JWT's parts for the verifier: its header (`alg`, `kid`) and, before the signature
//! is checked, its claims only to pick the issuer; after the check, the principal and role a
//! verified token's claims name (DESIGN §13). Not here: the signature and time checks
//! (`jsonwebtoken`, called by the verifier).

use base64::Engine;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use jsonwebtoken::Algorithm;
use serde_json::{Map, Value};

use super::IssuerSettings;
use super::{ACCEPTED_ALGORITHMS, TokenRefusal, Verified};
use crate::permission::{Principal, Role};

/// The scopes that name roles when the roles claim maps to none, strongest first.
pub const ROLE_SCOPES: [(&str, Role); 3] = [
    ("toold.admin", Role::Admin),
    ("toold.execute", Role::Agent),
    ("toold.read", Role::Observer),
];

/// What the verifier needs of a token's header.
pub struct TokenHeader {
    pub alg: Algorithm,
    pub kid: Option<String>,
}

/// The header, its `alg` one of the accepted ones: `alg: none`, HMAC and anything unknown
/// are `unsupported_algorithm` here, before any key is looked at.
pub fn header_of(token: &str) -> Result<TokenHeader, TokenRefusal> {
    let mut parts = token.split('.');
    let (Some(header), Some(_), Some(_), None) =
        (parts.next(), parts.next(), parts.next(), parts.next())
    else {
        return Err(TokenRefusal::Malformed);
    };
    let header = json_object(header)?;
    let alg = header
        .get("alg")
        .and_then(Value::as_str)
        .ok_or(TokenRefusal::Malformed)?;
    let alg = ACCEPTED_ALGORITHMS
        .into_iter()
        .find(|accepted| format!("{accepted:?}") == alg)
        .ok_or(TokenRefusal::UnsupportedAlgorithm)?;
    let kid = match header.get("kid") {
        None => None,
        Some(Value::String(kid)) => Some(kid.clone()),
        Some(_) => return Err(TokenRefusal::Malformed),
    };
    Ok(TokenHeader { alg, kid })
}

/// The claims, unverified: read only to find which issuer's keys to verify with.
pub fn unverified_claims(token: &str) -> Result<Map<String, Value>, TokenRefusal> {
    let payload = token.split('.').nth(1).ok_or(TokenRefusal::Malformed)?;
    json_object(payload)
}

fn json_object(part: &str) -> Result<Map<String, Value>, TokenRefusal> {
    let bytes = URL_SAFE_NO_PAD
        .decode(part)
        .map_err(|_| TokenRefusal::Malformed)?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(object)) => Ok(object),
        _ => Err(TokenRefusal::Malformed),
    }
}

/// The principal a verified token names, and its role: the roles claim through the mapping,
/// else the scopes; neither is [`Verified::NoRole`].
pub fn principal_of(
    issuer: &IssuerSettings,
    claims: &Map<String, Value>,
) -> Result<Verified, TokenRefusal> {
    let name = principal_name(issuer, claims)?;
    let role = mapped_role(issuer, claims).or_else(|| scope_role(claims));
    Ok(match role {
        Some(role) => Verified::Principal(Principal::new(name, role)),
        None => Verified::NoRole { principal: name },
    })
}

/// `sub` qualified by its issuer (`{issuer}#{sub}`: two issuers' `sub`s never meet), or the
/// configured claim's value as is.
fn principal_name(
    issuer: &IssuerSettings,
    claims: &Map<String, Value>,
) -> Result<String, TokenRefusal> {
    let value = claims
        .get(&issuer.principal_claim)
        .and_then(Value::as_str)
        .filter(|value| !value.trim().is_empty())
        .ok_or(TokenRefusal::MissingClaim)?;
    Ok(if issuer.principal_claim == "sub" {
        format!("{}#{value}", issuer.issuer)
    } else {
        value.to_owned()
    })
}

/// The strongest role whose mapped values the roles claim holds.
fn mapped_role(issuer: &IssuerSettings, claims: &Map<String, Value>) -> Option<Role> {
    let values = strings_of(claims.get(&issuer.roles_claim)?);
    let mapping = &issuer.roles;
    [
        (&mapping.admin, Role::Admin),
        (&mapping.agent, Role::Agent),
        (&mapping.observer, Role::Observer),
    ]
    .into_iter()
    .find(|(names, _)| names.iter().any(|name| values.contains(&name.as_str())))
    .map(|(_, role)| role)
}

/// The strongest role the token's scopes (`scope`, space-separated, or `scp`, a list) name.
fn scope_role(claims: &Map<String, Value>) -> Option<Role> {
    let mut scopes = Vec::new();
    for claim in ["scope", "scp"] {
        if let Some(value) = claims.get(claim) {
            scopes.extend(strings_of(value));
        }
    }
    ROLE_SCOPES
        .into_iter()
        .find(|(scope, _)| scopes.contains(scope))
        .map(|(_, role)| role)
}

/// A claim's values: a list of strings, or one space-separated string.
fn strings_of(value: &Value) -> Vec<&str> {
    match value {
        Value::String(text) => text.split_whitespace().collect(),
        Value::Array(items) => items.iter().filter_map(Value::as_str).collect(),
        _ => Vec::new(),
    }
}
