//! Approvals on Postgres: a pending row per call waiting for a person, resolved exactly once.
//!
//! Resolution is `UPDATE … WHERE id = $1 AND decision IS NULL`: of two concurrent resolutions
//! (from any daemons) the second waits for the first's row lock, re-checks the condition and
//! changes nothing, and `rows_affected` tells each which it was.

use std::time::SystemTime;

use async_trait::async_trait;

use super::PostgresStore;
use super::convert::{database_error, millis, to_json, write_error};
use crate::store::columns::check_decision;
use crate::store::reads;
use crate::store::{ApprovalRecord, ApprovalStore, StoreError};

#[async_trait]
impl ApprovalStore for PostgresStore {
    async fn insert_approval(&self, approval: &ApprovalRecord) -> Result<(), StoreError> {
        let what = format!("approval \"{}\"", approval.id);
        if let Some(decision) = &approval.decision {
            check_decision(decision)?;
        }
        let session = format!("session \"{}\"", approval.session_id);
        sqlx::query(
            "INSERT INTO approvals (id, session_id, call_id, tool, input, reason, created_at, \
             decision, decided_by, decided_at) VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&approval.id)
        .bind(&approval.session_id)
        .bind(approval.call_id.as_bytes())
        .bind(&approval.tool)
        .bind(to_json(&approval.input, &what)?)
        .bind(&approval.reason)
        .bind(millis(approval.created_at))
        .bind(&approval.decision)
        .bind(&approval.decided_by)
        .bind(approval.decided_at.map(millis))
        .execute(&self.pool)
        .await
        .map_err(|err| write_error(&format!("inserting {what}"), &what, &session, err))?;
        Ok(())
    }

    async fn pending_approvals(&self, session_id: &str) -> Result<Vec<ApprovalRecord>, StoreError> {
        reads::pending_approvals(&self.pool, session_id).await
    }

    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        check_decision(decision)?;
        sqlx::query(
            "UPDATE approvals SET decision = $1, decided_by = $2, decided_at = $3 \
             WHERE id = $4 AND decision IS NULL",
        )
        .bind(decision)
        .bind(decided_by)
        .bind(millis(SystemTime::now()))
        .bind(approval_id)
        .execute(&self.pool)
        .await
        .map(|done| done.rows_affected() == 1)
        .map_err(|err| database_error(&format!("resolving approval \"{approval_id}\""), err))
    }
}
