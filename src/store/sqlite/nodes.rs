//! Daemons on SQLite: the same records as on Postgres (heartbeats, claims, adoption,
//! interrupted calls), though only one daemon uses a SQLite file. A daemon restarting after a
//! crash marks its own unfinished calls with them, and the conformance suite holds both
//! backends to one behaviour.

use std::time::SystemTime;

use rusqlite::params;
use sqlx::sqlite::SqliteRow;

use super::SqliteStore;
use super::convert::{database_error, get, millis, sqlite_error, time};
use super::journal::Taken;
use crate::store::{NodeRecord, StoreError};

impl SqliteStore {
    pub(super) async fn heartbeat_row(&self, node: &NodeRecord) -> Result<(), StoreError> {
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

    pub(super) async fn get_node_row(
        &self,
        node_id: &str,
    ) -> Result<Option<NodeRecord>, StoreError> {
        sqlx::query("SELECT id, address, started_at, heartbeat_at FROM nodes WHERE id = ?1")
            .bind(node_id)
            .fetch_optional(&self.readers)
            .await
            .map_err(|err| database_error(&format!("reading node \"{node_id}\""), err))?
            .as_ref()
            .map(node)
            .transpose()
    }

    pub(super) async fn list_node_rows(&self) -> Result<Vec<NodeRecord>, StoreError> {
        sqlx::query("SELECT id, address, started_at, heartbeat_at FROM nodes ORDER BY id")
            .fetch_all(&self.readers)
            .await
            .map_err(|err| database_error("listing nodes", err))?
            .iter()
            .map(node)
            .collect()
    }

    pub(super) async fn claim_silent_node_row(
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

    pub(super) async fn adopt_session_row(
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

    pub(super) async fn mark_interrupted_call_rows(
        &self,
        session_id: &str,
    ) -> Result<u64, StoreError> {
        let session_id = session_id.to_owned();
        // Its rows take cursors of SQLite's choosing: with the journal held (`journal`).
        let taken = Taken::default();
        let (journal, ingesting) = (self.journal.clone(), taken.clone());
        let outcome =
            self.writer
                .write(move |connection| {
                    journal.exclusive(connection, &ingesting, |connection| {
                        // As on Postgres: input and tool from the call's `tool:pre` event if any.
                        connection
                    .prepare_cached(
                        "INSERT INTO calls (node, session_id, batch_id, call_id, call_index, \
                         requested_name, tool, input, decision, is_error, error_kind, \
                         output_chars, started_at, duration_ms, interrupted) \
                         SELECT s.owner, q.session_id, coalesce(q.batch_id, ''), q.call_id, \
                         coalesce(q.data ->> '$.index', 0), coalesce(q.tool, ''), \
                         (SELECT p.tool FROM events p WHERE p.session_id = q.session_id \
                             AND p.batch_id = q.batch_id AND p.call_id = q.call_id \
                             AND p.type = 'tool:pre' ORDER BY p.seq LIMIT 1), \
                         coalesce((SELECT p.data -> '$.input' FROM events p \
                             WHERE p.session_id = q.session_id AND p.batch_id = q.batch_id \
                             AND p.call_id = q.call_id AND p.type = 'tool:pre' \
                             ORDER BY p.seq LIMIT 1), 'null'), \
                         NULL, 1, 'cancelled', 0, q.ts, 0.0, 1 \
                         FROM events q JOIN sessions s ON s.id = q.session_id \
                         WHERE q.session_id = ?1 AND q.type = 'tool:queued' \
                         AND q.call_id IS NOT NULL \
                         AND NOT EXISTS (SELECT 1 FROM calls c \
                             WHERE c.session_id = q.session_id AND c.batch_id = q.batch_id \
                             AND c.call_id = q.call_id) \
                         ORDER BY q.seq",
                    )
                    .and_then(|mut insert| insert.execute([&session_id]))
                    .map(|written| written as u64)
                    .map_err(|err| {
                        sqlite_error(
                            &format!("marking the interrupted calls of session \"{session_id}\""),
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

fn node(row: &SqliteRow) -> Result<NodeRecord, StoreError> {
    Ok(NodeRecord {
        id: get(row, "id")?,
        address: get(row, "address")?,
        started_at: time(get(row, "started_at")?),
        heartbeat_at: time(get(row, "heartbeat_at")?),
    })
}
