//! Snapshot rows read back, written once for both dialects (`reads`' way): the queries and the
//! decoding of a [`SnapshotRecord`]. Layers are kept as a JSON array of paths.

use std::path::PathBuf;

use sqlx::SqlSafeStr;

use super::columns::time;
use super::reads::{Bind, RunReads};
use super::rows::ColumnReader;
use super::{SnapshotRecord, StoreError};

const COLUMNS: &str = "id, principal, session_id, name, layers, size_bytes, copy, created_at";

pub(crate) fn layers_json(layers: &[PathBuf]) -> Result<String, StoreError> {
    serde_json::to_string(layers).map_err(|err| StoreError::Invalid(format!("layers: {err}")))
}

fn layers(text: &str) -> Result<Vec<PathBuf>, StoreError> {
    serde_json::from_str(text)
        .map_err(|err| StoreError::Corrupt(format!("layers \"{text}\": {err}")))
}

fn snapshot_record(row: &impl ColumnReader) -> Result<SnapshotRecord, StoreError> {
    Ok(SnapshotRecord {
        id: row.text("id")?.to_owned(),
        principal: row.optional_text("principal")?.map(str::to_owned),
        session_id: row.text("session_id")?.to_owned(),
        name: row.optional_text("name")?.map(str::to_owned),
        layers: layers(row.text("layers")?)?,
        size_bytes: u64::try_from(row.integer("size_bytes")?).unwrap_or(0),
        copy: row.text("copy")?.to_owned(),
        created_at: time(row.integer("created_at")?),
    })
}

pub(crate) async fn snapshot<S: RunReads + ?Sized>(
    store: &S,
    id: &str,
) -> Result<Option<SnapshotRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM snapshots WHERE id = $1");
    let context = || format!("reading snapshot \"{id}\"");
    store
        .fetch_optional(
            sqlx::AssertSqlSafe(sql).into_sql_str(),
            &[Bind::Text(id)],
            &context,
        )
        .await?
        .as_ref()
        .map(snapshot_record)
        .transpose()
}

pub(crate) async fn snapshots<S: RunReads + ?Sized>(
    store: &S,
) -> Result<Vec<SnapshotRecord>, StoreError> {
    let sql = format!("SELECT {COLUMNS} FROM snapshots ORDER BY created_at, id");
    let context = || "listing snapshots".to_owned();
    let rows = store
        .fetch_all(sqlx::AssertSqlSafe(sql).into_sql_str(), &[], &context)
        .await?;
    rows.iter().map(snapshot_record).collect()
}

pub(crate) async fn session_layers<S: RunReads + ?Sized>(
    store: &S,
    session_id: &str,
) -> Result<Vec<PathBuf>, StoreError> {
    let context = || format!("reading the layers of session \"{session_id}\"");
    let row = store
        .fetch_optional(
            "SELECT layers FROM session_views WHERE session_id = $1".into_sql_str(),
            &[Bind::Text(session_id)],
            &context,
        )
        .await?;
    match row {
        Some(row) => layers(row.text("layers")?),
        None => Ok(Vec::new()),
    }
}
