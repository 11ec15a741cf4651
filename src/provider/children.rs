//! The port through which the `agent` tool gets a child session for its sub-agent: the hub
//! declares it, the service implements it (branch `agent`), the server wiring hands the hub a
//! weak reference with [`super::ProviderHub::set_child_sessions`]. Weak, because the service
//! owns the hub: the port must not keep the service alive.

/// Child sessions for the `agent` tool; implemented by the service (branch `agent`).
#[async_trait::async_trait]
pub trait ChildSessions: Send + Sync + 'static {
    /// Opens a child session of `parent_session_id` for the call `call_id` of the `agent` tool.
    async fn open_child(
        &self,
        parent_session_id: &str,
        call_id: &str,
    ) -> Result<ChildSession, String>;
    /// Closes the child (cancelling its running calls); called once the call has ended.
    async fn close_child(&self, child_session_id: &str);
}

/// A child session as the `agent` provider receives it in its invocation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChildSession {
    pub session_id: String,
    pub token: String,
}
