//! Daemons sharing a store: heartbeats, claims on silent nodes, session adoption, interrupted
//! calls, and events numbered by the store.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use toold::event::{Event, EventType};
use toold::store::{EventFilter, NodeRecord};

use crate::store::harness::Backend;
use crate::store::harness::{Fixture, audit_record, event, now, with_sessions};

fn node(id: &str, heartbeat_ago: Duration) -> NodeRecord {
    NodeRecord {
        id: id.to_owned(),
        address: format!("http://{id}.example:7070"),
        started_at: now() - Duration::from_secs(3600),
        heartbeat_at: now() - heartbeat_ago,
    }
}

pub async fn a_heartbeat_records_the_node_and_refreshes_it(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = &fixture.store;
    assert_eq!(store.get_node("node-a").await.unwrap(), None);
    let first = node("node-a", Duration::from_secs(60));
    store.heartbeat(&first).await.unwrap();
    assert_eq!(store.get_node("node-a").await.unwrap(), Some(first));
    let again = NodeRecord {
        address: "http://10.0.0.9:7070".into(),
        ..node("node-a", Duration::ZERO)
    };
    store.heartbeat(&again).await.unwrap();
    store
        .heartbeat(&node("node-b", Duration::ZERO))
        .await
        .unwrap();
    assert_eq!(store.get_node("node-a").await.unwrap(), Some(again));
    let ids: Vec<String> = store
        .list_nodes()
        .await
        .unwrap()
        .into_iter()
        .map(|n| n.id)
        .collect();
    assert_eq!(ids, ["node-a", "node-b"]);
}

pub async fn a_silent_node_is_claimed_once_until_it_beats_again(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = &fixture.store;
    store
        .heartbeat(&node("node-a", Duration::from_secs(60)))
        .await
        .unwrap();
    let cutoff = now() - Duration::from_secs(30);
    // Not silent long enough for an older cutoff; unknown nodes are never claimed.
    assert!(
        !store
            .claim_silent_node("node-a", now() - Duration::from_secs(120), "node-b")
            .await
            .unwrap()
    );
    assert!(
        !store
            .claim_silent_node("ghost", cutoff, "node-b")
            .await
            .unwrap()
    );
    let claims: Vec<_> = futures::future::join_all((0..8).map(|n| {
        let store = store.clone();
        async move {
            store
                .claim_silent_node("node-a", cutoff, &format!("node-{n}"))
                .await
                .unwrap()
        }
    }))
    .await;
    assert_eq!(claims.iter().filter(|won| **won).count(), 1, "{claims:?}");
    // Alive again: the claim is gone, and a fresh heartbeat is not silent.
    store
        .heartbeat(&node("node-a", Duration::ZERO))
        .await
        .unwrap();
    assert!(
        !store
            .claim_silent_node("node-a", cutoff, "node-b")
            .await
            .unwrap()
    );
    store
        .heartbeat(&node("node-a", Duration::from_secs(60)))
        .await
        .unwrap();
    assert!(
        store
            .claim_silent_node("node-a", cutoff, "node-b")
            .await
            .unwrap()
    );
}

pub async fn adoption_moves_an_open_session_once(backend: Backend) {
    let fixture = with_sessions(backend, &["s1", "s2"]).await;
    let store = &fixture.store;
    let owner = store.get_session("s1").await.unwrap().unwrap().owner;
    let adopted: Vec<_> = futures::future::join_all((0..6).map(|n| {
        let (store, owner) = (store.clone(), owner.clone());
        async move {
            store
                .adopt_session("s1", &owner, &format!("node-{n}"))
                .await
                .unwrap()
        }
    }))
    .await;
    assert_eq!(adopted.iter().filter(|won| **won).count(), 1, "{adopted:?}");
    let new_owner = store.get_session("s1").await.unwrap().unwrap().owner;
    assert_ne!(new_owner, owner);
    // Closed, unknown, or owned by someone else: nothing moves.
    store.close_session("s2").await.unwrap();
    assert!(!store.adopt_session("s2", &owner, "node-x").await.unwrap());
    assert!(
        !store
            .adopt_session("ghost", &owner, "node-x")
            .await
            .unwrap()
    );
    assert!(!store.adopt_session("s1", &owner, "node-x").await.unwrap());
    assert_eq!(
        store.get_session("s1").await.unwrap().unwrap().owner,
        new_owner
    );
}

fn call_event(seq: u64, event_type: EventType, call: &str, data: serde_json::Value) -> Arc<Event> {
    let mut event = (*event(seq, event_type, "s1", Some("Read"))).clone();
    event.call_id = Some(Arc::from(call));
    event.data = data.into();
    Arc::new(event)
}

pub async fn queued_calls_without_an_audit_row_are_marked_interrupted_once(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let store = &fixture.store;
    // c0 finished (audit row), c1 got as far as tool:pre, c2 only queued ("\0" in its id).
    store
        .append_events(&[
            call_event(1, EventType::ToolQueued, "c0", json!({"index": 0})),
            call_event(2, EventType::ToolQueued, "c1", json!({"index": 1})),
            call_event(3, EventType::ToolQueued, "c\0 2", json!({"index": 2})),
            call_event(
                4,
                EventType::ToolPre,
                "c1",
                json!({"input": {"path": "a.txt"}}),
            ),
        ])
        .await
        .unwrap();
    store
        .record(audit_record("s1", "b1", "c0", 0))
        .await
        .unwrap();
    assert_eq!(store.mark_interrupted_calls("s1").await.unwrap(), 2);
    assert_eq!(store.mark_interrupted_calls("s1").await.unwrap(), 0, "once");
    assert_eq!(store.mark_interrupted_calls("ghost").await.unwrap(), 0);
    let rows = store.list_calls("s1", None, 10).await.unwrap().rows;
    assert_eq!(rows.len(), 3);
    assert!(!rows[0].interrupted);
    let (c1, c2) = (&rows[1], &rows[2]);
    for row in [c1, c2] {
        assert!(row.interrupted && row.record.is_error);
        assert_eq!(
            row.record.error_kind,
            Some(toold::tool::ErrorKind::Cancelled)
        );
        assert_eq!(row.record.batch_id, "b1");
        assert_eq!(
            row.node,
            crate::store::harness::NODE,
            "the session's owner ran it"
        );
    }
    assert_eq!((c1.record.call_id.as_str(), c1.record.index), ("c1", 1));
    assert_eq!(c1.record.input, json!({"path": "a.txt"}));
    assert_eq!(c1.record.tool.as_deref(), Some("Read"));
    assert_eq!((c2.record.call_id.as_str(), c2.record.index), ("c\0 2", 2));
    assert_eq!(
        (c2.record.input.clone(), c2.record.tool.clone()),
        (json!(null), None)
    );
    assert_eq!(c2.record.requested_name, "Read");
}

pub async fn numbered_appends_continue_after_every_stored_seq(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = &fixture.store;
    store
        .append_events(&[
            event(1, EventType::BatchStart, "s1", None),
            event(2, EventType::BatchEnd, "s1", None),
        ])
        .await
        .unwrap();
    // The seqs the events carry are ignored.
    let drafts = [
        event(99, EventType::ToolPre, "s1", Some("bash")),
        event(0, EventType::ToolPost, "s1", Some("bash")),
    ];
    assert_eq!(store.append_events_numbered(&drafts).await.unwrap(), 3..5);
    assert_eq!(
        store.append_events_numbered(&drafts[..1]).await.unwrap(),
        5..6
    );
    assert_eq!(store.last_event_seq().await.unwrap(), 5);
    let read = store
        .read_events(&EventFilter::default(), 2, 10)
        .await
        .unwrap();
    let seqs: Vec<u64> = read.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, [3, 4, 5]);
    assert_eq!(read[0].event_type, EventType::ToolPre);
    assert_eq!(read[0].data, json!({"seq": 99}));
    assert!(store.append_events_numbered(&[]).await.unwrap().is_empty());
}
