//! The audit journal against a real SQLite store: replay, torn and corrupt records, rotation,
//! backpressure, and marking interrupted calls beside journalled rows.

use std::time::SystemTime;

use serde_json::json;

use super::*;
use crate::dispatch::{AuditRecord, AuditSink};
use crate::store::sqlite::SqliteStore;
use crate::store::{AuditStore, CallRow, NodeStore, StoreLifecycle};
use crate::tool::ErrorKind;

fn record(batch: &str, call: &str) -> AuditRecord {
    AuditRecord {
        session_id: "s1".to_owned(),
        batch_id: batch.to_owned(),
        call_id: call.to_owned(),
        index: 0,
        requested_name: "read_file".to_owned(),
        tool: Some("read_file".to_owned()),
        input: json!({"file_path": "a.txt", "padding": "x".repeat(200)}),
        decision: None,
        is_error: true,
        error_kind: Some(ErrorKind::Execution),
        output_chars: 12,
        offloaded: None,
        started_at: SystemTime::now(),
        duration_ms: 0.5,
        cancelled_by: None,
        trace_id: None,
        principal: None,
        isolation: None,
    }
}

async fn calls(store: &SqliteStore) -> Vec<CallRow> {
    let page = store.list_calls("s1", None, 100_000).await.unwrap();
    assert_eq!(page.next_cursor, None);
    page.rows
}

/// The segments beside the database, by what follows `toold.db.audit.` (`<journal>.<n>`).
fn segments(dir: &Path) -> Vec<String> {
    list_segments(&dir.join("toold.db.audit."))
        .unwrap()
        .into_iter()
        .map(|(name, _)| match name {
            SegmentName::Unkeyed(generation) => generation.to_string(),
            SegmentName::Keyed {
                journal,
                generation,
            } => format!("{journal}.{generation}"),
        })
        .collect()
}

const NONE: [String; 0] = [];

/// The key of row `number` of journal `journal`.
fn key(journal: i64, number: i64) -> i64 {
    (journal << 32) | number
}

/// Journal records of batch `b1`'s calls under the given keys (or, for a segment of the
/// format before keys, cursors), as an append writes them.
fn journal(calls: &[(i64, &str)]) -> Vec<u8> {
    let mut bytes = Vec::new();
    for (key, call) in calls {
        let row = AuditRow::new(record("b1", call)).unwrap();
        let payload = serde_json::to_vec(&("node-a", &row)).unwrap();
        frame(&mut bytes, *key, &payload);
    }
    bytes
}

async fn open(dir: &Path) -> SqliteStore {
    SqliteStore::open(dir.join("toold.db").to_str().unwrap(), "node-a")
        .await
        .unwrap()
}

#[tokio::test]
async fn a_recorded_row_is_listed_at_once_and_a_clean_close_leaves_no_journal() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.record(record("b1", "c1")).await.unwrap();
    store
        .record_many(vec![record("b2", "c1"), record("b2", "c2")])
        .await
        .unwrap();
    let rows = calls(&store).await;
    let ids: Vec<_> = rows
        .iter()
        .map(|row| (row.record.batch_id.as_str(), row.cursor))
        .collect();
    assert_eq!(ids, [("b1", 1), ("b2", 2), ("b2", 3)]);
    assert_eq!(rows[0].record.error_kind, Some(ErrorKind::Execution));
    assert_eq!(segments(dir.path()), ["1.1"]);
    store.close().await;
    assert_eq!(segments(dir.path()), NONE);
    assert!(store.record(record("b3", "c1")).await.is_err());
}

#[tokio::test]
async fn a_journal_left_by_a_crash_is_replayed_once_up_to_its_torn_record() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.record(record("b1", "c1")).await.unwrap();
    assert_eq!(calls(&store).await.len(), 1);
    store.close().await;
    // What a daemon killed mid-append leaves (journal 1, the one that store had): a row
    // already in the table, two that are not, and half a record.
    let mut bytes = journal(&[(key(1, 1), "c1"), (key(1, 2), "c2"), (key(1, 3), "c3")]);
    let whole = bytes.len();
    bytes.extend(journal(&[(key(1, 4), "c4")]));
    bytes.truncate(whole + 30);
    std::fs::write(dir.path().join("toold.db.audit.1.7"), &bytes).unwrap();

    let store = open(dir.path()).await;
    let rows = calls(&store).await;
    let ids: Vec<_> = rows
        .iter()
        .map(|row| (row.record.call_id.as_str(), row.cursor))
        .collect();
    assert_eq!(ids, [("c1", 1), ("c2", 2), ("c3", 3)]);
    assert_eq!(rows[1].node, "node-a");
    // The replayed segment is gone; this store's journal is the second, and its rows go on
    // after the replayed cursors.
    assert_eq!(segments(dir.path()), ["2.1"]);
    store.record(record("b2", "c1")).await.unwrap();
    assert_eq!(calls(&store).await.last().unwrap().cursor, 4);
    store.close().await;
}

#[tokio::test]
async fn a_corrupt_record_ends_the_replay_of_its_segment() {
    let dir = tempfile::tempdir().unwrap();
    open(dir.path()).await.close().await;
    let mut bytes = journal(&[(1, "c1"), (2, "c2")]);
    // A flipped byte in the second record's payload.
    let last = bytes.len() - 5;
    bytes[last] ^= 0x20;
    std::fs::write(dir.path().join("toold.db.audit.1.1"), &bytes).unwrap();
    let store = open(dir.path()).await;
    let rows = calls(&store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].record.call_id, "c1");
    store.close().await;
}

#[tokio::test]
async fn a_segment_of_the_format_before_journal_keys_is_replayed_under_its_cursors() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.record(record("b1", "c1")).await.unwrap();
    assert_eq!(calls(&store).await.len(), 1);
    store.close().await;
    // `toold.db.audit.<n>`, records under their cursors: cursor 1 is in the table already.
    let bytes = journal(&[(1, "c1"), (2, "c2")]);
    std::fs::write(dir.path().join("toold.db.audit.3"), &bytes).unwrap();
    let store = open(dir.path()).await;
    let ids: Vec<_> = calls(&store)
        .await
        .iter()
        .map(|row| (row.record.call_id.clone(), row.cursor))
        .collect();
    assert_eq!(ids, [("c1".to_owned(), 1), ("c2".to_owned(), 2)]);
    assert_eq!(segments(dir.path()), ["2.1"]);
    store.close().await;
}

#[tokio::test]
async fn a_segment_whose_process_holds_its_lock_is_left_alone_until_it_is_free() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    // Another process's live journal (42): written and locked, as its process does.
    let path = dir.path().join("toold.db.audit.42.1");
    std::fs::write(&path, journal(&[(key(42, 1), "c1"), (key(42, 2), "c2")])).unwrap();
    let holder = File::open(&path).unwrap();
    assert!(try_lock(&holder).unwrap());
    assert_eq!(store.journal.replay_dead(&store.writer).await.unwrap(), 0);
    assert_eq!(calls(&store).await.len(), 0);
    assert!(path.exists());
    // Its process died: the lock is free, and the next look replays and deletes it; this
    // store's own segment, locked by itself, is never taken for a dead one.
    drop(holder);
    assert_eq!(store.journal.replay_dead(&store.writer).await.unwrap(), 2);
    assert_eq!(calls(&store).await.len(), 2);
    assert_eq!(segments(dir.path()), ["1.1"]);
    assert_eq!(store.journal.replay_dead(&store.writer).await.unwrap(), 0);
    store.close().await;
}

#[tokio::test]
async fn a_full_segment_gives_way_to_the_next_and_is_deleted_once_committed() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    // About 500 bytes a record: a little over two segments.
    let per_batch = 100;
    let batches = (2 * SEGMENT_BYTES as usize) / (500 * per_batch) + 1;
    for batch in 0..batches {
        let records = (0..per_batch)
            .map(|call| record(&format!("b{batch}"), &format!("c{call}")))
            .collect();
        store.record_many(records).await.unwrap();
    }
    let rows = calls(&store).await;
    assert_eq!(rows.len(), batches * per_batch);
    assert!(
        rows.windows(2)
            .all(|pair| pair[1].cursor == pair[0].cursor + 1)
    );
    let live = segments(dir.path());
    assert_eq!(live.len(), 1, "{live:?}");
    let generation: u64 = live[0].strip_prefix("1.").unwrap().parse().unwrap();
    assert!(generation >= 3, "{live:?}");
    store.close().await;
}

#[tokio::test]
async fn an_append_past_the_backlog_waits_until_the_rows_are_in_the_table() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let records = (0..=BACKLOG_ROWS)
        .map(|call| record("b1", &format!("c{call}")))
        .collect();
    store.record_many(records).await.unwrap();
    {
        let state = store.journal.lock();
        assert_eq!(state.uncommitted, 0);
        assert!(state.pending.is_empty());
    }
    assert_eq!(calls(&store).await.len(), BACKLOG_ROWS + 1);
    store.close().await;
}

#[tokio::test]
async fn interrupted_calls_are_marked_beside_rows_still_in_the_journal() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.record(record("b1", "c1")).await.unwrap();
    // Nothing was queued for this session, so nothing is marked; the journal's row goes in
    // first and the next row takes the cursor after it.
    assert_eq!(store.mark_interrupted_calls("s1").await.unwrap(), 0);
    store.record(record("b1", "c2")).await.unwrap();
    let cursors: Vec<_> = calls(&store).await.iter().map(|row| row.cursor).collect();
    assert_eq!(cursors, [1, 2]);
    store.close().await;
}

#[tokio::test]
async fn appends_go_on_while_interrupted_calls_are_marked() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store.record(record("b1", "c1")).await.unwrap();
    // Marking's SQL, run on a connection of the test's own: while it runs, another thread
    // appends a row, which must not wait for it.
    let connection = rusqlite::Connection::open(dir.path().join("toold.db")).unwrap();
    let taken = Taken::default();
    let (journal, writer) = (&store.journal, &store.writer);
    let marked = std::thread::scope(|scope| {
        journal.after_pending(&connection, &taken, |_| {
            let (appended, done) = std::sync::mpsc::channel();
            scope.spawn(move || {
                let row = AuditRow::new(record("b1", "c2")).unwrap();
                let _ = appended.send(journal.append(writer, vec![row]));
            });
            // A generous bound that only a deadlock reaches.
            done.recv_timeout(std::time::Duration::from_secs(60))
                .map_err(|_| StoreError::Database("the append waited for the SQL".into()))?
        })
    });
    store
        .journal
        .settle(marked.as_ref().map(drop).map_err(Clone::clone), &taken);
    marked.unwrap();
    // The row pending before went in first; the one appended meanwhile after it.
    let cursors: Vec<_> = calls(&store)
        .await
        .iter()
        .map(|row| (row.record.call_id.clone(), row.cursor))
        .collect();
    assert_eq!(cursors, [("c1".to_owned(), 1), ("c2".to_owned(), 2)]);
    store.close().await;
}

#[tokio::test]
async fn the_rows_of_a_panicked_ingest_are_retried_not_left_until_a_restart() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    store
        .journal
        .panic_next_ingest
        .store(true, std::sync::atomic::Ordering::SeqCst);
    store.record(record("b1", "c1")).await.unwrap();
    // Whichever ingest takes the row first panics (the held one or this flush's); its rows
    // go back to be retried, and the next flush commits them.
    let _ = store.journal.flush(&store.writer).await;
    store.journal.flush(&store.writer).await.unwrap();
    assert!(
        !store
            .journal
            .panic_next_ingest
            .load(std::sync::atomic::Ordering::SeqCst)
    );
    let rows = calls(&store).await;
    assert_eq!(rows.len(), 1);
    assert_eq!(rows[0].record.call_id, "c1");
    {
        let state = store.journal.lock();
        assert_eq!((state.uncommitted, state.in_flight), (0, 0));
        assert!(state.pending.is_empty());
    }
    // Nothing is left for a restart to replay: a clean close deletes the journal.
    store.close().await;
    assert_eq!(segments(dir.path()), NONE);
}

#[tokio::test]
async fn a_held_ingest_that_panics_puts_its_rows_back() {
    let dir = tempfile::tempdir().unwrap();
    let store = open(dir.path()).await;
    let panics = &store.journal.panic_next_ingest;
    panics.store(true, std::sync::atomic::Ordering::SeqCst);
    store.record(record("b1", "c1")).await.unwrap();
    // Nothing else writes: the row's held ingest runs on the writer thread, panics, and is
    // settled as failed, its row pending again (before the fix it stayed in flight for ever,
    // the row gone from memory and its segment kept until a restart).
    let mut settled = false;
    for _ in 0..500 {
        {
            let state = store.journal.lock();
            if !panics.load(std::sync::atomic::Ordering::SeqCst) && state.in_flight == 0 {
                assert_eq!(state.pending.len(), 1);
                settled = true;
                break;
            }
        }
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(settled, "the panicked ingest was never settled");
    let rows = calls(&store).await;
    assert_eq!(rows.len(), 1);
    store.close().await;
    assert_eq!(segments(dir.path()), NONE);
}
