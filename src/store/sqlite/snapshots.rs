//! Snapshots and sessions' layers on SQLite: rows written by the writer thread, read back
//! through the shared queries (`store::snapshots`).

use std::path::PathBuf;

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use super::convert::{millis, sqlite_error, sqlite_write_error};
use crate::store::snapshots::{self, layers_json};
use crate::store::{SnapshotRecord, SnapshotStore, StoreError};

fn count(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Invalid(format!("size {value} is out of range")))
}

#[async_trait]
impl SnapshotStore for SqliteStore {
    async fn insert_snapshot(&self, snapshot: &SnapshotRecord) -> Result<(), StoreError> {
        let what = format!("snapshot \"{}\"", snapshot.id);
        let layers = layers_json(&snapshot.layers)?;
        let size = count(snapshot.size_bytes)?;
        let snapshot = snapshot.clone();
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO snapshots (id, principal, session_id, name, layers, size_bytes, \
                         copy, created_at) VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![
                            snapshot.id,
                            snapshot.principal,
                            snapshot.session_id,
                            snapshot.name,
                            layers,
                            size,
                            snapshot.copy,
                            millis(snapshot.created_at),
                        ])
                    })
                    .map_err(|err| sqlite_write_error(&format!("inserting {what}"), &what, &what, err))?;
                Ok(())
            })
            .await
    }

    async fn get_snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>, StoreError> {
        snapshots::snapshot(&self.readers, id).await
    }

    async fn list_snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        snapshots::snapshots(&self.readers).await
    }

    async fn set_snapshot_size(&self, id: &str, size_bytes: u64) -> Result<bool, StoreError> {
        let (id, size) = (id.to_owned(), count(size_bytes)?);
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached("UPDATE snapshots SET size_bytes = ?1 WHERE id = ?2")
                    .and_then(|mut update| update.execute(params![size, id]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("sizing snapshot \"{id}\""), err))
            })
            .await
    }

    async fn delete_snapshot(&self, id: &str) -> Result<bool, StoreError> {
        let id = id.to_owned();
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached("DELETE FROM snapshots WHERE id = ?1")
                    .and_then(|mut delete| delete.execute(params![id]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("deleting snapshot \"{id}\""), err))
            })
            .await
    }

    async fn set_session_layers(
        &self,
        session_id: &str,
        layers: &[PathBuf],
    ) -> Result<(), StoreError> {
        let (session_id, layers) = (session_id.to_owned(), layers_json(layers)?);
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO session_views (session_id, layers) VALUES (?1, ?2) \
                         ON CONFLICT (session_id) DO UPDATE SET layers = excluded.layers",
                    )
                    .and_then(|mut upsert| upsert.execute(params![session_id, layers]))
                    .map(|_| ())
                    .map_err(|err| {
                        sqlite_error(
                            &format!("setting the layers of session \"{session_id}\""),
                            err,
                        )
                    })
            })
            .await
    }

    async fn session_layers(&self, session_id: &str) -> Result<Vec<PathBuf>, StoreError> {
        snapshots::session_layers(&self.readers, session_id).await
    }
}
