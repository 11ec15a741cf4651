//! A restart: the store dropped without a clean shutdown and the same database reopened keeps
//! everything written before (sessions and their state, calls, events, results, batches,
//! approvals), and the event seq continues.

use crate::store::harness::Backend;
use serde_json::json;
use toold::event::EventType;
use toold::store::{BatchClaim, EventFilter};

use crate::store::harness::{
    Fixture, approval, audit_record, batch, event, mixed_text, now, session,
};

pub async fn reopening_the_database_keeps_everything(backend: Backend) {
    let mut fixture = Fixture::new(backend).await;
    let store = fixture.store.clone();
    let open = session("s1");
    let mut closed = session("s2");
    closed.created_at += std::time::Duration::from_millis(1);
    store.insert_session(&open).await.unwrap();
    store.insert_session(&closed).await.unwrap();
    store.close_session("s2").await.unwrap();
    store
        .save_session_state("s1", &json!({"cwd": "/work/s1/src"}))
        .await
        .unwrap();
    for n in 0..10 {
        store
            .record(audit_record("s1", "b1", &format!("c{n}"), n))
            .await
            .unwrap();
    }
    let text = mixed_text(150_000);
    let result = store.offload("s1", "c9", &text).await.unwrap();
    store
        .append_events(&[
            event(1, EventType::BatchStart, "s1", None),
            event(2, EventType::BatchEnd, "s1", None),
        ])
        .await
        .unwrap();
    store
        .claim_batch(&batch("b1", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    store.complete_batch("b1", &[]).await.unwrap();
    store
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap();
    drop(store);

    fixture.reopen().await;
    let store = fixture.store.clone();
    let sessions = store.list_sessions(false).await.unwrap();
    assert_eq!(sessions.len(), 1, "s2 stays closed");
    assert_eq!(sessions[0].state, json!({"cwd": "/work/s1/src"}));
    assert_eq!(sessions[0].options, open.options);
    assert_eq!(store.list_sessions(true).await.unwrap().len(), 2);
    let calls = store.list_calls("s1", None, 100).await.unwrap();
    assert_eq!(calls.rows.len(), 10);
    let page = store.read(&result.result_id, 0, u64::MAX).await.unwrap();
    assert_eq!((page.total_chars, page.content == text), (150_000, true));
    assert_eq!(store.last_event_seq().await.unwrap(), 2);
    assert_eq!(
        store
            .read_events(&EventFilter::default(), 0, 10)
            .await
            .unwrap()
            .len(),
        2
    );
    let retry = store
        .claim_batch(&batch("b2", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    assert!(
        matches!(retry, BatchClaim::Existing(ref b) if b.batch_id == "b1"),
        "{retry:?}"
    );
    assert_eq!(store.pending_approvals("s1").await.unwrap().len(), 1);
    // New rows continue after the old ones.
    store
        .record(audit_record("s1", "b3", "c10", 0))
        .await
        .unwrap();
    let after = store
        .list_calls("s1", Some(calls.rows[9].cursor), 10)
        .await
        .unwrap();
    assert_eq!(after.rows.len(), 1);
    assert_eq!(after.rows[0].record.call_id, "c10");
}
