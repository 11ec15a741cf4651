//! Approvals on SQLite: a pending row per call waiting for a person, resolved exactly once.
//!
//! Resolution is `UPDATE … WHERE id = ? AND decision IS NULL`: of two concurrent resolutions
//! only one changes a row, and `rows_affected` tells each which it was.

use std::time::SystemTime;

use rusqlite::params;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::convert::{
    database_error, from_json, get, millis, optional_time, sqlite_error, sqlite_write_error, time,
    to_json,
};
use crate::store::columns::check_decision;
use crate::store::{ApprovalRecord, StoreError};

impl SqliteStore {
    pub(super) async fn insert_approval_row(
        &self,
        approval: &ApprovalRecord,
    ) -> Result<(), StoreError> {
        let what = format!("approval \"{}\"", approval.id);
        if let Some(decision) = &approval.decision {
            check_decision(decision)?;
        }
        let input = to_json(&approval.input, &what)?;
        let approval = approval.clone();
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO approvals (id, session_id, call_id, tool, input, reason, \
                         created_at, decision, decided_by, decided_at) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![
                            approval.id,
                            approval.session_id,
                            approval.call_id,
                            approval.tool,
                            input,
                            approval.reason,
                            millis(approval.created_at),
                            approval.decision,
                            approval.decided_by,
                            approval.decided_at.map(millis),
                        ])
                    })
                    .map_err(|err| {
                        let session = format!("session \"{}\"", approval.session_id);
                        sqlite_write_error(&format!("inserting {what}"), &what, &session, err)
                    })?;
                Ok(())
            })
            .await
    }

    pub(super) async fn pending_approval_rows(
        &self,
        session_id: &str,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        sqlx::query(
            "SELECT id, session_id, call_id, tool, input, reason, created_at, decision, \
             decided_by, decided_at FROM approvals \
             WHERE session_id = ?1 AND decision IS NULL ORDER BY created_at, id",
        )
        .bind(session_id)
        .fetch_all(&self.readers)
        .await
        .map_err(|err| {
            database_error(
                &format!("listing the approvals of session \"{session_id}\""),
                err,
            )
        })?
        .iter()
        .map(approval)
        .collect()
    }

    pub(super) async fn resolve_approval_row(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        check_decision(decision)?;
        let (approval_id, decision, decided_by) = (
            approval_id.to_owned(),
            decision.to_owned(),
            decided_by.to_owned(),
        );
        let now = millis(SystemTime::now());
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "UPDATE approvals SET decision = ?1, decided_by = ?2, decided_at = ?3 \
                         WHERE id = ?4 AND decision IS NULL",
                    )
                    .and_then(|mut update| {
                        update.execute(params![decision, decided_by, now, approval_id])
                    })
                    .map(|changed| changed == 1)
                    .map_err(|err| {
                        sqlite_error(&format!("resolving approval \"{approval_id}\""), err)
                    })
            })
            .await
    }
}

fn approval(row: &SqliteRow) -> Result<ApprovalRecord, StoreError> {
    let id: String = get(row, "id")?;
    Ok(ApprovalRecord {
        session_id: get(row, "session_id")?,
        call_id: get(row, "call_id")?,
        tool: get(row, "tool")?,
        input: from_json(
            &get::<String>(row, "input")?,
            &format!("column input of approval \"{id}\""),
        )?,
        reason: get(row, "reason")?,
        created_at: time(get(row, "created_at")?),
        decision: get(row, "decision")?,
        decided_by: get(row, "decided_by")?,
        decided_at: optional_time(get(row, "decided_at")?),
        id,
    })
}
