//! `notifications/tools/list_changed` when a session's pool changes (DESIGN §8): when a call
//! of `tool_search` loads deferred tools, or a bridged MCP server lists its tools anew (a
//! restart, its own `list_changed`); both through [`ToolService::watch_tool_list`].
//!
//! Decisions:
//! - **2025 era:** once the client says `notifications/initialized`, a task watches the
//!   legacy MCP session's toold session and sends each change through rmcp's peer, which puts
//!   notifications that answer no request on the session's GET stream (a client without one
//!   open misses them, as the revision allows). The task ends with the MCP session (its
//!   handler is dropped), the toold session, or the first notification the peer cannot send.
//! - **2026 era:** a stateless client opens `subscriptions/listen` asking for
//!   `toolsListChanged`; this door accepts only that category (it has no changing prompts or
//!   resources to announce), and the stream carries each change until the client or the
//!   daemon ends it.
//! - **Changes coalesce.** The watch holds the latest version only: several tools loaded
//!   while one notification is in flight give one more, which is all a client needs to list
//!   again.

use std::sync::Arc;

use rmcp::RoleServer;
use rmcp::model::SubscriptionFilter;
use rmcp::service::{Peer, SubscriptionContext};
use tokio::sync::watch;
use tokio_util::sync::CancellationToken;

use crate::permission::Principal;
use crate::service::ToolService;

/// Announces `session`'s pool changes to a legacy MCP session's `peer` until `ended` fires.
pub fn announce_to_peer(
    service: &Arc<ToolService>,
    caller: &Principal,
    session: &str,
    peer: Peer<RoleServer>,
    ended: CancellationToken,
) {
    let Ok(mut changes) = service.watch_tool_list(caller, session) else {
        return;
    };
    changes.mark_unchanged();
    tokio::spawn(async move {
        while next_change(&mut changes, &ended).await {
            if let Err(err) = peer.notify_tool_list_changed().await {
                tracing::debug!(%err, "an MCP list_changed notification was not sent");
                return;
            }
        }
    });
}

/// The categories a `subscriptions/listen` may have: tool list changes.
pub fn accepted_filter() -> SubscriptionFilter {
    SubscriptionFilter::builder().tools_list_changed().build()
}

/// Runs a `subscriptions/listen` stream for `session` until the client ends it.
pub async fn listen(
    service: &ToolService,
    caller: &Principal,
    session: &str,
    subscription: SubscriptionContext,
) {
    let Ok(mut changes) = service.watch_tool_list(caller, session) else {
        return;
    };
    changes.mark_unchanged();
    let ended = subscription.request_context().ct.clone();
    while next_change(&mut changes, &ended).await {
        if let Err(err) = subscription.sink().notify_tool_list_changed().await {
            tracing::debug!(%err, "an MCP list_changed notification was not sent");
            return;
        }
    }
}

/// Waits for the next change; false once `ended` fires or the session is gone.
async fn next_change(changes: &mut watch::Receiver<u64>, ended: &CancellationToken) -> bool {
    tokio::select! {
        _ = ended.cancelled() => false,
        changed = changes.changed() => changed.is_ok(),
    }
}
