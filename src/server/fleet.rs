//! This daemon among others: its heartbeat in the store (with the address clients reach it
//! at), and, on a store several daemons share, taking over from daemons that fell silent.
//!
//! Every `heartbeat_interval` the daemon records itself. A daemon silent for `node_timeout`
//! is taken for stopped: the first daemon to claim it (`Store::claim_silent_node`, exactly
//! one wins) marks its unfinished calls interrupted and adopts the sessions whose working
//! directory it sees (`ToolService::take_over`). A daemon that restarts beats again, which
//! clears the claim, and restores the sessions still its own.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;

use crate::service::ToolService;
use crate::store::{NodeRecord, Store, StoreError};

/// This daemon as the store knows it.
#[derive(Clone, Debug)]
pub struct NodeIdentity {
    pub node_id: String,
    pub address: String,
    pub started_at: SystemTime,
}

impl NodeIdentity {
    fn record(&self) -> NodeRecord {
        NodeRecord {
            id: self.node_id.clone(),
            address: self.address.clone(),
            started_at: self.started_at,
            heartbeat_at: SystemTime::now(),
        }
    }
}

/// Records the node once (at start, before serving).
pub async fn heartbeat(store: &dyn Store, node: &NodeIdentity) -> Result<(), StoreError> {
    store.heartbeat(&node.record()).await
}

/// Beats every `interval` and, on a shared store, takes over from nodes silent for `timeout`.
pub fn spawn(
    store: Arc<dyn Store>,
    service: Arc<ToolService>,
    node: NodeIdentity,
    interval: Duration,
    timeout: Duration,
    stop: CancellationToken,
) -> JoinHandle<()> {
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = tokio::time::sleep(interval) => {}
                () = stop.cancelled() => return,
            }
            if let Err(err) = heartbeat(&*store, &node).await {
                tracing::warn!(error = %err, "heartbeat failed");
                continue;
            }
            if store.is_shared() {
                take_over_silent(&*store, &service, &node, timeout).await;
            }
        }
    })
}

async fn take_over_silent(
    store: &dyn Store,
    service: &ToolService,
    node: &NodeIdentity,
    timeout: Duration,
) {
    let silent_since = SystemTime::now() - timeout;
    let nodes = match store.list_nodes().await {
        Ok(nodes) => nodes,
        Err(err) => {
            tracing::warn!(error = %err, "listing nodes failed");
            return;
        }
    };
    for other in nodes {
        if other.id == node.node_id || other.heartbeat_at >= silent_since {
            continue;
        }
        match store
            .claim_silent_node(&other.id, silent_since, &node.node_id)
            .await
        {
            Ok(true) => {}
            Ok(false) => continue,
            Err(err) => {
                tracing::warn!(node = %other.id, error = %err, "claiming a silent node failed");
                continue;
            }
        }
        match service.take_over(&other.id).await {
            Ok(done) => tracing::warn!(
                node = %other.id,
                interrupted_calls = done.interrupted_calls,
                adopted = ?done.adopted,
                "took over from a silent node"
            ),
            Err(err) => tracing::error!(node = %other.id, error = %err, "taking over failed"),
        }
    }
}
