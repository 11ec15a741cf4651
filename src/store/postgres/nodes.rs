//! Daemons on Postgres: heartbeats, claims on silent ones, session adoption, and the audit
//! rows of calls a stopped daemon never finished.
//!
//! A claim (`UPDATE … WHERE heartbeat_at < $cutoff AND claimed_by IS NULL`) and an adoption
//! (`UPDATE sessions … WHERE owner = $from`) are single conditional updates, so of several
//! daemons trying at once exactly one wins. Interrupted rows are written by one
//! `INSERT … SELECT` from the session's `tool:queued` events that have no audit row.

use std::time::SystemTime;

use async_trait::async_trait;

use super::PostgresStore;
use super::convert::{database_error, millis};
use crate::store::reads;
use crate::store::{NodeRecord, NodeStore, StoreError};

#[async_trait]
impl NodeStore for PostgresStore {
    fn is_shared(&self) -> bool {
        true
    }

    async fn heartbeat(&self, node: &NodeRecord) -> Result<(), StoreError> {
        sqlx::query(
            "INSERT INTO nodes (id, address, started_at, heartbeat_at, claimed_by) \
             VALUES ($1, $2, $3, $4, NULL) ON CONFLICT (id) DO UPDATE SET \
             address = excluded.address, started_at = excluded.started_at, \
             heartbeat_at = excluded.heartbeat_at, claimed_by = NULL",
        )
        .bind(&node.id)
        .bind(&node.address)
        .bind(millis(node.started_at))
        .bind(millis(node.heartbeat_at))
        .execute(&self.pool)
        .await
        .map_err(|err| database_error(&format!("heartbeat of node \"{}\"", node.id), err))?;
        Ok(())
    }

    async fn get_node(&self, node_id: &str) -> Result<Option<NodeRecord>, StoreError> {
        reads::node(&self.pool, node_id).await
    }

    async fn list_nodes(&self) -> Result<Vec<NodeRecord>, StoreError> {
        reads::nodes(&self.pool).await
    }

    async fn claim_silent_node(
        &self,
        node_id: &str,
        silent_since: SystemTime,
        by: &str,
    ) -> Result<bool, StoreError> {
        sqlx::query(
            "UPDATE nodes SET claimed_by = $1 \
             WHERE id = $2 AND heartbeat_at < $3 AND claimed_by IS NULL",
        )
        .bind(by)
        .bind(node_id)
        .bind(millis(silent_since))
        .execute(&self.pool)
        .await
        .map(|done| done.rows_affected() == 1)
        .map_err(|err| database_error(&format!("claiming node \"{node_id}\""), err))
    }

    async fn adopt_session(
        &self,
        session_id: &str,
        from: &str,
        to: &str,
    ) -> Result<bool, StoreError> {
        sqlx::query(
            "UPDATE sessions SET owner = $1 WHERE id = $2 AND owner = $3 AND closed_at IS NULL",
        )
        .bind(to)
        .bind(session_id)
        .bind(from)
        .execute(&self.pool)
        .await
        .map(|done| done.rows_affected() == 1)
        .map_err(|err| database_error(&format!("adopting session \"{session_id}\""), err))
    }

    async fn mark_interrupted_calls(&self, session_id: &str) -> Result<u64, StoreError> {
        // The call's input and resolved tool come from its `tool:pre` event when it got that
        // far; the row is an error of kind `cancelled`, stamped when the call was queued.
        sqlx::query(
            "INSERT INTO calls (node, session_id, batch_id, call_id, call_index, \
             requested_name, tool, input, decision, is_error, error_kind, output_chars, \
             started_at, duration_ms, interrupted) \
             SELECT s.owner, q.session_id, coalesce(q.batch_id, ''), q.call_id, \
             coalesce((q.data::jsonb ->> 'index')::bigint, 0), coalesce(q.tool, ''::bytea), \
             p.tool, coalesce((p.data::jsonb -> 'input')::text, 'null'), NULL, TRUE, \
             'cancelled', 0, q.ts, 0, TRUE \
             FROM events q JOIN sessions s ON s.id = q.session_id \
             LEFT JOIN LATERAL (SELECT tool, data FROM events p \
                 WHERE p.session_id = q.session_id AND p.batch_id = q.batch_id \
                 AND p.call_id = q.call_id AND p.type = 'tool:pre' ORDER BY p.seq LIMIT 1) p \
             ON TRUE \
             WHERE q.session_id = $1 AND q.type = 'tool:queued' AND q.call_id IS NOT NULL \
             AND NOT EXISTS (SELECT 1 FROM calls c WHERE c.session_id = q.session_id \
                 AND c.batch_id = q.batch_id AND c.call_id = q.call_id) \
             ORDER BY q.seq",
        )
        .bind(session_id)
        .execute(&self.pool)
        .await
        .map(|done| done.rows_affected())
        .map_err(|err| {
            database_error(
                &format!("marking the interrupted calls of session \"{session_id}\""),
                err,
            )
        })
    }
}
