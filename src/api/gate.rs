//! The one admission sequence every request meets, whichever door it came through, in this
//! order: shutting down (`ShuttingDown`), bearer auth (`Unauthenticated`), the principal's
//! request rate (`LimitExceeded`, `rate_limit`), load shedding (`Overloaded`) and the request
//! timeout (`Timeout`). Probes (`/healthz`, `/readyz`, gRPC
//! health) pass every gate but the first, so they work without a token and under load; so do
//! the dashboard's static files (`/ui`, `/ui/…`), which hold no data: the page asks for its
//! token in a login form and sends it on every API request it makes; and the OAuth
//! protected-resource metadata (`/.well-known/oauth-protected-resource…`), which a client
//! reads to find where to get a token.
//!
//! [`Gate::admit`] answers with an [`Admission`] (the caller's token, a load-shedding permit
//! and the deadline) or a refusal as a [`ServiceError`]; each door turns a refusal into its own
//! answer through the one error table in `api` (HTTP: status and error body, gRPC: a status
//! in `grpc-status` headers). [`Admitted::respond_within`] then holds the permit and enforces
//! the deadline while the door produces its response head.
//!
//! Authentication yields the caller's [`Principal`] (DESIGN §10): the presented token's
//! SHA-256 digest is compared, in constant time, with every configured digest, so timing
//! tells neither which token nor which prefix matched, and the daemon holds no plain token.
//! Without configured tokens every caller is [`Principal::local`] (an admin). A child
//! session's token (the `agent` tool's, minted by the service: `SessionTokens`) is looked up
//! too, in either case, the same way (digests, constant time), and names a principal scoped
//! to that session; it is accepted only while the child is open. A token that is neither is
//! checked as an access token of the configured issuers (`[auth.oidc]`, `api::oidc`): that is
//! the same step for every door, and a bad one is `Unauthenticated` (a valid one that maps to
//! no role `Forbidden`). Every presented token is counted, accepted (by kind) or refused (by
//! reason: `toold_auth_tokens_*_total`). What a principal may do is
//! decided once, in the service; the gate only says who it is. No token is ever logged.
//!
//! Not here: what a door adds on top (gRPC's `grpc-timeout`, which may shorten the deadline
//! through [`Admitted::shorten_deadline`], and its per-method request counter; HTTP's request
//! ids and counter). The gate is on every request's path: admitting allocates only the
//! caller's token (when the daemon checks tokens), and spawns nothing.

use std::future::Future;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use axum::http::header::AUTHORIZATION;
use axum::http::{Extensions, HeaderMap};
use sha2::{Digest, Sha256};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};

use super::oidc::{OidcVerifier, TokenRefusal, Verified};
use super::rate_limit::RateLimiter;
use crate::permission::{Principal, digests_equal};
use crate::service::{ErrorCode, ServiceError, SessionTokens};

/// A configured token: its SHA-256 digest and the principal it names.
pub type KnownToken = ([u8; 32], Principal);

/// Whether the daemon can serve: shared by the server (which flips it), the gate and the
/// readiness probe.
#[derive(Debug, Default)]
pub struct DaemonStatus {
    /// The store is open and sessions are restored.
    pub ready: AtomicBool,
    /// A shutdown signal arrived: new requests are refused with `ShuttingDown`.
    pub shutting_down: AtomicBool,
}

/// The bearer token a request was authenticated with (none when the daemon checks no
/// tokens); handlers that record who acted (resolving an approval) read it from the request's
/// extensions, where the doors put it.
#[derive(Clone, Debug, Default)]
pub struct CallerToken(pub Option<String>);

/// The HTTP door's probes.
const HTTP_PROBES: [&str; 2] = ["/healthz", "/readyz"];

/// The path prefix of gRPC's health service, the gRPC door's probe.
const GRPC_HEALTH: &str = "/grpc.health.v1.Health/";

/// Whether an HTTP request's path is a probe.
pub fn is_http_probe(path: &str) -> bool {
    HTTP_PROBES.contains(&path)
}

/// Whether an HTTP request's path is one of the dashboard's static files (`api::http::ui`).
pub fn is_dashboard_file(path: &str) -> bool {
    path == DASHBOARD
        || path
            .strip_prefix(DASHBOARD)
            .is_some_and(|rest| rest.starts_with('/'))
}

/// Whether an HTTP request's path is the OAuth protected-resource metadata (RFC 9728), which
/// a client reads before it has a token.
pub fn is_resource_metadata(path: &str) -> bool {
    path.strip_prefix(super::oidc::metadata::WELL_KNOWN)
        .is_some_and(|rest| rest.is_empty() || rest.starts_with('/'))
}

/// The dashboard's path.
const DASHBOARD: &str = "/ui";

/// Whether a gRPC request's path (`/package.Service/Method`) is a health check.
pub fn is_grpc_probe(path: &str) -> bool {
    path.starts_with(GRPC_HEALTH)
}

/// What the gates need; one, shared by both doors, so they shed on the same permits.
pub struct Gate {
    pub status: Arc<DaemonStatus>,
    /// Empty: no auth.
    pub auth_tokens: Vec<KnownToken>,
    /// The open child sessions' tokens (the service's), accepted besides `auth_tokens`.
    pub session_tokens: Arc<SessionTokens>,
    /// One per request in flight (until its response head is ready).
    pub permits: Arc<Semaphore>,
    pub request_timeout: Duration,
    /// `requests_per_second_per_principal`.
    pub rate: RateLimiter,
    /// The configured issuers (`[auth.oidc]`), whose access tokens are accepted too.
    pub oidc: Option<Arc<OidcVerifier>>,
}

/// A request past the gates.
pub enum Admission {
    /// A probe (or a dashboard file) past the shutdown gate: no token, no permit, no timeout.
    Probe,
    /// Any other request, past every gate.
    Admitted(Admitted),
}

/// What an admitted request carries while its response head is produced.
pub struct Admitted {
    caller: CallerToken,
    principal: Principal,
    /// Returned when the response head is ready (a stream runs on without it).
    permit: OwnedSemaphorePermit,
    deadline: Deadline,
}

/// How long a request may take to produce its response head, and who set that.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Deadline {
    duration: Duration,
    /// `None`: the server's request timeout; `Some(name)`: the client's, from `name`.
    client_source: Option<&'static str>,
}

/// Which door a request came through: what counts as its probe, and where its token goes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Door {
    Http,
    Grpc,
}

impl Door {
    /// Whether a request's path is this door's probe.
    pub fn is_probe(self, path: &str) -> bool {
        match self {
            Door::Http => is_http_probe(path),
            Door::Grpc => is_grpc_probe(path),
        }
    }

    /// Whether a request's path passes every gate but the first: a probe, or (HTTP) a file
    /// of the dashboard.
    fn is_open(self, path: &str) -> bool {
        self.is_probe(path)
            || (self == Door::Http && (is_dashboard_file(path) || is_resource_metadata(path)))
    }

    /// What a refused caller is told, in this door's terms.
    fn token_required(self) -> &'static str {
        match self {
            Door::Http => "a valid bearer token is required (Authorization: Bearer TOKEN)",
            Door::Grpc => "a valid bearer token is required (metadata authorization: Bearer TOKEN)",
        }
    }
}

impl Gate {
    /// Runs the gates in order over a request that came through `door` for `path`.
    pub async fn admit(
        &self,
        door: Door,
        path: &str,
        headers: &HeaderMap,
    ) -> Result<Admission, ServiceError> {
        let open = door.is_open(path);
        if self.status.shutting_down.load(Ordering::Acquire) {
            return Err(ServiceError::new(
                ErrorCode::ShuttingDown,
                "toold is shutting down",
            ));
        }
        if open {
            return Ok(Admission::Probe);
        }
        let (caller, principal) = self.caller(door, headers).await?;
        self.rate.admit(&principal)?;
        // Shed at once rather than queue: a client under back-pressure should retry elsewhere.
        let Ok(permit) = self.permits.clone().try_acquire_owned() else {
            return Err(ServiceError::new(
                ErrorCode::Overloaded,
                "too many requests in flight; retry later",
            ));
        };
        Ok(Admission::Admitted(Admitted {
            caller,
            principal,
            permit,
            deadline: Deadline {
                duration: self.request_timeout,
                client_source: None,
            },
        }))
    }

    /// Who presents the request's token: a child session's token, a static one, or an
    /// access token of a configured issuer (`api::oidc`), in that order; every door's one
    /// authentication step. Each presented token is counted, accepted or refused.
    async fn caller(
        &self,
        door: Door,
        headers: &HeaderMap,
    ) -> Result<(CallerToken, Principal), ServiceError> {
        let presented = bearer(headers);
        // A child session's token narrows even a daemon without auth to that session.
        if let Some(presented) = presented
            && let Some(principal) = self.session_tokens.principal_for(presented)
        {
            crate::telemetry::record_token_accepted("session");
            return Ok((CallerToken(Some(presented.to_owned())), principal));
        }
        if self.auth_tokens.is_empty() && self.oidc.is_none() {
            return Ok((CallerToken(None), Principal::local()));
        }
        let Some(presented) = presented else {
            crate::telemetry::record_token_refused("missing");
            return Err(unauthenticated(door.token_required()));
        };
        if let Some(principal) = static_principal(&self.auth_tokens, presented) {
            crate::telemetry::record_token_accepted("static");
            return Ok((CallerToken(Some(presented.to_owned())), principal.clone()));
        }
        // Not a JWT at all (no `.`): a wrong static token, whether or not issuers are set.
        let verifier = self.oidc.as_ref().filter(|_| presented.contains('.'));
        let Some(verifier) = verifier else {
            crate::telemetry::record_token_refused(TokenRefusal::UnknownToken.reason());
            return Err(unauthenticated(door.token_required()));
        };
        match verifier.verify(presented).await {
            Ok(Verified::Principal(principal)) => {
                crate::telemetry::record_token_accepted("oidc");
                Ok((CallerToken(Some(presented.to_owned())), principal))
            }
            Ok(Verified::NoRole { principal }) => {
                crate::telemetry::record_token_refused("insufficient_scope");
                Err(ServiceError::new(
                    ErrorCode::Forbidden,
                    format!(
                        "the access token of \"{principal}\" carries no toold role: it needs a \
                         roles claim mapped in [auth.oidc.roles] or the scope toold.read, \
                         toold.execute or toold.admin"
                    ),
                ))
            }
            Err(refusal) => {
                crate::telemetry::record_token_refused(refusal.reason());
                Err(unauthenticated(&format!("invalid access token: {refusal}")))
            }
        }
    }
}

fn unauthenticated(message: &str) -> ServiceError {
    ServiceError::new(ErrorCode::Unauthenticated, message)
}

impl Admitted {
    /// The caller's token, for the request's extensions (left empty here).
    pub fn take_caller(&mut self) -> CallerToken {
        std::mem::take(&mut self.caller)
    }

    /// Who the caller is, as the doors' handlers read it.
    pub fn principal(&self) -> &Principal {
        &self.principal
    }

    /// Puts the caller's token and principal into a request's extensions, where the doors'
    /// handlers find them.
    pub fn identify(&mut self, extensions: &mut Extensions) {
        extensions.insert(self.take_caller());
        extensions.insert(self.principal.clone());
    }

    /// A client's own deadline (named by where it came from, e.g. `grpc-timeout`) replaces the
    /// server's request timeout when it is shorter; it never lengthens it.
    pub fn shorten_deadline(&mut self, client: Duration, source: &'static str) {
        if client < self.deadline.duration {
            self.deadline = Deadline {
                duration: client,
                client_source: Some(source),
            };
        }
    }

    /// Produces the response head with `respond` within the deadline, holding the permit until
    /// then; past the deadline `respond` is dropped (its work with it) and the answer is
    /// `Timeout`. A streamed body runs on after its head, outside the deadline and the permit.
    pub async fn respond_within<F: Future>(self, respond: F) -> Result<F::Output, ServiceError> {
        let Admitted {
            permit, deadline, ..
        } = self;
        let answered = tokio::time::timeout(deadline.duration, respond).await;
        drop(permit);
        answered.map_err(|_| deadline.passed())
    }
}

impl Deadline {
    fn passed(&self) -> ServiceError {
        let millis = self.duration.as_millis();
        let message = match self.client_source {
            None => format!("the request took longer than {millis} ms"),
            Some(source) => format!("the client's deadline ({source}, {millis} ms) passed"),
        };
        ServiceError::new(ErrorCode::Timeout, message)
    }
}

/// The principal of the configured token `presented` is. Its digest is compared in full with
/// every configured digest, so timing does not tell which prefix (or which token) matched.
fn static_principal<'t>(tokens: &'t [KnownToken], presented: &str) -> Option<&'t Principal> {
    let digest: [u8; 32] = Sha256::digest(presented.as_bytes()).into();
    tokens.iter().fold(None, |found, (known, principal)| {
        let matches = digests_equal(known, &digest);
        found.or(matches.then_some(principal))
    })
}

/// The token of `authorization: Bearer TOKEN`, if the request presents one.
pub fn bearer(headers: &HeaderMap) -> Option<&str> {
    headers
        .get(AUTHORIZATION)
        .and_then(|value| value.to_str().ok())
        .and_then(|value| value.strip_prefix("Bearer "))
        .map(str::trim)
}

#[cfg(test)]
#[path = "gate_tests.rs"]
mod tests;
