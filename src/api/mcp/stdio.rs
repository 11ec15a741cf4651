//! The MCP door over stdio (`toold mcp`, DESIGN §8): the same [`McpHandler`] as on HTTP,
//! bound to one toold session for the connection's life, speaking newline-delimited
//! JSON-RPC on stdin and stdout (rmcp's `transport-io`). Stdout is the protocol: nothing else
//! may write there (logs go to stderr, and the tools' processes get no stdin and piped
//! output).
//!
//! What rmcp 3.11 does on this transport, read from its source (`transport/async_rw.rs`,
//! `service.rs`), and so what a client sees:
//!
//! - **Framing.** One JSON-RPC message per line; a blank line is skipped; a line longer than
//!   the codec's limit is discarded with an error log. The pipes are read through
//!   `stdio_pipes` (non-blocking on Linux, reopened through `/proc/self/fd` so the process's
//!   own descriptors, and any child's, keep their flags).
//! - **Malformed input.** A line that is not JSON is dropped without an answer (there is no
//!   id to answer, and answering garbage can start an error storm with a peer that echoes;
//!   the other official SDKs do the same). A line that is JSON but not a JSON-RPC message is
//!   answered with `-32600` (Invalid Request, id `null`). Either way the connection goes on.
//! - **Lifecycle.** `initialize` must come first (anything else ends the connection with an
//!   error); EOF on stdin ends it, after up to 5 seconds for answers still being written.
//! - **Unknown methods** are answered `-32601`; an unknown tool is `-32602` (`handler`).

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio_util::sync::CancellationToken;

use super::handler::McpHandler;
use crate::service::ToolService;

/// Why a stdio MCP connection ended badly.
#[derive(Debug, thiserror::Error)]
pub enum StdioError {
    #[error("MCP initialization: {0}")]
    Initialize(String),
    #[error("the MCP connection's task failed: {0}")]
    Task(String),
}

/// Serves MCP on stdin/stdout in `session` until stdin ends (the client closed it) or `stop`
/// fires; the session is left open for the caller to close. A client that goes away before
/// `initialize` is a normal end, not an error.
pub async fn serve_stdio(
    service: Arc<ToolService>,
    session: String,
    stop: CancellationToken,
) -> Result<(), StdioError> {
    let handler = McpHandler::for_session(service, session);
    let transport = rmcp::transport::io::stdio_pipes();
    let running = match handler.serve_with_ct(transport, stop).await {
        Ok(running) => running,
        Err(ServerInitializeError::ConnectionClosed(_) | ServerInitializeError::Cancelled) => {
            return Ok(());
        }
        Err(err) => return Err(StdioError::Initialize(err.to_string())),
    };
    let reason = running
        .waiting()
        .await
        .map_err(|err| StdioError::Task(err.to_string()))?;
    tracing::debug!(?reason, "the MCP connection ended");
    Ok(())
}
