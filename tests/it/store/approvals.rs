//! Approvals: pending until resolved, resolved exactly once.

use crate::store::harness::Backend;
use std::time::Duration;

use toold::store::StoreError;

use crate::store::harness::{approval, now, with_sessions};

pub async fn pending_approvals_are_the_sessions_unresolved_ones_oldest_first(backend: Backend) {
    let fixture = with_sessions(backend, &["s1", "s2"]).await;
    let t0 = now();
    let later = approval("a2", "s1", t0 + Duration::from_millis(5));
    let earlier = approval("a1", "s1", t0);
    let elsewhere = approval("a3", "s2", t0);
    for record in [&later, &earlier, &elsewhere] {
        fixture.store.insert_approval(record).await.unwrap();
    }
    assert_eq!(
        fixture.store.pending_approvals("s1").await.unwrap(),
        [earlier, later.clone()]
    );
    assert!(
        fixture
            .store
            .resolve_approval("a1", "allow", "alice")
            .await
            .unwrap()
    );
    assert_eq!(
        fixture.store.pending_approvals("s1").await.unwrap(),
        [later]
    );
    assert!(
        fixture
            .store
            .pending_approvals("ghost")
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn an_approval_resolves_once_and_an_unknown_one_not_at_all(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .store
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap();
    assert!(
        fixture
            .store
            .resolve_approval("a1", "deny", "bob")
            .await
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .resolve_approval("a1", "allow", "alice")
            .await
            .unwrap()
    );
    assert!(
        !fixture
            .store
            .resolve_approval("ghost", "allow", "alice")
            .await
            .unwrap()
    );
}

pub async fn of_concurrent_resolutions_exactly_one_wins(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    for round in 0..20 {
        let id = format!("a{round}");
        fixture
            .store
            .insert_approval(&approval(&id, "s1", now()))
            .await
            .unwrap();
        let (allow, deny) = tokio::join!(
            fixture.store.resolve_approval(&id, "allow", "alice"),
            fixture.store.resolve_approval(&id, "deny", "bob"),
        );
        let wins = [allow.unwrap(), deny.unwrap()];
        assert_eq!(
            wins.iter().filter(|won| **won).count(),
            1,
            "round {round}: {wins:?}"
        );
    }
    assert!(
        fixture
            .store
            .pending_approvals("s1")
            .await
            .unwrap()
            .is_empty()
    );
}

pub async fn a_decision_other_than_allow_or_deny_is_invalid(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .store
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap();
    let err = fixture
        .store
        .resolve_approval("a1", "maybe", "carol")
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Invalid(_)), "{err:?}");
    assert!(err.to_string().contains("\"maybe\""), "{err}");
    assert_eq!(
        fixture.store.pending_approvals("s1").await.unwrap().len(),
        1,
        "still pending"
    );
}

pub async fn an_approval_for_an_unknown_session_is_not_found_and_a_duplicate_id_a_conflict(
    backend: Backend,
) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let err = fixture
        .store
        .insert_approval(&approval("a1", "ghost", now()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("\"ghost\""), "{err}");
    fixture
        .store
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap();
    let err = fixture
        .store
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("\"a1\""), "{err}");
}
