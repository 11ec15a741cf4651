//! `[auth.oidc]`: the OAuth 2.1 / OpenID Connect issuers whose JWT access tokens the daemon
//! accepts beside its static tokens (DESIGN §13), checked when the settings load. The
//! verification itself is `api::oidc`'s; this module only reads and checks the settings.
//!
//! Shape. DESIGN's single table (`[auth.oidc]`) configures one issuer; several are an array of
//! tables (`[[auth.oidc]]`), each with the same keys. Both read into [`OidcIssuers`], a list.
//! Decisions where DESIGN is silent:
//! - `issuer` is kept exactly as written (no trailing slash added or removed): tokens' `iss`
//!   is compared with it byte for byte, and the protected-resource metadata names it as is,
//!   since clients compare those strings too.
//! - `jwks_uri`, when given, is used as is and discovery is skipped; otherwise the keys' URL is
//!   read from `{issuer}/.well-known/openid-configuration`.
//! - `audience` is the resource a token must be minted for (RFC 8707); the first issuer's is the
//!   `resource` of `/.well-known/oauth-protected-resource`.
//! - Two entries with the same issuer are refused: a token's `iss` must pick one.
//! - A role's list in `[auth.oidc.roles]` may be empty; a claim value listed for two roles
//!   takes the stronger (admin over agent over observer).

use serde::{Deserialize, Deserializer, Serialize};

/// One issuer, as `[auth.oidc]` or one `[[auth.oidc]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct OidcSettings {
    /// The issuer identifier: tokens' `iss` must equal it; discovery starts from it.
    pub issuer: String,
    /// The issuer's key set, given directly (discovery is skipped then).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub jwks_uri: Option<String>,
    /// The resource (RFC 8707) a token must be minted for: one of its `aud` values.
    pub audience: String,
    /// The claim naming the principal: `sub` (then issuer-qualified) or e.g. `email`.
    #[serde(default = "default_principal_claim")]
    pub principal_claim: String,
    /// The claim holding role names: a list of strings or one space-separated string.
    #[serde(default = "default_roles_claim")]
    pub roles_claim: String,
    /// Claim values → toold roles.
    #[serde(default)]
    pub roles: OidcRoleMapping,
}

/// `[auth.oidc.roles]`: which claim values name each role.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct OidcRoleMapping {
    pub admin: Vec<String>,
    pub agent: Vec<String>,
    pub observer: Vec<String>,
}

fn default_principal_claim() -> String {
    "sub".to_owned()
}

fn default_roles_claim() -> String {
    "roles".to_owned()
}

/// Every configured issuer, read from either shape (see the module header).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
#[serde(transparent)]
pub struct OidcIssuers(pub Vec<OidcSettings>);

impl<'de> Deserialize<'de> for OidcIssuers {
    fn deserialize<D: Deserializer<'de>>(deserializer: D) -> Result<Self, D::Error> {
        #[derive(Deserialize)]
        #[serde(untagged)]
        enum OneOrMany {
            One(Box<OidcSettings>),
            Many(Vec<OidcSettings>),
        }
        // Untagged: the table's own errors (an unknown key) would be lost in serde's "did not
        // match any variant", so a table is read again alone for its message.
        let value = serde_json::Value::deserialize(deserializer)?;
        if value.is_object() {
            return serde_json::from_value::<OidcSettings>(value)
                .map(|one| OidcIssuers(vec![one]))
                .map_err(serde::de::Error::custom);
        }
        match serde_json::from_value::<OneOrMany>(value) {
            Ok(OneOrMany::One(one)) => Ok(OidcIssuers(vec![*one])),
            Ok(OneOrMany::Many(many)) => Ok(OidcIssuers(many)),
            Err(_) => Err(serde::de::Error::custom(
                "auth.oidc must be a table ([auth.oidc]) or an array of tables ([[auth.oidc]])",
            )),
        }
    }
}

/// An `[auth.oidc]` entry that cannot be used.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum OidcSettingsError {
    #[error("auth.oidc[{index}].{key}: must not be empty")]
    Empty { index: usize, key: &'static str },
    #[error("auth.oidc[{index}].{key}: {value:?} is not an http(s) URL")]
    NotAUrl {
        index: usize,
        key: &'static str,
        value: String,
    },
    #[error("auth.oidc[{index}]: the issuer {issuer:?} is configured twice")]
    DuplicateIssuer { index: usize, issuer: String },
}

impl OidcIssuers {
    /// `Ok` when every entry can be used; else the first problem, naming the entry and key.
    pub fn check(&self) -> Result<(), OidcSettingsError> {
        for (index, entry) in self.0.iter().enumerate() {
            entry.check(index)?;
            if self.0[..index].iter().any(|e| e.issuer == entry.issuer) {
                return Err(OidcSettingsError::DuplicateIssuer {
                    index,
                    issuer: entry.issuer.clone(),
                });
            }
        }
        Ok(())
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl OidcSettings {
    fn check(&self, index: usize) -> Result<(), OidcSettingsError> {
        let empty = |key| OidcSettingsError::Empty { index, key };
        for (key, value) in [
            ("issuer", &self.issuer),
            ("audience", &self.audience),
            ("principal_claim", &self.principal_claim),
            ("roles_claim", &self.roles_claim),
        ] {
            if value.trim().is_empty() {
                return Err(empty(key));
            }
        }
        is_http_url(index, "issuer", &self.issuer)?;
        if let Some(jwks_uri) = &self.jwks_uri {
            is_http_url(index, "jwks_uri", jwks_uri)?;
        }
        Ok(())
    }
}

fn is_http_url(index: usize, key: &'static str, value: &str) -> Result<(), OidcSettingsError> {
    match url::Url::parse(value) {
        Ok(url) if matches!(url.scheme(), "http" | "https") && url.host().is_some() => Ok(()),
        _ => Err(OidcSettingsError::NotAUrl {
            index,
            key,
            value: value.to_owned(),
        }),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[derive(Deserialize)]
    struct Auth {
        oidc: OidcIssuers,
    }

    fn read(toml_text: &str) -> Result<OidcIssuers, String> {
        let figment = figment::Figment::from(figment::providers::Serialized::defaults(
            serde_json::json!({}),
        ))
        .merge(<figment::providers::Toml as figment::providers::Format>::string(toml_text));
        figment
            .extract::<Auth>()
            .map(|auth| auth.oidc)
            .map_err(|err| err.to_string())
    }

    #[test]
    fn designs_single_table_reads_as_one_issuer() {
        let issuers = read(
            "[oidc]\nissuer = \"https://idp.example/realms/agents\"\n\
             audience = \"https://toold.example\"\n[oidc.roles]\nadmin = [\"toold-admin\"]\n",
        )
        .unwrap();
        assert_eq!(issuers.0.len(), 1);
        let one = &issuers.0[0];
        assert_eq!(one.issuer, "https://idp.example/realms/agents");
        assert_eq!(one.principal_claim, "sub");
        assert_eq!(one.roles_claim, "roles");
        assert_eq!(one.roles.admin, ["toold-admin"]);
        assert!(issuers.check().is_ok());
    }

    #[test]
    fn an_array_of_tables_reads_as_several_issuers() {
        let issuers = read(
            "[[oidc]]\nissuer = \"https://a.example/\"\naudience = \"x\"\n\
             [[oidc]]\nissuer = \"https://b.example\"\naudience = \"x\"\njwks_uri = \"https://b.example/keys\"\n",
        )
        .unwrap();
        assert_eq!(issuers.0.len(), 2);
        // Kept exactly as written: the trailing slash stays.
        assert_eq!(issuers.0[0].issuer, "https://a.example/");
        assert_eq!(
            issuers.0[1].jwks_uri.as_deref(),
            Some("https://b.example/keys")
        );
    }

    #[test]
    fn bad_entries_are_named() {
        let err =
            read("[oidc]\nissuer = \"https://a\"\naudience = \"x\"\nscope = 1\n").unwrap_err();
        assert!(err.contains("scope"), "{err}");
        let issuers = read("[oidc]\nissuer = \"ftp://a\"\naudience = \"x\"\n").unwrap();
        assert_eq!(
            issuers.check().unwrap_err().to_string(),
            "auth.oidc[0].issuer: \"ftp://a\" is not an http(s) URL"
        );
        let issuers = read("[oidc]\nissuer = \"https://a\"\naudience = \" \"\n").unwrap();
        assert!(
            issuers
                .check()
                .unwrap_err()
                .to_string()
                .contains("audience")
        );
        let issuers = read(
            "[[oidc]]\nissuer = \"https://a\"\naudience = \"x\"\n[[oidc]]\nissuer = \"https://a\"\naudience = \"y\"\n",
        )
        .unwrap();
        assert!(matches!(
            issuers.check(),
            Err(OidcSettingsError::DuplicateIssuer { index: 1, .. })
        ));
        let err = read("oidc = 5\n").unwrap_err();
        assert!(err.contains("table"), "{err}");
    }
}
