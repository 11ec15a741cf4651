//! Several daemons on one Postgres database (several store instances on one schema): seqs
//! unique and gap-free in commit order under concurrent writers, readers that never skip one,
//! wake-ups across instances, and exactly-once approvals and claims between instances.

use std::collections::HashSet;
use std::sync::Arc;
use std::time::Duration;

use toold::event::EventType;
use toold::store::{BatchClaim, EventFilter, Store};

use crate::store::harness::{Backend, Fixture, approval, batch, event, now, postgres_url, session};

const WRITERS: usize = 3;
const APPENDS: usize = 40;

async fn fleet() -> Option<(Fixture, Vec<Arc<dyn Store>>)> {
    postgres_url()?;
    let fixture = Fixture::new(Backend::Postgres).await;
    let mut stores = vec![fixture.store.clone()];
    for n in 1..WRITERS {
        stores.push(fixture.another(&format!("node-{n}")).await);
    }
    Some((fixture, stores))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writers_get_unique_monotonic_seqs_and_a_reader_misses_none() {
    let Some((_fixture, stores)) = fleet().await else {
        return;
    };
    let reader = stores[0].clone();
    // A reader that polls "after the last seq seen" while the writers append must end up with
    // every event exactly once, in seq order.
    let total = (WRITERS * APPENDS * 3) as u64;
    let reading = tokio::spawn(async move {
        let mut seen = Vec::new();
        let mut last = 0;
        while (seen.len() as u64) < total {
            let page = reader
                .read_events(&EventFilter::default(), last, 1000)
                .await
                .unwrap();
            for event in page {
                assert!(event.seq > last, "seq {} after {last}", event.seq);
                last = event.seq;
                seen.push(event);
            }
            tokio::task::yield_now().await;
        }
        seen
    });
    let writers: Vec<_> = stores
        .iter()
        .enumerate()
        .map(|(w, store)| {
            let store = store.clone();
            tokio::spawn(async move {
                let mut ranges = Vec::new();
                for n in 0..APPENDS {
                    let tool = format!("w{w}-{n}");
                    let drafts: Vec<_> = (0..3)
                        .map(|_| event(0, EventType::ToolProgress, "s1", Some(&tool)))
                        .collect();
                    ranges.push(store.append_events_numbered(&drafts).await.unwrap());
                }
                ranges
            })
        })
        .collect();
    let mut given = HashSet::new();
    for writer in writers {
        let ranges = writer.await.unwrap();
        assert!(
            ranges.windows(2).all(|w| w[0].end <= w[1].start),
            "each writer's seqs grow"
        );
        for range in ranges {
            assert_eq!(range.end - range.start, 3);
            for seq in range {
                assert!(given.insert(seq), "seq {seq} given twice");
            }
        }
    }
    assert_eq!(given, (1..=total).collect::<HashSet<_>>(), "no gaps");
    let seen = tokio::time::timeout(Duration::from_secs(60), reading)
        .await
        .unwrap()
        .unwrap();
    let seqs: Vec<u64> = seen.iter().map(|e| e.seq).collect();
    assert_eq!(seqs, (1..=total).collect::<Vec<_>>());
    // One append's events are consecutive and keep their order.
    for triple in seen.chunks(3) {
        assert!(
            triple.iter().all(|e| e.tool == triple[0].tool),
            "{triple:?}"
        );
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_append_on_one_instance_wakes_the_others() {
    let Some((_fixture, stores)) = fleet().await else {
        return;
    };
    let mut wakeups = stores[1]
        .event_wakeups()
        .expect("a shared store has wake-ups");
    let before = *wakeups.borrow_and_update();
    let range = stores[0]
        .append_events_numbered(&[event(0, EventType::BatchStart, "s1", None)])
        .await
        .unwrap();
    tokio::time::timeout(
        Duration::from_secs(30),
        wakeups.wait_for(|seq| *seq >= range.start),
    )
    .await
    .expect("woken within the guard")
    .unwrap();
    assert!(*wakeups.borrow() > before);
    assert!(stores[2].is_shared());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_and_keyed_claims_resolve_once_across_instances() {
    let Some((_fixture, stores)) = fleet().await else {
        return;
    };
    stores[0].insert_session(&session("s1")).await.unwrap();
    stores[1]
        .insert_approval(&approval("a1", "s1", now()))
        .await
        .unwrap();
    let resolved = futures::future::join_all(stores.iter().enumerate().map(|(n, store)| {
        let store = store.clone();
        async move {
            store
                .resolve_approval("a1", "allow", &format!("person-{n}"))
                .await
                .unwrap()
        }
    }))
    .await;
    assert_eq!(
        resolved.iter().filter(|won| **won).count(),
        1,
        "{resolved:?}"
    );
    let claims = futures::future::join_all(stores.iter().enumerate().map(|(n, store)| {
        let store = store.clone();
        async move {
            store
                .claim_batch(&batch(&format!("b{n}"), "s1", Some("key"), "hash"))
                .await
                .unwrap()
        }
    }))
    .await;
    let new = claims.iter().filter(|c| **c == BatchClaim::New).count();
    assert_eq!(new, 1, "{claims:?}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_result_offloaded_on_one_instance_reads_whole_from_another() {
    let Some((_fixture, stores)) = fleet().await else {
        return;
    };
    let text = crate::store::harness::mixed_text(300_000);
    let stored = stores[0].offload("s1", "c1", &text).await.unwrap();
    let page = stores[1]
        .read(&stored.result_id, 0, u64::MAX)
        .await
        .unwrap();
    assert_eq!(page.total_chars, 300_000);
    assert!(page.content == text, "the whole output, byte for byte");
}
