//! Opening a SQLite store: files, URLs, bad locations, and closing. Not part of the
//! backend-neutral suite.

use std::sync::Arc;

use toold::dispatch::AuditSink;
use toold::store::{AuditStore, SqliteStore, Store, StoreError};

use crate::store::harness::{NODE, audit_record};

#[tokio::test]
async fn a_missing_database_file_is_created_with_a_write_ahead_log() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("fresh.db");
    let store = SqliteStore::open(path.to_str().unwrap(), NODE)
        .await
        .unwrap();
    assert!(path.is_file());
    store
        .record(audit_record("s1", "b1", "c1", 0))
        .await
        .unwrap();
    assert!(
        dir.path().join("fresh.db-wal").is_file(),
        "WAL journal in use"
    );
    assert_eq!(store.node_id(), NODE);
}

#[tokio::test]
async fn a_sqlite_url_opens_too() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("url.db");
    let url = format!("sqlite://{}", path.display());
    let store = SqliteStore::open(&url, NODE).await.unwrap();
    store
        .record(audit_record("s1", "b1", "c1", 0))
        .await
        .unwrap();
    assert!(path.is_file());
}

#[tokio::test]
async fn a_directory_that_does_not_exist_is_a_clear_error() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("no/such/dir/toold.db");
    let Err(err) = SqliteStore::open(path.to_str().unwrap(), NODE).await else {
        panic!("opened a database in a missing directory");
    };
    assert!(matches!(err, StoreError::Unavailable(_)), "{err:?}");
    let message = err.to_string();
    assert!(
        message.contains("no/such/dir") && message.contains("does not exist"),
        "{message}"
    );
}

#[tokio::test]
async fn a_path_that_is_a_directory_is_an_error_naming_it() {
    let dir = tempfile::tempdir().unwrap();
    let Err(err) = SqliteStore::open(dir.path().to_str().unwrap(), NODE).await else {
        panic!("opened a directory as a database");
    };
    assert!(
        err.to_string().contains(dir.path().to_str().unwrap()),
        "{err}"
    );
}

#[tokio::test]
async fn an_in_memory_database_is_refused() {
    for url in ["sqlite::memory:", ":memory:", "sqlite://x.db?mode=memory"] {
        let Err(err) = SqliteStore::open(url, NODE).await else {
            panic!("opened {url}");
        };
        assert!(matches!(err, StoreError::Invalid(_)), "{url}: {err:?}");
        assert!(err.to_string().contains(url), "{err}");
    }
}

#[tokio::test]
async fn after_close_records_fail_and_earlier_ones_are_kept() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("closing.db");
    let store: Arc<dyn Store> = Arc::new(
        SqliteStore::open(path.to_str().unwrap(), NODE)
            .await
            .unwrap(),
    );
    // Records in flight when close starts are committed before it returns.
    let mut in_flight = Vec::new();
    for n in 0..100 {
        let store = store.clone();
        in_flight.push(tokio::spawn(async move {
            store
                .record(audit_record("s1", "b1", &format!("c{n}"), n))
                .await
        }));
    }
    tokio::task::yield_now().await;
    store.close().await;
    store.close().await;
    let acknowledged = futures::future::join_all(in_flight)
        .await
        .into_iter()
        .filter(|outcome| outcome.as_ref().unwrap().is_ok())
        .count();
    let err = store
        .record(audit_record("s1", "b1", "late", 0))
        .await
        .unwrap_err();
    assert!(err.to_string().contains("closed"), "{err}");
    drop(store);
    let reopened = SqliteStore::open(path.to_str().unwrap(), NODE)
        .await
        .unwrap();
    let kept = reopened
        .list_calls("s1", None, 1000)
        .await
        .unwrap()
        .rows
        .len();
    assert_eq!(kept, acknowledged, "every acknowledged row and no other");
}
