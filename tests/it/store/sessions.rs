//! Sessions: insert, read back, state, listing with and without closed ones, closing.

use crate::store::harness::Backend;
use serde_json::json;
use toold::store::StoreError;

use crate::store::harness::{Fixture, now, session, with_sessions};

pub async fn a_session_reads_back_as_inserted(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let record = session("s1");
    fixture.store.insert_session(&record).await.unwrap();
    assert_eq!(fixture.store.get_session("s1").await.unwrap(), Some(record));
}

pub async fn an_unknown_session_is_none(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    assert_eq!(fixture.store.get_session("nope").await.unwrap(), None);
}

pub async fn a_duplicate_session_id_is_a_conflict_naming_it(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let err = fixture
        .store
        .insert_session(&session("s1"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("\"s1\""), "{err}");
}

pub async fn saved_state_replaces_the_old_one(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let state = json!({"cwd": "/work/s1/src", "todos": [{"content": "ship", "status": "pending"}]});
    fixture
        .store
        .save_session_state("s1", &state)
        .await
        .unwrap();
    let back = fixture.store.get_session("s1").await.unwrap().unwrap();
    assert_eq!(back.state, state);
    let newer = json!({"cwd": "/work/s1"});
    fixture
        .store
        .save_session_state("s1", &newer)
        .await
        .unwrap();
    let back = fixture.store.get_session("s1").await.unwrap().unwrap();
    assert_eq!(back.state, newer);
}

pub async fn saving_the_state_of_an_unknown_session_is_not_found(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let err = fixture
        .store
        .save_session_state("ghost", &json!({}))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("\"ghost\""), "{err}");
}

pub async fn listing_is_in_creation_order_and_hides_closed_sessions_unless_asked(backend: Backend) {
    let fixture = with_sessions(backend, &["c", "a", "b"]).await;
    let ids = |sessions: Vec<toold::store::SessionRecord>| {
        sessions.into_iter().map(|s| s.id).collect::<Vec<_>>()
    };
    assert_eq!(
        ids(fixture.store.list_sessions(false).await.unwrap()),
        ["c", "a", "b"]
    );
    assert!(fixture.store.close_session("a").await.unwrap());
    assert_eq!(
        ids(fixture.store.list_sessions(false).await.unwrap()),
        ["c", "b"]
    );
    let all = fixture.store.list_sessions(true).await.unwrap();
    assert_eq!(
        all.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["c", "a", "b"]
    );
    let closed_at = all[1].closed_at.expect("a is closed");
    assert!(
        closed_at >= all[1].created_at && closed_at <= now() + std::time::Duration::from_secs(1)
    );
}

pub async fn closing_is_true_once_then_false_and_false_when_unknown(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    assert!(fixture.store.close_session("s1").await.unwrap());
    assert!(!fixture.store.close_session("s1").await.unwrap());
    assert!(!fixture.store.close_session("ghost").await.unwrap());
    // A closed session keeps its row and can still have its last state saved.
    fixture
        .store
        .save_session_state("s1", &json!({"x": 1}))
        .await
        .unwrap();
    assert!(
        fixture
            .store
            .get_session("s1")
            .await
            .unwrap()
            .unwrap()
            .closed_at
            .is_some()
    );
}
