//! What an OIDC access token costs a single call against a static token (issue 39,
//! `TOOLD_BENCH_ONLY=jwt`): the single-call p50 of `read_file` (the load bench's request) on
//! one daemon with `[[auth.tokens]]` and `[auth.oidc]`, called by an agent holding a static
//! token and by an agent holding an ES256 JWT of the configured issuer (its keys served by a
//! loopback JWKS endpoint in this process), each on its own session, in alternating short
//! rounds over one client each. The JWT's call pays the gate's static-digest miss, the
//! verified-token lookup (its SHA-256) and, once, the signature check. Budget: the JWT's p50
//! at most 5% above the static token's.
//!
//! The floor is a second static token's agent (an A/A pair in the same run): two callers
//! doing the same thing differ by where their session sits and when their round runs, and
//! that difference is not the JWT's. The callers' order rotates from round to round, so that
//! none always runs first (after the others' idle gap) or last.
//!
//! `TOOLD_BENCH_QUICK=1` runs a few calls only (to check the bench works, not to measure).

use std::time::Duration;

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use serde_json::json;

use super::client::{Connection, PreparedRequest};
use super::daemon::Daemon;
use super::{
    PAIRED_ROUND, PAIRED_ROUNDS, WARM_UP, batch, create_session_as, fixture_dir, percentiles,
    projects_in, us,
};

const JWT_BUDGET: f64 = 1.05;
const STATIC_TOKEN: &str = "bench-static-agent-token";
const SECOND_STATIC_TOKEN: &str = "bench-static-agent-token-2";
const ISSUER: &str = "https://idp.bench.invalid/realms/agents";
const AUDIENCE: &str = "https://toold.bench.invalid/mcp";
/// A P-256 key made for this bench (never used elsewhere): its private half signs the
/// token, its public half is the issuer's JWKS.
const EC_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgfOWVIWMi61kxaYhW\nF0jDJlbDd1m6KER/Py/K2dZVWlahRANCAAQYsXt5hrFfaL0R8xJwaj0Sq77KAx+G\nfJIb9TpmpQh97aUVeNlpqWYJJCFrWDyjHOGX4d59AoF1Np/vBKdbEFZb\n-----END PRIVATE KEY-----\n";
const EC_X: &str = "GLF7eYaxX2i9EfMScGo9Equ-ygMfhnySG_U6ZqUIfe0";
const EC_Y: &str = "pRV42WmpZgkkIWtYPKMc4Zfh3n0CgXU2n-8Ep1sQVls";

/// Serves the issuer's key set on loopback; its URL.
async fn serve_jwks() -> String {
    let keys = json!({"keys": [{"kty": "EC", "crv": "P-256", "x": EC_X, "y": EC_Y, "kid": "bench", "alg": "ES256"}]});
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let keys = keys.clone();
            async move { axum::Json(keys) }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0")
        .await
        .expect("a loopback port");
    let url = format!("http://{}/jwks", listener.local_addr().expect("bound"));
    tokio::spawn(async move { axum::serve(listener, app).await });
    url
}

/// An agent's access token of the issuer, valid for an hour.
fn access_token() -> String {
    let now = jsonwebtoken::get_current_timestamp();
    let claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": "bench-agent", "iat": now, "exp": now + 3600,
        "scope": "toold.execute", "jti": "bench",
    });
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some("bench".to_owned());
    let key = EncodingKey::from_ec_pem(EC_PEM.as_bytes()).expect("the bench key");
    encode(&header, &claims, &key).expect("signed")
}

struct Caller {
    connection: Connection,
    request: PreparedRequest,
}

impl Caller {
    async fn open(daemon: &Daemon, dir: &std::path::Path, token: &str) -> Caller {
        let session = create_session_as(daemon.address, &projects_in(dir), Some(token)).await;
        let body = serde_json::to_vec(&batch(1)).expect("a batch");
        Caller {
            connection: Connection::open(daemon.address).await.expect("connects"),
            request: PreparedRequest::with_bearer(
                "POST",
                daemon.address,
                &format!("/v1/sessions/{session}/batches"),
                Some(token),
                &body,
            ),
        }
    }

    async fn time(&mut self, calls: usize) -> Vec<Duration> {
        super::time_requests(&mut self.connection, &self.request, calls).await
    }
}

/// Prints the static token's calls against the JWT's.
pub async fn measure() {
    let quick = std::env::var("TOOLD_BENCH_QUICK").is_ok();
    let (warm_up, rounds, round) = if quick {
        (10, 2, 10)
    } else {
        (WARM_UP, PAIRED_ROUNDS, PAIRED_ROUND)
    };
    let jwks = serve_jwks().await;
    let dir = fixture_dir();
    let config = dir.path().join("toold.toml");
    std::fs::write(
        &config,
        format!(
            "[[auth.tokens]]\nname = \"alice\"\ntoken = \"{STATIC_TOKEN}\"\nrole = \"agent\"\n\n\
             [[auth.tokens]]\nname = \"bob\"\ntoken = \"{SECOND_STATIC_TOKEN}\"\nrole = \"agent\"\n\n\
             [auth.oidc]\nissuer = \"{ISSUER}\"\njwks_uri = \"{jwks}\"\naudience = \"{AUDIENCE}\"\n"
        ),
    )
    .expect("settings file");
    let config = config.to_str().expect("a UTF-8 path");
    let daemon = Daemon::start_with(dir.path(), &["--config", config]).await;
    let jwt = access_token();
    let mut callers = [
        Caller::open(&daemon, dir.path(), STATIC_TOKEN).await,
        Caller::open(&daemon, dir.path(), &jwt).await,
        Caller::open(&daemon, dir.path(), SECOND_STATIC_TOKEN).await,
    ];
    let mut samples: [Vec<Duration>; 3] = Default::default();
    for caller in &mut callers {
        caller.time(warm_up).await;
    }
    for round_number in 0..rounds {
        for offset in 0..callers.len() {
            let which = (round_number + offset) % callers.len();
            let taken = callers[which].time(round).await;
            samples[which].extend(taken);
        }
    }
    let [fixed, oidc, second] = samples.map(|mut taken| {
        let count = taken.len();
        let (p50, p99) = percentiles(&mut taken);
        (p50, p99, count)
    });
    for (label, (p50, p99, count)) in [
        ("static token:       ", fixed),
        ("OIDC JWT:           ", oidc),
        ("second static token:", second),
    ] {
        println!(
            "jwt {label} read_file p50 {:.1} µs, p99 {:.1} µs ({count} calls)",
            us(p50),
            us(p99)
        );
    }
    let ratio = oidc.0.as_secs_f64() / fixed.0.as_secs_f64();
    let floor = second.0.as_secs_f64() / fixed.0.as_secs_f64();
    println!(
        "jwt JWT / static p50: {ratio:.3}×  (budget ≤ {JWT_BUDGET}×: {}); the A/A pair (second static / static): {floor:.3}×",
        super::verdict(ratio <= JWT_BUDGET)
    );
    daemon.terminate();
}
