//! The audit log: rows through `AuditSink::record` (group-committed by the SQLite store),
//! read back by `list_calls` in cursor pages.

use crate::store::harness::Backend;
use std::collections::HashSet;

use toold::store::CallRow;

use crate::store::harness::{Fixture, NODE, audit_record, full_audit_record};

/// Every row of a session, page by page.
async fn all_rows(fixture: &Fixture, session_id: &str, page: u32) -> Vec<CallRow> {
    let mut rows = Vec::new();
    let mut after = None;
    loop {
        let got = fixture
            .store
            .list_calls(session_id, after, page)
            .await
            .unwrap();
        assert!(got.rows.len() <= page as usize);
        rows.extend(got.rows);
        match got.next_cursor {
            Some(cursor) => after = Some(cursor),
            None => return rows,
        }
    }
}

pub async fn a_row_reads_back_with_every_field_and_the_node(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let plain = audit_record("s1", "b1", "c1", 0);
    let full = full_audit_record("s1", "c2");
    let unresolved = toold::dispatch::AuditRecord {
        tool: None,
        decision: None,
        requested_name: "reed_file".to_owned(),
        error_kind: Some(toold::tool::ErrorKind::UnknownTool),
        is_error: true,
        ..audit_record("s1", "b1", "c3", 2)
    };
    for record in [&plain, &full, &unresolved] {
        fixture.store.record(record.clone()).await.unwrap();
    }
    let page = fixture.store.list_calls("s1", None, 10).await.unwrap();
    assert_eq!(page.next_cursor, None);
    let records: Vec<_> = page.rows.iter().map(|row| row.record.clone()).collect();
    assert_eq!(records, [plain, full, unresolved]);
    assert!(page.rows.iter().all(|row| row.node == NODE));
    assert!(page.rows.windows(2).all(|w| w[0].cursor < w[1].cursor));
}

pub async fn a_thousand_concurrent_records_from_fifty_tasks_are_durable_and_listed_once(
    backend: Backend,
) {
    let mut fixture = Fixture::new(backend).await;
    let mut tasks = Vec::new();
    for task in 0..50 {
        let store = fixture.store.clone();
        tasks.push(tokio::spawn(async move {
            for n in 0..20 {
                let call_id = format!("t{task}-c{n}");
                store
                    .record(audit_record("s1", &format!("b{task}"), &call_id, n))
                    .await
                    .unwrap();
            }
        }));
    }
    for task in tasks {
        task.await.unwrap();
    }
    // Every `record` returned, so every row must survive the store going away uncleanly.
    fixture.reopen().await;
    let rows = all_rows(&fixture, "s1", 97).await;
    assert_eq!(rows.len(), 1000);
    let ids: HashSet<_> = rows.iter().map(|row| row.record.call_id.clone()).collect();
    assert_eq!(ids.len(), 1000, "each call listed exactly once");
    assert!(rows.windows(2).all(|w| w[0].cursor < w[1].cursor));
    // Within a task, rows are in the order it recorded them.
    let task_seven: Vec<_> = rows
        .iter()
        .filter(|r| r.record.batch_id == "b7")
        .map(|r| r.record.index)
        .collect();
    assert_eq!(task_seven, (0..20).collect::<Vec<_>>());
}

pub async fn pages_follow_the_cursor_and_skip_other_sessions(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    for n in 0..25 {
        fixture
            .store
            .record(audit_record("s1", "b", &format!("c{n}"), n))
            .await
            .unwrap();
        fixture
            .store
            .record(audit_record("s2", "b", &format!("x{n}"), n))
            .await
            .unwrap();
    }
    let first = fixture.store.list_calls("s1", None, 10).await.unwrap();
    assert_eq!(first.rows.len(), 10);
    assert_eq!(first.next_cursor, Some(first.rows[9].cursor));
    let second = fixture
        .store
        .list_calls("s1", first.next_cursor, 10)
        .await
        .unwrap();
    let third = fixture
        .store
        .list_calls("s1", second.next_cursor, 10)
        .await
        .unwrap();
    assert_eq!(third.rows.len(), 5);
    assert_eq!(third.next_cursor, None, "the last page says so");
    let indexes: Vec<_> = [first, second, third]
        .into_iter()
        .flat_map(|page| page.rows)
        .map(|row| {
            assert_eq!(row.record.session_id, "s1");
            row.record.index
        })
        .collect();
    assert_eq!(indexes, (0..25).collect::<Vec<_>>());
    // Exactly a page's worth left: the page is full and the next one empty.
    let all = all_rows(&fixture, "s1", 25).await;
    assert_eq!(all.len(), 25);
    let past = fixture
        .store
        .list_calls("s1", Some(all[24].cursor), 10)
        .await
        .unwrap();
    assert!(past.rows.is_empty() && past.next_cursor.is_none());
}

pub async fn a_zero_limit_gives_an_empty_page_that_says_whether_rows_remain(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    fixture
        .store
        .record(audit_record("s1", "b", "c1", 0))
        .await
        .unwrap();
    let page = fixture.store.list_calls("s1", None, 0).await.unwrap();
    assert!(page.rows.is_empty());
    assert!(page.next_cursor.is_some());
    let empty = fixture.store.list_calls("ghost", None, 0).await.unwrap();
    assert!(empty.rows.is_empty() && empty.next_cursor.is_none());
}

pub async fn an_unknown_session_has_no_calls(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let page = fixture.store.list_calls("ghost", None, 10).await.unwrap();
    assert!(page.rows.is_empty());
    assert_eq!(page.next_cursor, None);
}

pub async fn odd_text_and_measured_durations_round_trip_exactly(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let mut expected = Vec::new();
    // Durations as the audit phase measures them (`as_secs_f64() * 1000.0`): full mantissas.
    let mut seed: u64 = 0x9E37_79B9_7F4A_7C15;
    for n in 0..200 {
        seed = seed.wrapping_mul(6_364_136_223_846_793_005).wrapping_add(1);
        let nanos = seed >> 30;
        let record = toold::dispatch::AuditRecord {
            requested_name: format!("n\u{0}ul \"quoted\" \\ 𝄞 {n}"),
            input: serde_json::json!({"text": "tab\tnul\u{0}é", "big": u64::MAX, "neg": -1e-300}),
            duration_ms: std::time::Duration::from_nanos(nanos).as_secs_f64() * 1000.0,
            ..audit_record("s1", "b1", &format!("c{n}"), n)
        };
        fixture.store.record(record.clone()).await.unwrap();
        expected.push(record);
    }
    let rows = all_rows(&fixture, "s1", 1000).await;
    let got: Vec<_> = rows.into_iter().map(|row| row.record).collect();
    for (got, expected) in got.iter().zip(&expected) {
        assert_eq!(got, expected);
        assert_eq!(got.duration_ms.to_bits(), expected.duration_ms.to_bits());
    }
    assert_eq!(got.len(), expected.len());
}

pub async fn a_burst_of_1500_simultaneous_records_is_stored_whole(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let barrier = std::sync::Arc::new(tokio::sync::Barrier::new(1500));
    let tasks: Vec<_> = (0..1500)
        .map(|n| {
            let store = fixture.store.clone();
            let barrier = barrier.clone();
            tokio::spawn(async move {
                barrier.wait().await;
                store
                    .record(audit_record("s1", "burst", &format!("c{n}"), n))
                    .await
            })
        })
        .collect();
    for task in tasks {
        task.await.unwrap().unwrap();
    }
    let rows = all_rows(&fixture, "s1", 1000).await;
    let ids: HashSet<_> = rows.iter().map(|row| row.record.index).collect();
    assert_eq!((rows.len(), ids.len()), (1500, 1500));
}

pub async fn a_batchs_rows_read_back_alone_in_order(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let mut recorded = Vec::new();
    for (session, batch, call, index) in [
        ("s1", "b1", "c0", 0),
        ("s1", "b2", "c0", 0),
        ("s1", "b1", "c1", 1),
        ("s2", "b1", "x0", 0),
        ("s1", "b1", "c2", 2),
    ] {
        let record = audit_record(session, batch, call, index);
        fixture.store.record(record.clone()).await.unwrap();
        recorded.push(record);
    }
    let rows = fixture.store.batch_calls("s1", "b1").await.unwrap();
    let ids: Vec<_> = rows
        .iter()
        .map(|row| (row.record.batch_id.as_str(), row.record.call_id.as_str()))
        .collect();
    assert_eq!(ids, [("b1", "c0"), ("b1", "c1"), ("b1", "c2")]);
    assert!(rows.windows(2).all(|w| w[0].cursor < w[1].cursor));
    assert_eq!(rows[0].record, recorded[0], "every field read back");
    // Another session's batch of the same id, and an unknown batch, have none here.
    let other = fixture.store.batch_calls("s2", "b1").await.unwrap();
    assert_eq!(other.len(), 1);
    assert!(
        fixture
            .store
            .batch_calls("s1", "b9")
            .await
            .unwrap()
            .is_empty()
    );
    assert!(
        fixture
            .store
            .batch_calls("s9", "b1")
            .await
            .unwrap()
            .is_empty()
    );
}
