//! Sessions on Postgres: [`SessionStore`], decoded by `store::rows`.

use async_trait::async_trait;
use serde_json::Value;

use super::PostgresStore;
use super::convert::{database_error, millis, to_json, write_error};
use crate::store::reads;
use crate::store::{SessionRecord, SessionStore, StoreError};

#[async_trait]
impl SessionStore for PostgresStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let what = format!("session \"{}\"", session.id);
        let directory = session.working_directory.to_str().ok_or_else(|| {
            StoreError::Invalid(format!(
                "working directory {:?} of {what} is not UTF-8",
                session.working_directory
            ))
        })?;
        sqlx::query(
            "INSERT INTO sessions (id, working_directory, permission_mode, interactive, owner, \
             created_at, closed_at, options, state, principal) \
             VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10)",
        )
        .bind(&session.id)
        .bind(directory)
        .bind(session.permission_mode.as_str())
        .bind(session.interactive)
        .bind(&session.owner)
        .bind(millis(session.created_at))
        .bind(session.closed_at.map(millis))
        .bind(to_json(&session.options, &what)?)
        .bind(to_json(&session.state, &what)?)
        .bind(&session.principal)
        .execute(&self.pool)
        .await
        .map_err(|err| write_error(&format!("inserting {what}"), &what, &what, err))?;
        Ok(())
    }

    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError> {
        let what = format!("session \"{session_id}\"");
        let changed = sqlx::query("UPDATE sessions SET state = $1 WHERE id = $2")
            .bind(to_json(state, &what)?)
            .bind(session_id)
            .execute(&self.pool)
            .await
            .map_err(|err| database_error(&format!("saving the state of {what}"), err))?;
        if changed.rows_affected() == 0 {
            return Err(StoreError::NotFound(what));
        }
        Ok(())
    }

    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        reads::session(&self.pool, session_id).await
    }

    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError> {
        reads::sessions(&self.pool, include_closed).await
    }

    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError> {
        sqlx::query("UPDATE sessions SET closed_at = $1 WHERE id = $2 AND closed_at IS NULL")
            .bind(millis(std::time::SystemTime::now()))
            .bind(session_id)
            .execute(&self.pool)
            .await
            .map(|done| done.rows_affected() == 1)
            .map_err(|err| database_error(&format!("closing session \"{session_id}\""), err))
    }
}
