//! The verifier against a key set served by a local HTTP server: every refusal's reason, the
//! algorithms refused whatever the set holds, roles from the claim or the scopes, and the
//! pacing of fetches (shortened here; the 30 s of production is the integration tests').

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use jsonwebtoken::{EncodingKey, Header, encode};
use serde_json::{Value, json};

use super::*;
use crate::permission::Role;

const ED_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMC4CAQAwBQYDK2VwBCIEIMyIkGUZSDXpHJMumm7QxBs9vS1aQW0rTJhWC/zTcMUV\n-----END PRIVATE KEY-----\n";
const ED_X: &str = "9nqxhfgjELAOIM3A-AXLwj9qeDJTdlq7_JiqZrhhsBw";
const EC_PEM: &str = "-----BEGIN PRIVATE KEY-----\nMIGHAgEAMBMGByqGSM49AgEGCCqGSM49AwEHBG0wawIBAQQgfOWVIWMi61kxaYhW\nF0jDJlbDd1m6KER/Py/K2dZVWlahRANCAAQYsXt5hrFfaL0R8xJwaj0Sq77KAx+G\nfJIb9TpmpQh97aUVeNlpqWYJJCFrWDyjHOGX4d59AoF1Np/vBKdbEFZb\n-----END PRIVATE KEY-----\n";
const EC_X: &str = "GLF7eYaxX2i9EfMScGo9Equ-ygMfhnySG_U6ZqUIfe0";
const EC_Y: &str = "pRV42WmpZgkkIWtYPKMc4Zfh3n0CgXU2n-8Ep1sQVls";
const ISSUER: &str = "https://idp.test/realms/agents";
const AUDIENCE: &str = "https://toold.test/mcp";

/// A key-set server: the set it serves (changeable) and how often it was asked.
struct KeyServer {
    url: String,
    keys: Arc<std::sync::Mutex<Value>>,
    hits: Arc<AtomicUsize>,
}

async fn key_server(keys: Value) -> KeyServer {
    let keys = Arc::new(std::sync::Mutex::new(keys));
    let hits = Arc::new(AtomicUsize::new(0));
    let (served, counted) = (keys.clone(), hits.clone());
    let app = axum::Router::new().route(
        "/jwks",
        axum::routing::get(move || {
            let (served, counted) = (served.clone(), counted.clone());
            async move {
                counted.fetch_add(1, Ordering::SeqCst);
                axum::Json(served.lock().unwrap().clone())
            }
        }),
    );
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    tokio::spawn(async move { axum::serve(listener, app).await });
    KeyServer { url, keys, hits }
}

fn ed_jwk(kid: &str) -> Value {
    json!({"kty": "OKP", "crv": "Ed25519", "x": ED_X, "kid": kid, "use": "sig"})
}

fn ec_jwk(kid: &str) -> Value {
    json!({"kty": "EC", "crv": "P-256", "x": EC_X, "y": EC_Y, "kid": kid})
}

fn settings(jwks_uri: &str) -> IssuerSettings {
    IssuerSettings {
        issuer: ISSUER.to_owned(),
        jwks_uri: Some(jwks_uri.to_owned()),
        audience: AUDIENCE.to_owned(),
        principal_claim: "sub".to_owned(),
        roles_claim: "roles".to_owned(),
        roles: RoleNames {
            admin: vec!["toold-admin".to_owned()],
            agent: vec!["toold-agent".to_owned()],
            observer: vec!["toold-observer".to_owned()],
        },
    }
}

fn verifier(jwks_uri: &str) -> OidcVerifier {
    OidcVerifier::new(&[settings(jwks_uri)], reqwest::Client::new())
        .paced_by(Duration::from_millis(300))
}

fn now() -> u64 {
    jsonwebtoken::get_current_timestamp()
}

/// Valid claims for `sub`, with `extra` over them.
fn claims(sub: &str, extra: Value) -> Value {
    let mut claims = json!({
        "iss": ISSUER, "aud": AUDIENCE, "sub": sub, "exp": now() + 300, "iat": now(),
        "scope": "toold.execute", "jti": format!("jti-{sub}"),
    });
    for (key, value) in extra.as_object().unwrap() {
        claims[key] = value.clone();
    }
    claims
}

fn ed_token(kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::EdDSA);
    header.kid = Some(kid.to_owned());
    encode(
        &header,
        claims,
        &EncodingKey::from_ed_pem(ED_PEM.as_bytes()).unwrap(),
    )
    .unwrap()
}

fn ec_token(kid: &str, claims: &Value) -> String {
    let mut header = Header::new(Algorithm::ES256);
    header.kid = Some(kid.to_owned());
    encode(
        &header,
        claims,
        &EncodingKey::from_ec_pem(EC_PEM.as_bytes()).unwrap(),
    )
    .unwrap()
}

/// A token with `header` (JSON) over `claims`, its signature `signature`.
fn raw_token(header: Value, claims: &Value, signature: &str) -> String {
    use base64::Engine;
    let part = |v: &Value| base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string());
    format!("{}.{}.{signature}", part(&header), part(claims))
}

fn principal(verified: Result<Verified, TokenRefusal>) -> Principal {
    match verified {
        Ok(Verified::Principal(principal)) => principal,
        other => panic!("not a principal: {other:?}"),
    }
}

#[tokio::test]
async fn a_valid_token_names_the_issuer_qualified_sub_with_its_role() {
    let server = key_server(json!({"keys": [ed_jwk("k1"), ec_jwk("k2")]})).await;
    let verifier = verifier(&server.url);
    let agent = principal(
        verifier
            .verify(&ed_token("k1", &claims("svc-a", json!({}))))
            .await,
    );
    assert_eq!(&*agent.name, "https://idp.test/realms/agents#svc-a");
    assert_eq!(agent.role, Role::Agent);
    let es = principal(
        verifier
            .verify(&ec_token("k2", &claims("svc-b", json!({}))))
            .await,
    );
    assert_eq!(&*es.name, "https://idp.test/realms/agents#svc-b");
    // Verified once: the same token again is remembered, and the set was fetched once.
    let token = ed_token("k1", &claims("svc-a", json!({})));
    principal(verifier.verify(&token).await);
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
}

#[tokio::test]
async fn roles_come_from_the_mapped_claim_before_the_scopes() {
    let server = key_server(json!({"keys": [ed_jwk("k1")]})).await;
    let verifier = verifier(&server.url);
    let cases = [
        (
            json!({"roles": ["toold-observer"], "scope": "toold.admin"}),
            Some(Role::Observer),
        ),
        (json!({"roles": "other toold-admin"}), Some(Role::Admin)),
        (
            json!({"roles": ["unmapped"], "scope": "toold.read"}),
            Some(Role::Observer),
        ),
        (
            json!({"scope": "openid toold.admin toold.read"}),
            Some(Role::Admin),
        ),
        (
            json!({"scope": "openid", "scp": ["toold.execute"]}),
            Some(Role::Agent),
        ),
        (json!({"scope": "openid profile"}), None),
    ];
    for (at, (extra, role)) in cases.into_iter().enumerate() {
        let token = ed_token("k1", &claims(&format!("p{at}"), extra.clone()));
        match (verifier.verify(&token).await, role) {
            (Ok(Verified::Principal(p)), Some(role)) => assert_eq!(p.role, role, "{extra}"),
            (Ok(Verified::NoRole { principal }), None) => assert!(principal.ends_with("#p5")),
            (other, _) => panic!("{extra}: {other:?}"),
        }
    }
    let mut by_email = settings(&server.url);
    by_email.principal_claim = "email".to_owned();
    let verifier = OidcVerifier::new(&[by_email], reqwest::Client::new());
    let token = ed_token("k1", &claims("x", json!({"email": "ops@example.com"})));
    assert_eq!(
        &*principal(verifier.verify(&token).await).name,
        "ops@example.com"
    );
    let token = ed_token("k1", &claims("y", json!({})));
    assert_eq!(
        verifier.verify(&token).await,
        Err(TokenRefusal::MissingClaim)
    );
}

#[tokio::test]
async fn each_bad_token_is_refused_for_its_reason() {
    // An HMAC key in the set changes nothing: HS256 is refused before any key is looked at.
    let oct = json!({"kty": "oct", "k": "c2VjcmV0", "kid": "k1"});
    let server = key_server(json!({"keys": [oct, ed_jwk("k1"), ec_jwk("k2")]})).await;
    let verifier = verifier(&server.url);
    let good = claims("svc", json!({}));
    let hs256 = encode(
        &Header::new(Algorithm::HS256),
        &good,
        &EncodingKey::from_secret(b"secret").unwrap(),
    )
    .unwrap();
    let valid = ed_token("k1", &good);
    let cases = [
        (
            ed_token("k1", &claims("svc", json!({"exp": now() - 120}))),
            TokenRefusal::Expired,
        ),
        (
            ed_token("k1", &claims("svc", json!({"nbf": now() + 120}))),
            TokenRefusal::NotYetValid,
        ),
        (
            ed_token("k1", &claims("svc", json!({"aud": "https://other"}))),
            TokenRefusal::WrongAudience,
        ),
        (
            ed_token("k1", &claims("svc", json!({"iss": "https://evil"}))),
            TokenRefusal::WrongIssuer,
        ),
        (ed_token("nope", &good), TokenRefusal::UnknownKid),
        // ES256 over the Ed25519 key's kid: the key does not verify that algorithm.
        (ec_token("k1", &good), TokenRefusal::BadSignature),
        (
            raw_token(json!({"alg": "none"}), &good, ""),
            TokenRefusal::UnsupportedAlgorithm,
        ),
        (
            raw_token(json!({"alg": "EdDSA", "kid": "k1"}), &good, "AAAA"),
            TokenRefusal::BadSignature,
        ),
        (hs256, TokenRefusal::UnsupportedAlgorithm),
        (valid[..valid.len() / 2].to_owned(), TokenRefusal::Malformed),
        // Cut in the signature on a base64 quantum: it decodes, and does not verify.
        (
            valid[..valid.rfind('.').unwrap() + 41].to_owned(),
            TokenRefusal::BadSignature,
        ),
        ("a.b.c".to_owned(), TokenRefusal::Malformed),
        (
            ed_token("k1", &json!({"iss": ISSUER, "aud": AUDIENCE, "sub": "x"})),
            TokenRefusal::MissingClaim,
        ),
    ];
    for (token, reason) in cases {
        assert_eq!(verifier.verify(&token).await, Err(reason), "{token}");
    }
    // Within the leeway, an expired or early token still passes.
    let lenient = claims("svc2", json!({"exp": now() - 30, "nbf": now() + 30}));
    principal(verifier.verify(&ed_token("k1", &lenient)).await);
}

#[tokio::test]
async fn an_unknown_kid_fetches_again_at_most_once_per_interval_and_a_failure_keeps_the_keys() {
    let server = key_server(json!({"keys": [ed_jwk("old")]})).await;
    let verifier = verifier(&server.url);
    principal(
        verifier
            .verify(&ed_token("old", &claims("a", json!({}))))
            .await,
    );
    // Rotated at the provider: the first miss within the interval is not fetched again.
    *server.keys.lock().unwrap() = json!({"keys": [ed_jwk("new"), ed_jwk("old")]});
    let rotated = ed_token("new", &claims("b", json!({})));
    assert_eq!(
        verifier.verify(&rotated).await,
        Err(TokenRefusal::UnknownKid)
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), 1);
    tokio::time::sleep(Duration::from_millis(350)).await;
    principal(verifier.verify(&rotated).await);
    assert_eq!(server.hits.load(Ordering::SeqCst), 2);
    // Made-up kids within the interval cost the provider nothing.
    for at in 0..5 {
        let made_up = ed_token(&format!("made-up-{at}"), &claims("c", json!({})));
        assert_eq!(
            verifier.verify(&made_up).await,
            Err(TokenRefusal::UnknownKid)
        );
    }
    assert_eq!(server.hits.load(Ordering::SeqCst), 2);
    // The provider answers garbage: the cached keys stay.
    *server.keys.lock().unwrap() = json!({"not": "a key set"});
    tokio::time::sleep(Duration::from_millis(350)).await;
    let unknown = ed_token("other", &claims("d", json!({})));
    assert_eq!(
        verifier.verify(&unknown).await,
        Err(TokenRefusal::UnknownKid)
    );
    assert_eq!(server.hits.load(Ordering::SeqCst), 3);
    principal(
        verifier
            .verify(&ed_token("old", &claims("e", json!({}))))
            .await,
    );
}

#[tokio::test]
async fn an_unreachable_provider_is_keys_unavailable() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}/jwks", listener.local_addr().unwrap());
    drop(listener);
    let verifier = verifier(&url);
    let token = ed_token("k1", &claims("a", json!({})));
    assert_eq!(
        verifier.verify(&token).await,
        Err(TokenRefusal::KeysUnavailable)
    );
}
