//! Snapshots and sessions' layers: recorded, read back alike, sized, listed in order, deleted
//! once; a duplicate id is a conflict; layers replaced per session.

use std::path::PathBuf;

use crate::store::harness::{Backend, Fixture, now};
use toold::store::{SnapshotRecord, StoreError};

fn snapshot(id: &str, layers: &[&str]) -> SnapshotRecord {
    SnapshotRecord {
        id: id.to_owned(),
        principal: Some("agent-a".into()),
        session_id: "s1".into(),
        name: Some("before the refactor".into()),
        layers: layers.iter().map(PathBuf::from).collect(),
        size_bytes: 0,
        copy: "cow".into(),
        created_at: now(),
    }
}

pub async fn snapshots_are_recorded_sized_listed_and_deleted_once(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = &fixture.store;
    let first = snapshot("snap_1", &["/data/snapshots/snap_1/layer"]);
    store.insert_snapshot(&first).await.unwrap();
    let second = snapshot(
        "snap_2",
        &[
            "/data/snapshots/snap_2/layer",
            "/data/snapshots/snap_1/layer",
        ],
    );
    store.insert_snapshot(&second).await.unwrap();
    assert_eq!(
        store.get_snapshot("snap_1").await.unwrap(),
        Some(first.clone())
    );
    assert!(matches!(
        store.insert_snapshot(&first).await,
        Err(StoreError::Conflict(_))
    ));
    assert!(store.set_snapshot_size("snap_2", 12345).await.unwrap());
    assert!(!store.set_snapshot_size("snap_none", 1).await.unwrap());
    let listed = store.list_snapshots().await.unwrap();
    assert_eq!(
        listed.iter().map(|s| s.id.as_str()).collect::<Vec<_>>(),
        ["snap_1", "snap_2"]
    );
    assert_eq!(listed[1].size_bytes, 12345);
    assert_eq!(listed[1].layers.len(), 2);
    assert!(store.delete_snapshot("snap_1").await.unwrap());
    assert!(!store.delete_snapshot("snap_1").await.unwrap());
    assert_eq!(store.get_snapshot("snap_1").await.unwrap(), None);
    assert_eq!(store.get_snapshot("snap_none").await.unwrap(), None);
}

pub async fn a_sessions_layers_are_replaced_whole(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let store = &fixture.store;
    assert!(store.session_layers("s1").await.unwrap().is_empty());
    let one = vec![PathBuf::from("/l/a")];
    store.set_session_layers("s1", &one).await.unwrap();
    assert_eq!(store.session_layers("s1").await.unwrap(), one);
    let two = vec![PathBuf::from("/l/b"), PathBuf::from("/l/a")];
    store.set_session_layers("s1", &two).await.unwrap();
    assert_eq!(store.session_layers("s1").await.unwrap(), two);
    assert!(store.session_layers("s2").await.unwrap().is_empty());
}
