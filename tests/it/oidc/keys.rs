//! The issuer's keys over time, with the real 30 s pacing: a key rotated at the provider (a
//! new `kid`) is picked up without a restart once the pacing allows a fetch; the provider
//! stopped for over a minute refuses nothing signed with a cached key, and a token naming a
//! key toold never saw is refused meanwhile (nothing to fetch it from) without the cached
//! keys being lost. About 70 s.

use std::time::{Duration, Instant};

use reqwest::StatusCode;

use super::{counter, setup};
use crate::auth::get;

/// A little over the daemon's 30 s between two fetches of a key set.
const PAST_PACING: Duration = Duration::from_secs(31);

async fn status(toold: &crate::http::harness::Toold, token: &str) -> StatusCode {
    get(toold, token, "/v1/sessions").await.status
}

#[tokio::test]
async fn a_rotated_key_is_picked_up_and_a_stopped_provider_refuses_no_cached_key() {
    let Some(mut setup) = setup("") else { return };
    let old_token = setup.provider.token("agent-a", "toold.execute").await;
    // Signed with the first key too, and presented only while the provider is down.
    let old_unseen = setup.provider.token("agent-b", "toold.execute").await;
    // The first token makes the daemon fetch the key set (nothing was fetched at start).
    assert_eq!(status(&setup.toold, &old_token).await, StatusCode::OK);
    let fetched_at = Instant::now();

    // Rotated: the provider signs with a new kid, the old key still published after it.
    let new_kid = setup.provider.rotate().await;
    let new_token = setup.provider.token("agent-b", "toold.execute").await;
    let header = jsonwebtoken::decode_header(&new_token).unwrap();
    assert_eq!(header.kid.as_deref(), Some(new_kid.as_str()));
    // Within 30 s of the last fetch the daemon does not ask again: refused as unknown_kid.
    if fetched_at.elapsed() < Duration::from_secs(25) {
        let before = counter(
            &setup.toold,
            "toold_auth_tokens_refused_total",
            "unknown_kid",
        )
        .await;
        assert_eq!(
            status(&setup.toold, &new_token).await,
            StatusCode::UNAUTHORIZED
        );
        let after = counter(
            &setup.toold,
            "toold_auth_tokens_refused_total",
            "unknown_kid",
        )
        .await;
        assert_eq!(after - before, 1.0);
    }
    tokio::time::sleep(PAST_PACING.saturating_sub(fetched_at.elapsed())).await;
    // Past the pacing: fetched again, the new key known, no restart.
    assert_eq!(status(&setup.toold, &new_token).await, StatusCode::OK);
    let refetched_at = Instant::now();

    // The provider down for over a minute: both cached keys still verify.
    let new_unseen = setup.provider.token("observer", "toold.read").await;
    let made_up = setup
        .provider
        .sign(setup.provider.claims("svc", serde_json::json!({})), true)
        .await;
    setup.provider.stop();
    let stopped_at = Instant::now();
    tokio::time::sleep(PAST_PACING.saturating_sub(refetched_at.elapsed())).await;
    // A token with a kid the daemon never saw makes it try the (stopped) provider: refused,
    // and the cached keys stay.
    let unknown = {
        let mut header = jsonwebtoken::Header::new(jsonwebtoken::Algorithm::RS256);
        header.kid = Some("never-published".to_owned());
        let body = made_up.split('.').nth(1).unwrap();
        let head = base64_json(&serde_json::to_value(&header).unwrap());
        format!("{head}.{body}.c2ln")
    };
    assert_eq!(
        status(&setup.toold, &unknown).await,
        StatusCode::UNAUTHORIZED
    );
    tokio::time::sleep(Duration::from_secs(61).saturating_sub(stopped_at.elapsed())).await;
    assert!(stopped_at.elapsed() >= Duration::from_secs(60));
    // Tokens never presented before, one signed by each cached key, verify.
    assert_eq!(status(&setup.toold, &old_unseen).await, StatusCode::OK);
    assert_eq!(status(&setup.toold, &new_unseen).await, StatusCode::OK);
    assert_eq!(status(&setup.toold, &old_token).await, StatusCode::OK);
    // The provider back: a new client's token is accepted as ever.
    setup.provider.start_again();
    let later = setup.provider.token("observer", "toold.read").await;
    assert_eq!(status(&setup.toold, &later).await, StatusCode::OK);
}

fn base64_json(value: &serde_json::Value) -> String {
    use base64::Engine;
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(value.to_string())
}
