//! Approvals on Postgres: a pending row per call waiting for a person, resolved exactly once.
//!
//! Resolution is `UPDATE … WHERE id = $1 AND decision IS NULL`: of two concurrent resolutions
//! (from any daemons) the second waits for the first's row lock, re-checks the condition and
//! changes nothing, and `rows_affected` tells each which it was.

use std::time::SystemTime;

use sqlx::postgres::PgRow;

use super::PostgresStore;
use super::convert::{
    database_error, from_json, get, get_text, millis, optional_time, time, to_json, write_error,
};
use crate::store::columns::check_decision;
use crate::store::{ApprovalRecord, StoreError};

impl PostgresStore {
    pub(super) async fn insert_approval_row(
        &self,
        approval: &ApprovalRecord,
    ) -> Result<(), StoreError> {
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

    pub(super) async fn pending_approval_rows(
        &self,
        session_id: &str,
    ) -> Result<Vec<ApprovalRecord>, StoreError> {
        sqlx::query(
            "SELECT id, session_id, call_id, tool, input, reason, created_at, decision, \
             decided_by, decided_at FROM approvals \
             WHERE session_id = $1 AND decision IS NULL ORDER BY created_at, id",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
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

fn approval(row: &PgRow) -> Result<ApprovalRecord, StoreError> {
    let id: String = get(row, "id")?;
    Ok(ApprovalRecord {
        session_id: get(row, "session_id")?,
        call_id: get_text(row, "call_id")?,
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
