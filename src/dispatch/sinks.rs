//! The two places a call's result goes besides the caller: the audit log and, when the output
//! is too large for the model, the offload store. Both are traits the store implements; the
//! in-memory versions here serve tests, benchmarks and embedding without a database.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;

use crate::permission::PermissionDecision;
use crate::tool::{ErrorKind, OffloadedResult};

/// One row of the audit log: one per call, whatever happened to it.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRecord {
    pub session_id: String,
    pub batch_id: String,
    pub call_id: String,
    /// Position of the call in its batch.
    pub index: usize,
    /// The name the model used.
    pub requested_name: String,
    /// The tool it resolved to, if any.
    pub tool: Option<String>,
    /// The input as finally executed (after hooks), or as received when refused earlier.
    pub input: Value,
    pub decision: Option<PermissionDecision>,
    pub is_error: bool,
    pub error_kind: Option<ErrorKind>,
    pub output_chars: u64,
    pub offloaded: Option<OffloadedResult>,
    pub started_at: SystemTime,
    pub duration_ms: f64,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// Where audit rows go. `record` returns once the row is durable.
#[async_trait]
pub trait AuditSink: Send + Sync + 'static {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError>;
}

/// A page of an offloaded output, by character range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultPage {
    pub result_id: String,
    pub total_chars: u64,
    pub offset: u64,
    pub content: String,
}

/// Where oversized outputs go, and how they are read back.
#[async_trait]
pub trait ResultStore: Send + Sync + 'static {
    async fn offload(
        &self,
        session_id: &str,
        call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, SinkError>;

    /// A page of a result, whoever stored it (the doors check the caller's token first).
    async fn read(&self, result_id: &str, offset: u64, limit: u64)
    -> Result<ResultPage, SinkError>;

    /// A page of a result stored by `session_id`'s calls; another session's result is
    /// unknown to it (`read_result` pages only through its own session's outputs).
    async fn read_for_session(
        &self,
        session_id: &str,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError>;
}

/// An audit log kept in memory.
#[derive(Clone, Default)]
pub struct InMemoryAuditLog {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl InMemoryAuditLog {
    pub fn records(&self) -> Vec<AuditRecord> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .clone()
    }
}

#[async_trait]
impl AuditSink for InMemoryAuditLog {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError> {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
        Ok(())
    }
}

/// Offloaded outputs kept in memory, with the session that stored each.
#[derive(Clone, Default)]
pub struct InMemoryResultStore {
    results: Arc<Mutex<HashMap<String, StoredResult>>>,
}

/// The session that stored a result, and the result.
type StoredResult = (String, Arc<str>);

impl InMemoryResultStore {
    fn stored(&self, result_id: &str) -> Result<StoredResult, SinkError> {
        self.results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(result_id)
            .cloned()
            .ok_or_else(|| SinkError(format!("unknown result \"{result_id}\"")))
    }
}

/// Characters `offset..offset + limit` of `content`.
fn page(result_id: &str, content: &str, offset: u64, limit: u64) -> ResultPage {
    ResultPage {
        result_id: result_id.to_owned(),
        total_chars: content.chars().count() as u64,
        offset,
        content: content
            .chars()
            .skip(usize::try_from(offset).unwrap_or(usize::MAX))
            .take(usize::try_from(limit).unwrap_or(usize::MAX))
            .collect(),
    }
}

#[async_trait]
impl ResultStore for InMemoryResultStore {
    async fn offload(
        &self,
        session_id: &str,
        _call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, SinkError> {
        let result_id = format!("res_{}", uuid::Uuid::now_v7().simple());
        let total_chars = content.chars().count() as u64;
        self.results
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .insert(
                result_id.clone(),
                (session_id.to_owned(), Arc::from(content)),
            );
        Ok(OffloadedResult {
            result_id,
            total_chars,
        })
    }

    async fn read(
        &self,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        let (_, content) = self.stored(result_id)?;
        Ok(page(result_id, &content, offset, limit))
    }

    async fn read_for_session(
        &self,
        session_id: &str,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        match self.stored(result_id)? {
            (owner, content) if owner == session_id => Ok(page(result_id, &content, offset, limit)),
            _ => Err(SinkError(format!("unknown result \"{result_id}\""))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn offloaded_results_page_by_characters() {
        let store = InMemoryResultStore::default();
        let stored = store.offload("s", "c", "héllo wörld").await.unwrap();
        assert_eq!(stored.total_chars, 11);
        let page = store.read(&stored.result_id, 1, 4).await.unwrap();
        assert_eq!(page.content, "éllo");
        assert_eq!(page.total_chars, 11);
        let past_end = store.read(&stored.result_id, 50, 4).await.unwrap();
        assert_eq!(past_end.content, "");
        assert!(store.read("res_missing", 0, 1).await.is_err());
        let own = store
            .read_for_session("s", &stored.result_id, 0, 5)
            .await
            .unwrap();
        assert_eq!(own.content, "héllo");
        let other = store
            .read_for_session("other", &stored.result_id, 0, 5)
            .await;
        assert!(other.is_err(), "another session's result is unknown to it");
    }
}
