//! One issuer's signing keys (its JWKS), fetched over HTTP and cached (DESIGN §13).
//!
//! - The keys are fetched on first need: from `jwks_uri` when configured, else from the
//!   `jwks_uri` of `{issuer}/.well-known/openid-configuration` (whose `issuer` must be the
//!   configured one, OpenID Connect Discovery §4.3), found once and remembered.
//! - A token naming a `kid` the cache lacks makes the set be fetched again, at most once per
//!   [`REFETCH_INTERVAL`] (measured from the last attempt, failed or not), so a flood of
//!   made-up `kid`s costs the provider one request per interval. Concurrent misses share one
//!   fetch (a lock held across it; the second waiter finds the key or the pacing).
//! - A failed fetch keeps the keys already cached: a provider briefly down refuses nothing that
//!   was signed with a known key. A successful fetch replaces the set (a key the provider
//!   dropped is dropped here too).
//! - Only asymmetric keys are kept (RSA, EC P-256/P-384, OKP Ed25519): a symmetric (`oct`) key
//!   in the set is skipped, so no HMAC verification can ever happen, whatever the set holds. A
//!   key's `alg`, when given, is the only algorithm it verifies; else its type decides.
//!
//! Not here: the claims (`verifier`). Time is `tokio::time::Instant`, so tests can pause it.

use std::collections::HashMap;
use std::sync::{Arc, Mutex, RwLock};
use std::time::Duration;

use jsonwebtoken::jwk::{AlgorithmParameters, EllipticCurve, Jwk, KeyAlgorithm};
use jsonwebtoken::{Algorithm, DecodingKey};
use serde_json::Value;
use tokio::time::Instant;

/// At most one fetch of an issuer's keys per this long, whatever `kid`s tokens name.
pub const REFETCH_INTERVAL: Duration = Duration::from_secs(30);

/// How long one fetch (discovery or keys) may take.
const FETCH_TIMEOUT: Duration = Duration::from_secs(5);

/// The largest key-set or discovery document read.
const MAX_DOCUMENT_BYTES: usize = 1 << 20;

/// A key that may verify tokens, and the algorithms it verifies.
#[derive(Clone)]
pub struct VerifyingKey {
    pub key: Arc<DecodingKey>,
    pub algorithms: Vec<Algorithm>,
}

/// Why no key was found for a token.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum KeyMiss {
    /// The set (as fetched, or as cached when the fetch was paced or failed) has no such key.
    UnknownKid,
    /// No set was ever fetched: the provider could not be reached.
    Unavailable,
}

/// A fetch that failed, for the log.
#[derive(Debug, thiserror::Error)]
pub enum FetchError {
    #[error("fetching {url}: {source}")]
    Http {
        url: String,
        #[source]
        source: reqwest::Error,
    },
    #[error("{url}: {problem}")]
    Document { url: String, problem: String },
}

/// An issuer's cached keys.
pub struct KeySet {
    issuer: String,
    /// Configured, or found by discovery (then kept).
    jwks_uri: Mutex<Option<String>>,
    keys: RwLock<Option<Arc<HashMap<String, VerifyingKey>>>>,
    /// When keys were last fetched (tried); held across a fetch, so fetches never overlap.
    last_attempt: tokio::sync::Mutex<Option<Instant>>,
    /// [`REFETCH_INTERVAL`]; shorter in unit tests only.
    refetch_interval: Duration,
    client: reqwest::Client,
}

impl KeySet {
    pub fn new(issuer: &str, jwks_uri: Option<&str>, client: reqwest::Client) -> KeySet {
        KeySet {
            issuer: issuer.to_owned(),
            jwks_uri: Mutex::new(jwks_uri.map(str::to_owned)),
            keys: RwLock::new(None),
            last_attempt: tokio::sync::Mutex::new(None),
            refetch_interval: REFETCH_INTERVAL,
            client,
        }
    }

    /// This set, fetched again at most once per `interval` (unit tests).
    #[cfg(test)]
    pub fn paced_by(mut self, interval: Duration) -> KeySet {
        self.refetch_interval = interval;
        self
    }

    /// The key for a token's `kid` (`None`: the set's only key), fetching the set when the
    /// cache lacks it and the pacing allows.
    pub async fn key(&self, kid: Option<&str>) -> Result<VerifyingKey, KeyMiss> {
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        let mut last_attempt = self.last_attempt.lock().await;
        // Another request may have fetched while this one waited for the lock.
        if let Some(key) = self.cached(kid) {
            return Ok(key);
        }
        let paced = last_attempt.is_some_and(|at| at.elapsed() < self.refetch_interval);
        if !paced {
            *last_attempt = Some(Instant::now());
            match self.fetch().await {
                Ok(keys) => {
                    *self.keys.write().unwrap_or_else(|p| p.into_inner()) = Some(Arc::new(keys));
                }
                Err(err) => tracing::warn!(issuer = %self.issuer, "keeping the cached keys: {err}"),
            }
        }
        drop(last_attempt);
        match self.cached(kid) {
            Some(key) => Ok(key),
            None if self.is_empty_cache() => Err(KeyMiss::Unavailable),
            None => Err(KeyMiss::UnknownKid),
        }
    }

    /// Whether the cache changed since `generation` was read (a new set replaces the old
    /// `Arc`): the verifier drops its verified-token cache then.
    pub fn generation(&self) -> usize {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        keys.as_ref().map_or(0, |keys| Arc::as_ptr(keys) as usize)
    }

    fn is_empty_cache(&self) -> bool {
        self.keys
            .read()
            .unwrap_or_else(|p| p.into_inner())
            .is_none()
    }

    fn cached(&self, kid: Option<&str>) -> Option<VerifyingKey> {
        let keys = self.keys.read().unwrap_or_else(|p| p.into_inner());
        let keys = keys.as_ref()?;
        match kid {
            Some(kid) => keys.get(kid).cloned(),
            // No `kid`: only a set of one key says which key is meant.
            None if keys.len() == 1 => keys.values().next().cloned(),
            None => None,
        }
    }

    async fn fetch(&self) -> Result<HashMap<String, VerifyingKey>, FetchError> {
        let configured = self
            .jwks_uri
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone();
        let jwks_uri = match configured {
            Some(uri) => uri,
            None => {
                let uri = self.discover().await?;
                *self.jwks_uri.lock().unwrap_or_else(|p| p.into_inner()) = Some(uri.clone());
                uri
            }
        };
        let document = self.get_json(&jwks_uri).await?;
        let Some(keys) = document.get("keys").and_then(Value::as_array) else {
            return Err(FetchError::Document {
                url: jwks_uri,
                problem: "no \"keys\" array".to_owned(),
            });
        };
        Ok(usable_keys(keys))
    }

    /// The `jwks_uri` of the issuer's discovery document.
    async fn discover(&self) -> Result<String, FetchError> {
        let url = format!(
            "{}/.well-known/openid-configuration",
            self.issuer.trim_end_matches('/')
        );
        let document = self.get_json(&url).await?;
        let problem = |problem: String| FetchError::Document {
            url: url.clone(),
            problem,
        };
        let issuer = document.get("issuer").and_then(Value::as_str);
        if issuer != Some(self.issuer.as_str()) {
            return Err(problem(format!(
                "names issuer {issuer:?}, not the configured {:?}",
                self.issuer
            )));
        }
        document
            .get("jwks_uri")
            .and_then(Value::as_str)
            .map(str::to_owned)
            .ok_or_else(|| problem("no \"jwks_uri\"".to_owned()))
    }

    async fn get_json(&self, url: &str) -> Result<Value, FetchError> {
        let http = |source| FetchError::Http {
            url: url.to_owned(),
            source,
        };
        let response = self
            .client
            .get(url)
            .timeout(FETCH_TIMEOUT)
            .send()
            .await
            .and_then(reqwest::Response::error_for_status)
            .map_err(http)?;
        let bytes = response.bytes().await.map_err(http)?;
        if bytes.len() > MAX_DOCUMENT_BYTES {
            return Err(FetchError::Document {
                url: url.to_owned(),
                problem: format!("larger than {MAX_DOCUMENT_BYTES} bytes"),
            });
        }
        serde_json::from_slice(&bytes).map_err(|err| FetchError::Document {
            url: url.to_owned(),
            problem: format!("not JSON: {err}"),
        })
    }
}

/// The set's asymmetric keys by `kid` (`""` for a key without one); the rest is skipped.
pub fn usable_keys(keys: &[Value]) -> HashMap<String, VerifyingKey> {
    let mut usable = HashMap::new();
    for value in keys {
        let Ok(jwk) = serde_json::from_value::<Jwk>(value.clone()) else {
            continue;
        };
        // A key meant for encryption only verifies nothing.
        if value.get("use").and_then(Value::as_str) == Some("enc") {
            continue;
        }
        let Some(algorithms) = algorithms_of(&jwk) else {
            continue;
        };
        let Ok(key) = DecodingKey::from_jwk(&jwk) else {
            continue;
        };
        let kid = jwk.common.key_id.clone().unwrap_or_default();
        usable.insert(
            kid,
            VerifyingKey {
                key: Arc::new(key),
                algorithms,
            },
        );
    }
    usable
}

/// The algorithms a key verifies: its `alg` if it names an accepted one, else every accepted
/// one of its type; `None` for a symmetric key or an algorithm not accepted.
fn algorithms_of(jwk: &Jwk) -> Option<Vec<Algorithm>> {
    let by_type = match &jwk.algorithm {
        AlgorithmParameters::RSA(_) => vec![
            Algorithm::RS256,
            Algorithm::RS384,
            Algorithm::RS512,
            Algorithm::PS256,
            Algorithm::PS384,
            Algorithm::PS512,
        ],
        AlgorithmParameters::EllipticCurve(params) => match params.curve {
            EllipticCurve::P256 => vec![Algorithm::ES256],
            EllipticCurve::P384 => vec![Algorithm::ES384],
            _ => return None,
        },
        AlgorithmParameters::OctetKeyPair(params) => match params.curve {
            EllipticCurve::Ed25519 => vec![Algorithm::EdDSA],
            _ => return None,
        },
        // `oct` (HMAC) and anything else: never a verifying key here.
        _ => return None,
    };
    let Some(named) = jwk.common.key_algorithm else {
        return Some(by_type);
    };
    let named = match named {
        KeyAlgorithm::RS256 => Algorithm::RS256,
        KeyAlgorithm::RS384 => Algorithm::RS384,
        KeyAlgorithm::RS512 => Algorithm::RS512,
        KeyAlgorithm::PS256 => Algorithm::PS256,
        KeyAlgorithm::PS384 => Algorithm::PS384,
        KeyAlgorithm::PS512 => Algorithm::PS512,
        KeyAlgorithm::ES256 => Algorithm::ES256,
        KeyAlgorithm::ES384 => Algorithm::ES384,
        KeyAlgorithm::EdDSA => Algorithm::EdDSA,
        _ => return None,
    };
    by_type.contains(&named).then(|| vec![named])
}
