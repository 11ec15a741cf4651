//! Snapshots and sessions' layers on Postgres: every daemon of a fleet reads the same rows, so
//! a snapshot taken on one starts sessions on any (its layers lie under the root they share).

use std::path::PathBuf;

use async_trait::async_trait;

use super::PostgresStore;
use super::convert::{database_error, millis, write_error};
use crate::store::snapshots::{self, layers_json};
use crate::store::{SnapshotRecord, SnapshotStore, StoreError};

fn count(value: u64) -> Result<i64, StoreError> {
    i64::try_from(value).map_err(|_| StoreError::Invalid(format!("size {value} is out of range")))
}

#[async_trait]
impl SnapshotStore for PostgresStore {
    async fn insert_snapshot(&self, snapshot: &SnapshotRecord) -> Result<(), StoreError> {
        let what = format!("snapshot \"{}\"", snapshot.id);
        sqlx::query(
            "INSERT INTO snapshots (id, principal, session_id, name, layers, size_bytes, copy, \
             created_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8)",
        )
        .bind(&snapshot.id)
        .bind(&snapshot.principal)
        .bind(&snapshot.session_id)
        .bind(&snapshot.name)
        .bind(layers_json(&snapshot.layers)?)
        .bind(count(snapshot.size_bytes)?)
        .bind(&snapshot.copy)
        .bind(millis(snapshot.created_at))
        .execute(&self.pool)
        .await
        .map_err(|err| write_error(&format!("inserting {what}"), &what, &what, err))?;
        Ok(())
    }

    async fn get_snapshot(&self, id: &str) -> Result<Option<SnapshotRecord>, StoreError> {
        snapshots::snapshot(&self.pool, id).await
    }

    async fn list_snapshots(&self) -> Result<Vec<SnapshotRecord>, StoreError> {
        snapshots::snapshots(&self.pool).await
    }

    async fn set_snapshot_size(&self, id: &str, size_bytes: u64) -> Result<bool, StoreError> {
        sqlx::query("UPDATE snapshots SET size_bytes = $1 WHERE id = $2")
            .bind(count(size_bytes)?)
            .bind(id)
            .execute(&self.pool)
            .await
            .map(|done| done.rows_affected() == 1)
            .map_err(|err| database_error(&format!("sizing snapshot \"{id}\""), err))
    }

    async fn delete_snapshot(&self, id: &str) -> Result<bool, StoreError> {
        sqlx::query("DELETE FROM snapshots WHERE id = $1")
            .bind(id)
            .execute(&self.pool)
            .await
            .map(|done| done.rows_affected() == 1)
            .map_err(|err| database_error(&format!("deleting snapshot \"{id}\""), err))
    }

    async fn set_session_layers(
        &self,
        session_id: &str,
        layers: &[PathBuf],
    ) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO session_views (session_id, layers) VALUES ($1, $2) \
             ON CONFLICT (session_id) DO UPDATE SET layers = EXCLUDED.layers",
        )
        .bind(session_id)
        .bind(layers_json(layers)?)
        .execute(&self.pool)
        .await
        .map(|_| ())
        .map_err(|err| {
            database_error(
                &format!("setting the layers of session \"{session_id}\""),
                err,
            )
        })
    }

    async fn session_layers(&self, session_id: &str) -> Result<Vec<PathBuf>, StoreError> {
        snapshots::session_layers(&self.pool, session_id).await
    }
}
