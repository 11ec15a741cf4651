//! Daemons on SQLite: the same records as on Postgres (heartbeats, claims, adoption,
//! interrupted calls), though only one daemon uses a SQLite file. A daemon restarting after a
//! crash marks its own unfinished calls with them, and the conformance suite holds both
//! backends to one behaviour.

use std::time::SystemTime;

use async_trait::async_trait;
use rusqlite::params;

use super::SqliteStore;
use super::convert::{millis, sqlite_error};
use super::journal::Taken;
use crate::store::reads;
use crate::store::{NodeRecord, NodeStore, StoreError};

#[async_trait]
impl NodeStore for SqliteStore {
    async fn heartbeat(&self, node: &NodeRecord) -> Result<(), StoreError> {
        let (id, address) = (node.id.clone(), node.address.clone());
        let (started_at, heartbeat_at) = (millis(node.started_at), millis(node.heartbeat_at));
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "INSERT INTO nodes (id, address, started_at, heartbeat_at, claimed_by) \
                         VALUES (?1, ?2, ?3, ?4, NULL) ON CONFLICT (id) DO UPDATE SET \
                         address = excluded.address, started_at = excluded.started_at, \
                         heartbeat_at = excluded.heartbeat_at, claimed_by = NULL",
                    )
                    .and_then(|mut upsert| {
                        upsert.execute(params![id, address, started_at, heartbeat_at])
                    })
                    .map_err(|err| sqlite_error(&format!("heartbeat of node \"{id}\""), err))?;
                Ok(())
            })
            .await
    }

    async fn get_node(&self, node_id: &str) -> Result<Option<NodeRecord>, StoreError> {
        reads::node(&self.readers, node_id).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        reads::nodes(&self.readers).await
    }

    async fn claim_silent_node(
        &self,
        node_id: &str,
        silent_since: SystemTime,
        by: &str,
    ) -> Result<bool, StoreError> {
        let (node_id, by, since) = (node_id.to_owned(), by.to_owned(), millis(silent_since));
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "UPDATE nodes SET claimed_by = ?1 \
                         WHERE id = ?2 AND heartbeat_at < ?3 AND claimed_by IS NULL",
                    )
                    .and_then(|mut update| update.execute(params![by, node_id, since]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("claiming node \"{node_id}\""), err))
            })
            .await
    }

    async fn adopt_session(
        &self,
        session_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError> {
        let (session_id, from, to) = (session_id.to_owned(), from.to_owned(), to.to_owned());
        self.writer
            .write_one(move |connection| {
                connection
                    .prepare_cached(
                        "UPDATE sessions SET owner = ?1 \
                         WHERE id = ?2 AND owner = ?3 AND closed_at IS NULL",
                    )
                    .and_then(|mut update| update.execute(params![to, session_id, from]))
                    .map(|changed| changed == 1)
                    .map_err(|err| sqlite_error(&format!("adopting session \"{session_id}\""), err))
            })
            .await
    }

    async fn mark_interrupted_calls(&self, session_id: &str) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        // Every journalled row goes in first (the rows that exist are not marked); SQLite
        // numbers the marked rows after them.
        let taken = Taken::default();
        let (journal, ingesting) = (self.journal.clone(), taken.clone());
        let outcome = self
            .writer
            .write(move |connection| {
                journal.after_pending(connection, &ingesting, |connection| {
                    connection
                        .prepare_cached(&format!("{MARK_INTERRUPTED} {UNANSWERED_QUEUED}"))
                        .and_then(|mut insert| insert.execute(rusqlite::params![&session_id]))
                        .map(|written| written as u64)
                        .map_err(|err| {
                            sqlite_error(
                                &format!(
                                    "marking the interrupted calls of session \"{session_id}\""
                                ),
                                err,
                            )
                        })
                })
            })
            .await;
        self.journal
            .settle(outcome.as_ref().map(drop).map_err(Clone::clone), &taken);
        outcome
    }
}

/// The interrupted row of each unanswered queued call, inserted in queue order (so SQLite
/// gives them increasing cursors); input and tool from the call's `tool:pre` event if any, as
/// on Postgres.
const MARK_INTERRUPTED: &str = "INSERT INTO calls (node, session_id, batch_id, call_id, \
     call_index, requested_name, tool, input, decision, is_error, error_kind, output_chars, \
     started_at, duration_ms, interrupted) \
     SELECT s.owner, q.session_id, \
     coalesce(q.batch_id, ''), q.call_id, coalesce(q.data ->> '$.index', 0), \
     coalesce(q.tool, ''), \
     (SELECT p.tool FROM events p WHERE p.session_id = q.session_id \
         AND p.batch_id = q.batch_id AND p.call_id = q.call_id \
         AND p.type = 'tool:pre' ORDER BY p.seq LIMIT 1), \
     coalesce((SELECT p.data -> '$.input' FROM events p \
         WHERE p.session_id = q.session_id AND p.batch_id = q.batch_id \
         AND p.call_id = q.call_id AND p.type = 'tool:pre' \
         ORDER BY p.seq LIMIT 1), 'null'), \
     NULL, 1, 'cancelled', 0, q.ts, 0.0, 1";

/// The queued calls of session `?1` that have no audit row.
const UNANSWERED_QUEUED: &str = "FROM events q JOIN sessions s ON s.id = q.session_id \
     WHERE q.session_id = ?1 AND q.type = 'tool:queued' AND q.call_id IS NOT NULL \
     AND NOT EXISTS (SELECT 1 FROM calls c \
         WHERE c.session_id = q.session_id AND c.batch_id = q.batch_id \
         AND c.call_id = q.call_id) \
     ORDER BY q.seq";
