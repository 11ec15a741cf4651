//! The store as permission's approval ledger: `permission::Approvals` records, lists and
//! settles approvals through [`ApprovalLedger`], a port permission defines so that it does not
//! depend on the store; this file implements it with the store's approval methods.

use std::sync::Arc;

use async_trait::async_trait;

use super::{ApprovalRecord, Store, StoreError};
use crate::permission::{ApprovalLedger, Approvals, NewApproval};

/// The daemon's approvals, kept in its store.
pub type StoreApprovals = Approvals<StoreLedger>;

/// The store, seen as an approval ledger. A newtype rather than an impl on `Arc<dyn Store>`,
/// whose implicit `'static` trips the compiler's check that the doors' futures are `Send`.
pub struct StoreLedger(pub Arc<dyn Store>);

impl From<Arc<dyn Store>> for StoreLedger {
    fn from(store: Arc<dyn Store>) -> StoreLedger {
        StoreLedger(store)
    }
}

#[async_trait]
impl ApprovalLedger for StoreLedger {
    type Error = StoreError;

    async fn insert_approval(&self, approval: NewApproval<'_>) -> Result<(), StoreError> {
        let record = ApprovalRecord {
            id: approval.id.to_owned(),
            session_id: approval.session_id.to_owned(),
            call_id: approval.call_id.to_owned(),
            tool: approval.tool.to_owned(),
            input: approval.input.clone(),
            reason: approval.reason.to_owned(),
            created_at: approval.created_at,
            decision: None,
            decided_by: None,
            decided_at: None,
        };
        // Method syntax, so this keeps working whichever trait of the store declares it.
        self.0.insert_approval(&record).await
    }

    async fn pending_approval_ids(&self, session_id: &str) -> Result<Vec<String>, StoreError> {
        let pending = self.0.pending_approvals(session_id).await?;
        Ok(pending.into_iter().map(|approval| approval.id).collect())
    }

    async fn resolve_approval(
        &self,
        approval_id: &str,
        decision: &str,
        decided_by: &str,
    ) -> Result<bool, StoreError> {
        self.0
            .resolve_approval(approval_id, decision, decided_by)
            .await
    }
}
