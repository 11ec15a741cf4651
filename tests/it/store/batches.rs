//! Batches: claiming (idempotency keys, atomically), completing, reading back.

use crate::store::harness::Backend;
use std::collections::HashMap;

use toold::store::{BatchClaim, BatchStatus, StoreError};
use toold::tool::{ErrorKind, OffloadedResult, ToolResult};

use crate::store::harness::{batch, with_sessions};

fn results() -> Vec<ToolResult> {
    vec![
        ToolResult {
            id: "c1".to_owned(),
            name: "read_file".to_owned(),
            is_error: false,
            output: "fn main() {}".to_owned(),
            error_kind: None,
            duration_ms: 0.25,
            offloaded: Some(OffloadedResult {
                result_id: "res_1".to_owned(),
                total_chars: 99_999,
            }),
            structured: Some(serde_json::json!({"lines": 1})),
            metadata: serde_json::Map::from_iter([("exit_code".to_owned(), 0.into())]),
        },
        ToolResult {
            id: "c2".to_owned(),
            name: "bash".to_owned(),
            is_error: true,
            output: "TimeoutError: 120000 ms".to_owned(),
            error_kind: Some(ErrorKind::Timeout),
            duration_ms: 120_000.5,
            offloaded: None,
            structured: None,
            metadata: serde_json::Map::new(),
        },
    ]
}

pub async fn batches_without_a_key_are_always_new(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    for id in ["b1", "b2"] {
        let claim = fixture
            .store
            .claim_batch(&batch(id, "s1", None, "same"))
            .await
            .unwrap();
        assert_eq!(claim, BatchClaim::New);
    }
}

pub async fn a_claimed_batch_is_running_then_completed_with_its_results(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let claimed = batch("b1", "s1", Some("k1"), "h1");
    fixture.store.claim_batch(&claimed).await.unwrap();
    assert_eq!(
        fixture.store.get_batch("s1", "b1").await.unwrap(),
        Some(claimed.clone())
    );
    fixture
        .store
        .complete_batch("b1", &results())
        .await
        .unwrap();
    let done = fixture.store.get_batch("s1", "b1").await.unwrap().unwrap();
    assert_eq!(done.status, BatchStatus::Completed);
    assert_eq!(done.results, Some(results()));
    assert!(done.completed_at.is_some_and(|at| at >= claimed.created_at));
    assert_eq!(done.request_hash, "h1");
    assert_eq!(done.idempotency_key.as_deref(), Some("k1"));
}

pub async fn the_same_key_and_hash_returns_the_existing_batch(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .store
        .claim_batch(&batch("b1", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    fixture
        .store
        .complete_batch("b1", &results())
        .await
        .unwrap();
    let retry = fixture
        .store
        .claim_batch(&batch("b2", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    let BatchClaim::Existing(existing) = retry else {
        panic!("expected the existing batch, got {retry:?}");
    };
    assert_eq!(existing.batch_id, "b1");
    assert_eq!(existing.results, Some(results()));
    assert_eq!(
        fixture.store.get_batch("s1", "b2").await.unwrap(),
        None,
        "nothing new recorded"
    );
}

pub async fn the_same_key_with_another_hash_is_a_conflict(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .store
        .claim_batch(&batch("b1", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    let claim = fixture
        .store
        .claim_batch(&batch("b2", "s1", Some("k1"), "h2"))
        .await
        .unwrap();
    assert_eq!(
        claim,
        BatchClaim::Conflict {
            batch_id: "b1".to_owned()
        }
    );
}

pub async fn keys_are_per_session(backend: Backend) {
    let fixture = with_sessions(backend, &["s1", "s2"]).await;
    fixture
        .store
        .claim_batch(&batch("b1", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    let claim = fixture
        .store
        .claim_batch(&batch("b2", "s2", Some("k1"), "h2"))
        .await
        .unwrap();
    assert_eq!(claim, BatchClaim::New);
}

pub async fn concurrent_claims_with_one_key_give_exactly_one_new(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let mut tasks = Vec::new();
    for n in 0..16 {
        let store = fixture.store.clone();
        tasks.push(tokio::spawn(async move {
            store
                .claim_batch(&batch(&format!("b{n}"), "s1", Some("k1"), "h1"))
                .await
                .unwrap()
        }));
    }
    let mut counts: HashMap<&str, usize> = HashMap::new();
    let mut winners = Vec::new();
    for task in tasks {
        match task.await.unwrap() {
            BatchClaim::New => *counts.entry("new").or_default() += 1,
            BatchClaim::Existing(existing) => {
                *counts.entry("existing").or_default() += 1;
                winners.push(existing.batch_id);
            }
            BatchClaim::Conflict { .. } => *counts.entry("conflict").or_default() += 1,
        }
    }
    assert_eq!(counts.get("new"), Some(&1), "{counts:?}");
    assert_eq!(counts.get("existing"), Some(&15), "{counts:?}");
    winners.dedup();
    assert_eq!(winners.len(), 1, "every retry sees the same winner");
}

pub async fn another_sessions_or_an_unknown_batch_is_none(backend: Backend) {
    let fixture = with_sessions(backend, &["s1", "s2"]).await;
    fixture
        .store
        .claim_batch(&batch("b1", "s1", None, "h1"))
        .await
        .unwrap();
    assert_eq!(fixture.store.get_batch("s2", "b1").await.unwrap(), None);
    assert_eq!(fixture.store.get_batch("s1", "nope").await.unwrap(), None);
}

pub async fn completing_an_unknown_batch_is_not_found(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let err = fixture
        .store
        .complete_batch("ghost", &results())
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("\"ghost\""), "{err}");
}

pub async fn a_released_claim_frees_its_key_and_a_completed_batch_stays(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    let store = &fixture.store;
    store
        .claim_batch(&batch("b1", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    store.release_batch("b1").await.unwrap();
    assert_eq!(store.get_batch("s1", "b1").await.unwrap(), None);
    let retry = store
        .claim_batch(&batch("b2", "s1", Some("k1"), "h1"))
        .await
        .unwrap();
    assert_eq!(retry, BatchClaim::New, "the key is free again");

    store.complete_batch("b2", &results()).await.unwrap();
    store.release_batch("b2").await.unwrap();
    let kept = store.get_batch("s1", "b2").await.unwrap().unwrap();
    assert_eq!(
        kept.status,
        BatchStatus::Completed,
        "a completed batch stays"
    );
    store.release_batch("unknown").await.unwrap();
}

pub async fn claiming_for_an_unknown_session_is_not_found(backend: Backend) {
    let fixture = with_sessions(backend, &[]).await;
    let err = fixture
        .store
        .claim_batch(&batch("b1", "ghost", Some("k"), "h"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::NotFound(_)), "{err:?}");
    assert!(err.to_string().contains("\"ghost\""), "{err}");
}

pub async fn a_duplicate_batch_id_is_a_conflict(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .store
        .claim_batch(&batch("b1", "s1", None, "h1"))
        .await
        .unwrap();
    let err = fixture
        .store
        .claim_batch(&batch("b1", "s1", Some("k"), "h1"))
        .await
        .unwrap_err();
    assert!(matches!(err, StoreError::Conflict(_)), "{err:?}");
    assert!(err.to_string().contains("\"b1\""), "{err}");
}

/// A stored batch whose format is none of the four (written behind the store's back) reads
/// back as corruption naming the batch and the format, never as a default; so does a claim
/// that finds it holding its key.
pub async fn a_stored_batch_of_an_unknown_format_is_an_error_naming_it(backend: Backend) {
    let fixture = with_sessions(backend, &["s1"]).await;
    fixture
        .execute_raw(
            "INSERT INTO batches (batch_id, session_id, format, idempotency_key, request_hash, \
             status, call_count, results, created_at, completed_at) \
             VALUES ('b-1', 's1', 'xml', 'k1', 'h1', 'running', 1, NULL, 0, NULL)",
        )
        .await;
    let err = fixture.store.get_batch("s1", "b-1").await.unwrap_err();
    assert!(matches!(err, StoreError::Corrupt(_)), "{err:?}");
    assert!(
        err.to_string()
            .contains("stored batch \"b-1\" has unknown format \"xml\""),
        "{err}"
    );
    let claimed = fixture
        .store
        .claim_batch(&batch("b-2", "s1", Some("k1"), "h1"))
        .await;
    assert!(
        matches!(&claimed, Err(StoreError::Corrupt(message)) if message.contains("\"xml\"")),
        "{claimed:?}"
    );
}
