//! Every bad token is a 401 with the RFC 6750 challenge (`error="invalid_token"` and the
//! metadata's URL), on `/v1` and `/mcp` alike, and counted in `/metrics` under its reason. The
//! tokens are signed by the provider itself (its current key, through the fixture's
//! `/test/sign`) with claims made wrong one at a time, so each is refused for that one claim.

use jsonwebtoken::{Algorithm, EncodingKey, Header, encode};
use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{counter, setup};
use crate::auth::call;

const REFUSED: &str = "toold_auth_tokens_refused_total";

fn unix_now() -> u64 {
    std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .unwrap()
        .as_secs()
}

/// `alg: none`: the good claims, no signature.
fn unsigned(claims: &serde_json::Value) -> String {
    use base64::Engine;
    let part = |v: serde_json::Value| {
        base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(v.to_string())
    };
    format!(
        "{}.{}.",
        part(json!({"alg": "none", "typ": "JWT"})),
        part(claims.clone())
    )
}

#[tokio::test]
async fn each_bad_token_is_a_401_with_the_rfc_6750_challenge_counted_by_reason() {
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let now = unix_now();
    let good = provider.claims("svc", json!({}));
    let valid = provider.sign(good.clone(), false).await;
    // The provider's own public key as an HMAC secret: the classic algorithm confusion.
    let pem = provider.public_pem().await;
    let mut hs_header = Header::new(Algorithm::HS256);
    hs_header.kid = jsonwebtoken::decode_header(&valid).unwrap().kid;
    let confused = encode(
        &hs_header,
        &good,
        &EncodingKey::from_secret(pem.as_bytes()).unwrap(),
    )
    .unwrap();
    // Garbled in transit: part of the payload is no longer base64url.
    let payload_at = valid.find('.').unwrap() + 1;
    // Cut inside its payload (as a copy-paste that lost its end): no signature part left.
    // (Half its length is not that: an RS256 signature is a third or more of a token, so
    // half may fall in the signature, which is then a bad signature, not a malformed token.)
    let signature_at = valid.rfind('.').unwrap();
    let truncated = valid[..payload_at + (signature_at - payload_at) / 2].to_owned();
    let garbled = format!(
        "{}%$#@!*&^{}",
        &valid[..payload_at],
        &valid[payload_at + 8..]
    );
    let cases = [
        (
            "expired",
            provider
                .sign(
                    provider.claims("svc", json!({"exp": now - 120, "iat": now - 900})),
                    false,
                )
                .await,
            "expired",
        ),
        (
            "not yet valid",
            provider
                .sign(provider.claims("svc", json!({"nbf": now + 300})), false)
                .await,
            "not_yet_valid",
        ),
        (
            "wrong issuer",
            provider
                .sign(
                    provider.claims("svc", json!({"iss": "http://127.0.0.1:1"})),
                    false,
                )
                .await,
            "wrong_issuer",
        ),
        (
            "wrong audience",
            provider
                .sign(
                    provider.claims("svc", json!({"aud": "http://127.0.0.1:1/mcp"})),
                    false,
                )
                .await,
            "wrong_audience",
        ),
        (
            "a key not in the set",
            provider.sign(good.clone(), true).await,
            "bad_signature",
        ),
        ("alg none", unsigned(&good), "unsupported_algorithm"),
        (
            "HS256 with the public key",
            confused,
            "unsupported_algorithm",
        ),
        ("truncated", truncated, "malformed"),
        ("garbled", garbled, "malformed"),
    ];
    for (what, token, reason) in cases {
        let before = counter(toold, REFUSED, &format!("reason=\"{reason}\"")).await;
        for (method, path) in [(Method::GET, "/v1/sessions"), (Method::POST, "/mcp")] {
            let reply = call(toold, &token, method.clone(), path, Some(json!({}))).await;
            assert_eq!(
                reply.status,
                StatusCode::UNAUTHORIZED,
                "{what} on {path}: {}",
                reply.body
            );
            assert_eq!(reply.body["error"]["code"], "unauthenticated", "{what}");
            let header = reply.headers["www-authenticate"]
                .to_str()
                .unwrap()
                .to_owned();
            assert!(header.starts_with("Bearer "), "{what}: {header}");
            assert!(
                header.contains("error=\"invalid_token\""),
                "{what}: {header}"
            );
            assert!(
                header.contains("resource_metadata=\"")
                    && header.contains("/.well-known/oauth-protected-resource/mcp\""),
                "{what}: {header}"
            );
            // The refusal tells why, and never echoes the token.
            let text = reply.body.to_string();
            assert!(!text.contains(&token), "{what}: the token came back");
        }
        let after = counter(toold, REFUSED, &format!("reason=\"{reason}\"")).await;
        let (_, metrics) = toold.get_text("/metrics").await;
        let refused: Vec<&str> = metrics.lines().filter(|l| l.starts_with(REFUSED)).collect();
        assert_eq!(
            after - before,
            2.0,
            "{what}: counted under {reason}: {refused:?}"
        );
    }
    // The good token passes and is counted as accepted.
    let reply = call(toold, &valid, Method::GET, "/v1/sessions", None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert!(counter(toold, "toold_auth_tokens_accepted_total", "kind=\"oidc\"").await >= 1.0);
}
