//! Approvals on SQLite: a pending row per call waiting for a person, resolved exactly once.
//!
//! Resolution is `UPDATE … WHERE id = ? AND decision IS NULL`: of two concurrent resolutions
//! only one changes a row, and `rows_affected` tells each which it was.

use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use super::convert::{millis, sqlite_error, sqlite_write_error, to_json};
use crate::store::columns::check_decision;
use crate::store::reads;
use crate::store::{ApprovalRecord, ApprovalStore, StoreError};

#[async_trait]
impl ApprovalStore for SqliteStore {
    async fn insert_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError> {
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

    async fn pending_approvals(&self, session_id: &str) -> Result<Vec<ApprovalRecord>, StoreError> {
        reads::pending_approvals(&self.readers, session_id).await
    }

    async fn resolve_approval(
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
