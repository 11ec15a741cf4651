//! What toold tells OAuth clients about itself as a protected resource (MCP authorization,
//! the 2025-11-25 and 2026-07-28 revisions; RFC 9728, RFC 6750): the document served at
//! `/.well-known/oauth-protected-resource` (and its `/mcp`-suffixed form), and the
//! `WWW-Authenticate` challenges of 401 and 403 answers.
//!
//! - `resource` is the first issuer's `audience` (the resource tokens are minted for);
//!   `authorization_servers` names every configured issuer exactly as configured (clients
//!   compare the strings: no slash is added or removed); `scopes_supported` the three role
//!   scopes; `bearer_methods_supported` `header` only (RFC 6750 §2.1: no query or body tokens).
//! - `resource_metadata` in a challenge is the document's URL built from `resource` as RFC 9728
//!   §3.1 says: `/.well-known/oauth-protected-resource` inserted between the origin and the
//!   path (`https://toold.example/mcp` → `https://toold.example/.well-known/
//!   oauth-protected-resource/mcp`). An audience that is no URL gives no `resource_metadata`.
//! - A 401 for a missing token carries no `error` (RFC 6750 §3.1: "SHOULD NOT include an error
//!   code" then); one for a token that was refused carries `error="invalid_token"`.
//!
//! Not here: serving the route (`api::http::oauth`).

use axum::http::HeaderValue;
use serde_json::{Value, json};

use super::IssuerSettings;
use super::claims::ROLE_SCOPES;

/// The well-known path of the document (RFC 9728 §3).
pub const WELL_KNOWN: &str = "/.well-known/oauth-protected-resource";

/// The document and the challenges, rendered once.
#[derive(Debug)]
pub struct ResourceMetadata {
    document: Value,
    metadata_url: Option<String>,
}

impl ResourceMetadata {
    pub fn new(issuers: &[IssuerSettings]) -> ResourceMetadata {
        let resource = issuers
            .first()
            .map(|issuer| issuer.audience.clone())
            .unwrap_or_default();
        let scopes: Vec<&str> = ROLE_SCOPES.iter().rev().map(|(scope, _)| *scope).collect();
        let document = json!({
            "resource": resource,
            "authorization_servers": issuers.iter().map(|i| i.issuer.as_str()).collect::<Vec<_>>(),
            "scopes_supported": scopes,
            "bearer_methods_supported": ["header"],
            "resource_name": "toold",
        });
        ResourceMetadata {
            metadata_url: metadata_url(&resource),
            document,
        }
    }

    /// The protected-resource metadata document (RFC 9728 §2).
    pub fn document(&self) -> &Value {
        &self.document
    }

    /// The challenge of a 401: `refused` when a token was presented and refused.
    pub fn unauthenticated(&self, refused: bool) -> HeaderValue {
        let mut parts = vec!["Bearer realm=\"toold\"".to_owned()];
        if let Some(url) = &self.metadata_url {
            parts.push(format!("resource_metadata=\"{url}\""));
        }
        if refused {
            parts.push("error=\"invalid_token\"".to_owned());
        }
        header_value(parts.join(", "))
    }

    /// The challenge of a 403 for a token without the scope `scope` (RFC 6750 §3.1).
    pub fn insufficient_scope(&self, scope: &str) -> HeaderValue {
        let mut parts = vec![
            "Bearer realm=\"toold\"".to_owned(),
            "error=\"insufficient_scope\"".to_owned(),
            format!("scope=\"{scope}\""),
        ];
        if let Some(url) = &self.metadata_url {
            parts.push(format!("resource_metadata=\"{url}\""));
        }
        header_value(parts.join(", "))
    }
}

/// RFC 9728 §3.1: the metadata URL of `resource`, or `None` when it is no http(s) URL.
fn metadata_url(resource: &str) -> Option<String> {
    let url = url::Url::parse(resource).ok()?;
    if !matches!(url.scheme(), "http" | "https") {
        return None;
    }
    let origin = url.origin().ascii_serialization();
    let path = url.path().trim_end_matches('/');
    Some(format!("{origin}{WELL_KNOWN}{path}"))
}

/// The challenge as a header value; a configured string that cannot be one (a control
/// character in an issuer URL) leaves the plain scheme.
fn header_value(text: String) -> HeaderValue {
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("Bearer"))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn issuer(issuer: &str, audience: &str) -> IssuerSettings {
        IssuerSettings {
            issuer: issuer.to_owned(),
            jwks_uri: None,
            audience: audience.to_owned(),
            principal_claim: "sub".to_owned(),
            roles_claim: "roles".to_owned(),
            roles: Default::default(),
        }
    }

    #[test]
    fn the_document_names_every_issuer_as_configured() {
        let metadata = ResourceMetadata::new(&[
            issuer("https://a.example/", "https://toold.example/mcp"),
            issuer("https://b.example/realms/x", "https://toold.example/mcp"),
        ]);
        let document = metadata.document();
        assert_eq!(document["resource"], "https://toold.example/mcp");
        assert_eq!(
            document["authorization_servers"],
            json!(["https://a.example/", "https://b.example/realms/x"])
        );
        assert_eq!(
            document["scopes_supported"],
            json!(["toold.read", "toold.execute", "toold.admin"])
        );
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
    }

    #[test]
    fn challenges_point_at_the_metadata_of_the_resource() {
        let metadata = ResourceMetadata::new(&[issuer("https://a", "https://toold.example/mcp")]);
        assert_eq!(
            metadata.unauthenticated(true),
            "Bearer realm=\"toold\", resource_metadata=\"https://toold.example/.well-known/oauth-protected-resource/mcp\", error=\"invalid_token\""
        );
        assert!(
            !metadata
                .unauthenticated(false)
                .to_str()
                .unwrap()
                .contains("error=")
        );
        let at_root = ResourceMetadata::new(&[issuer("https://a", "https://toold.example/")]);
        assert!(
            at_root
                .insufficient_scope("toold.execute")
                .to_str()
                .unwrap()
                .ends_with("resource_metadata=\"https://toold.example/.well-known/oauth-protected-resource\"")
        );
        let not_a_url = ResourceMetadata::new(&[issuer("https://a", "toold")]);
        assert_eq!(
            not_a_url.unauthenticated(true),
            "Bearer realm=\"toold\", error=\"invalid_token\""
        );
    }
}
