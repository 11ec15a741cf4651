//! Sessions on SQLite: [`SessionStore`], written on the writer thread, read by the pool and
//! decoded by `store::rows`.

use async_trait::async_trait;
use rusqlite::{Connection, params};
use serde_json::Value;

use super::SqliteStore;
use super::convert::{millis, sqlite_error, sqlite_write_error, to_json};
use crate::store::reads;
use crate::store::{SessionRecord, SessionStore, StoreError};

#[async_trait]
impl SessionStore for SqliteStore {
    async fn insert_session(&self, session: &SessionRecord) -> Result<(), StoreError> {
        let id = session.id.clone();
        let directory = session
            .working_directory
            .to_str()
            .ok_or_else(|| {
                StoreError::Invalid(format!(
                    "working directory {:?} of session \"{id}\" is not UTF-8",
                    session.working_directory
                ))
            })?
            .to_owned();
        let what = format!("session \"{id}\"");
        let (options, state) = (
            to_json(&session.options, &what)?,
            to_json(&session.state, &what)?,
        );
        let mode = session.permission_mode.as_str();
        let (interactive, owner) = (session.interactive, session.owner.clone());
        let principal = session.principal.clone();
        let (created_at, closed_at) = (millis(session.created_at), session.closed_at.map(millis));
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO sessions (id, working_directory, permission_mode, \
                         interactive, owner, created_at, closed_at, options, state, principal) \
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10)",
                    )
                    .and_then(|mut insert| {
                        insert.execute(params![
                            id,
                            directory,
                            mode,
                            interactive,
                            owner,
                            created_at,
                            closed_at,
                            options,
                            state,
                            principal
                        ])
                    })
                    .map_err(|err| {
                        sqlite_write_error(&format!("inserting {what}"), &what, &what, err)
                    })?;
                Ok(())
            })
            .await
    }

    async fn save_session_state(&self, session_id: &str, state: &Value) -> Result<(), StoreError> {
        let what = format!("session \"{session_id}\"");
        let state = to_json(state, &what)?;
        let session_id = session_id.to_owned();
        self.writer
            .write_one(move |connection| {
                if update_state(connection, &session_id, &state)? == 0 {
                    return Err(StoreError::NotFound(what));
                }
                Ok(())
            })
            .await
    }

    async fn get_session(&self, session_id: &str) -> Result<Option<SessionRecord>, StoreError> {
        reads::session(&self.readers, session_id).await
    }

    async fn list_sessions(&self, include_closed: bool) -> Result<Vec<SessionRecord>, StoreError> {
        reads::sessions(&self.readers, include_closed).await
    }

    async fn close_session(&self, session_id: &str) -> Result<bool, StoreError> {
        let session_id = session_id.to_owned();
        let now = millis(std::time::SystemTime::now());
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "UPDATE sessions SET closed_at = ?1 WHERE id = ?2 AND closed_at IS NULL",
                    )
                    .and_then(|mut update| update.execute(params![now, session_id]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("closing session \"{session_id}\""), err))
            })
            .await
    }
}

/// Replaces a session's state; the rows changed (0 for an unknown session).
pub(super) fn update_state(
    connection: &Connection,
    session_id: &str,
    state: &str,
) -> Result<usize, StoreError> {
    connection
        .prepare_cached("UPDATE sessions SET state = ?1 WHERE id = ?2")
        .and_then(|mut update| update.execute(params![state, session_id]))
        .map_err(|err| {
            sqlite_error(
                &format!("saving the state of session \"{session_id}\""),
                err,
            )
        })
}
