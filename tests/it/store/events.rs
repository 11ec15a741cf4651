//! Events: appended as numbered by the bus, read back by seq with filters, pruned by age.

use crate::store::harness::Backend;
use std::sync::Arc;
use std::time::Duration;

use toold::event::{Event, EventType};
use toold::store::{EventFilter, StoreError};

use crate::store::harness::{Fixture, event, now};

/// s1: 1 batch:start, 2 tool:pre read_file, 3 tool:post read_file, 4 tool:pre bash;
/// s2: 5 tool:pre read_file, 6 batch:end.
fn sample() -> Vec<Arc<Event>> {
    vec![
        event(1, EventType::BatchStart, "s1", None),
        event(2, EventType::ToolPre, "s1", Some("read_file")),
        event(3, EventType::ToolPost, "s1", Some("read_file")),
        event(4, EventType::ToolPre, "s1", Some("bash")),
        event(5, EventType::ToolPre, "s2", Some("read_file")),
        event(6, EventType::BatchEnd, "s2", None),
    ]
}

fn seqs(events: &[Event]) -> Vec<u64> {
    events.iter().map(|e| e.seq).collect()
}

async fn filled(backend: Backend) -> Fixture {
    let fixture = Fixture::new(backend).await;
    let events = sample();
    // Two appends, as the persister would make them.
    fixture.store.append_events(&events[..2]).await.unwrap();
    fixture.store.append_events(&events[2..]).await.unwrap();
    fixture
}

pub async fn events_read_back_whole_in_seq_order(backend: Backend) {
    let fixture = filled(backend).await;
    let all = fixture
        .store
        .read_events(&EventFilter::default(), 0, 100)
        .await
        .unwrap();
    let expected: Vec<Event> = sample().iter().map(|e| (**e).clone()).collect();
    assert_eq!(all, expected);
}

pub async fn filters_combine_and_after_seq_and_limit_apply(backend: Backend) {
    let fixture = filled(backend).await;
    let read = |filter: EventFilter, after: u64, limit: u32| {
        let store = fixture.store.clone();
        async move { seqs(&store.read_events(&filter, after, limit).await.unwrap()) }
    };
    let session = |id: &str| EventFilter {
        session_id: Some(id.to_owned()),
        ..EventFilter::default()
    };
    assert_eq!(read(session("s1"), 0, 100).await, [1, 2, 3, 4]);
    assert_eq!(read(session("s2"), 0, 100).await, [5, 6]);
    let tool = EventFilter {
        tool: Some("read_file".to_owned()),
        ..EventFilter::default()
    };
    assert_eq!(read(tool.clone(), 0, 100).await, [2, 3, 5]);
    let pre = EventFilter {
        event_type: Some(EventType::ToolPre),
        ..EventFilter::default()
    };
    assert_eq!(read(pre, 0, 100).await, [2, 4, 5]);
    let all_three = EventFilter {
        session_id: Some("s1".to_owned()),
        tool: Some("read_file".to_owned()),
        event_type: Some(EventType::ToolPre),
        ..EventFilter::default()
    };
    assert_eq!(read(all_three, 0, 100).await, [2]);
    // A session's children's events go with its own (a child session's, relayed).
    let with_child = EventFilter {
        session_id: Some("s2".to_owned()),
        also_sessions: vec!["s1".to_owned(), "ghost".to_owned()],
        tool: Some("read_file".to_owned()),
        ..EventFilter::default()
    };
    assert_eq!(read(with_child.clone(), 0, 100).await, [2, 3, 5]);
    assert_eq!(read(with_child, 2, 2).await, [3, 5]);
    assert_eq!(read(EventFilter::default(), 3, 100).await, [4, 5, 6]);
    assert_eq!(read(EventFilter::default(), 0, 2).await, [1, 2]);
    assert_eq!(read(tool, 2, 1).await, [3]);
    assert_eq!(read(EventFilter::default(), 0, 0).await, Vec::<u64>::new());
    assert_eq!(read(EventFilter::default(), 6, 10).await, Vec::<u64>::new());
    assert_eq!(
        read(EventFilter::default(), u64::MAX, 10).await,
        Vec::<u64>::new()
    );
    assert_eq!(read(session("ghost"), 0, 10).await, Vec::<u64>::new());
}

pub async fn the_store_filter_agrees_with_event_filter_matches(backend: Backend) {
    let fixture = filled(backend).await;
    let filters = [
        EventFilter {
            session_id: Some("s2".to_owned()),
            ..EventFilter::default()
        },
        EventFilter {
            tool: Some("bash".to_owned()),
            ..EventFilter::default()
        },
        EventFilter {
            event_type: Some(EventType::BatchEnd),
            ..EventFilter::default()
        },
        EventFilter {
            session_id: Some("s1".to_owned()),
            also_sessions: vec!["s2".to_owned()],
            event_type: Some(EventType::ToolPre),
            ..EventFilter::default()
        },
    ];
    for filter in filters {
        let stored = fixture.store.read_events(&filter, 0, 100).await.unwrap();
        let matching: Vec<Event> = sample()
            .iter()
            .filter(|e| filter.matches(e))
            .map(|e| (**e).clone())
            .collect();
        assert_eq!(stored, matching, "{filter:?}");
    }
}

pub async fn the_last_seq_is_zero_when_empty_then_the_highest(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    assert_eq!(fixture.store.last_event_seq().await.unwrap(), 0);
    fixture.store.append_events(&sample()).await.unwrap();
    assert_eq!(fixture.store.last_event_seq().await.unwrap(), 6);
    fixture.store.append_events(&[]).await.unwrap();
    assert_eq!(fixture.store.last_event_seq().await.unwrap(), 6);
}

pub async fn a_stored_seq_is_a_conflict_and_the_append_stores_nothing(backend: Backend) {
    let fixture = filled(backend).await;
    let batch = [
        event(7, EventType::ToolQueued, "s1", Some("bash")),
        event(3, EventType::ToolPost, "s1", None),
    ];
    let err = fixture.store.append_events(&batch).await.unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("seq 3"), "{err}");
    assert_eq!(
        fixture.store.last_event_seq().await.unwrap(),
        6,
        "all or none"
    );
}

pub async fn pruning_every_event_keeps_the_newest_so_seqs_go_on(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let mut aged = sample();
    for event in &mut aged {
        Arc::make_mut(event).ts = now() - Duration::from_secs(3600);
    }
    fixture.store.append_events(&aged).await.unwrap();
    let pruned = fixture.store.prune_events(now()).await.unwrap();
    assert_eq!(pruned, 5);
    assert_eq!(fixture.store.last_event_seq().await.unwrap(), 6);
    let left = fixture
        .store
        .read_events(&EventFilter::default(), 0, 100)
        .await
        .unwrap();
    assert_eq!(seqs(&left), [6]);
    assert_eq!(fixture.store.prune_events(now()).await.unwrap(), 0);
}

pub async fn pruning_more_than_a_statements_worth_deletes_every_old_event(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let chunk = toold::store::PRUNE_CHUNK_EVENTS;
    let old = 2 * chunk + 7;
    let events: Vec<Arc<Event>> = (1..=old + 2)
        .map(|seq| {
            let mut made = event(seq, EventType::ToolPre, "s1", Some("read_file"));
            Arc::make_mut(&mut made).ts = if seq <= old {
                now() - Duration::from_secs(3600)
            } else {
                now()
            };
            made
        })
        .collect();
    fixture.store.append_events(&events).await.unwrap();
    let pruned = fixture
        .store
        .prune_events(now() - Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(pruned, old);
    let left = fixture
        .store
        .read_events(&EventFilter::default(), 0, 100)
        .await
        .unwrap();
    assert_eq!(seqs(&left), [old + 1, old + 2]);
}

pub async fn pruning_deletes_events_older_than_the_cutoff(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let old = now() - Duration::from_secs(3600);
    let mut aged = sample();
    for (n, event) in aged.iter_mut().enumerate() {
        Arc::make_mut(event).ts = if n < 4 { old } else { now() };
    }
    fixture.store.append_events(&aged).await.unwrap();
    let pruned = fixture
        .store
        .prune_events(now() - Duration::from_secs(60))
        .await
        .unwrap();
    assert_eq!(pruned, 4);
    let left = fixture
        .store
        .read_events(&EventFilter::default(), 0, 100)
        .await
        .unwrap();
    assert_eq!(seqs(&left), [5, 6]);
    assert_eq!(fixture.store.prune_events(old).await.unwrap(), 0);
}
