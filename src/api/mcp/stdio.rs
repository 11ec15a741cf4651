//! The MCP door over stdio (`toold mcp`, DESIGN §8): the same [`McpHandler`] as on HTTP,
//! bound to one toold session for the connection's life, speaking newline-delimited
//! JSON-RPC on stdin and stdout. Stdout is the protocol: nothing else may write there (logs go
//! to stderr, and the tools' processes get no stdin and piped output).
//!
//! rmcp's line transport (`transport/async_rw.rs`) drops a line that is not JSON without an
//! answer, so toold reads stdin itself and hands rmcp only what passed [`envelope::check`]:
//!
//! ```text
//! stdin ─ lines ─▶ check ─ a message ─▶ pipe ─▶ rmcp (its codec, the handler) ─▶ pipe ─┐
//!                    └──── refused: the JSON-RPC error line ───────────────────────────┴▶ stdout
//! ```
//!
//! One task writes stdout, a line at a time, so a refusal never lands inside an answer.
//!
//! - **Framing.** One JSON-RPC message per line; a blank line is skipped; a leading UTF-8 BOM
//!   is dropped (as rmcp's codec does); a last line without a newline still counts. The pipes
//!   are read through `stdio_pipes` (non-blocking on Linux, reopened through
//!   `/proc/self/fd` so the process's own descriptors, and any child's, keep their flags).
//! - **Malformed input.** A line that is not JSON is answered `-32700` (id `null`), a batch
//!   array and JSON that is not a JSON-RPC message `-32600`, a line longer than the body limit
//!   `-32600` (it is discarded as it is read, never held); the connection goes on. rmcp
//!   answers nothing to a line that is not JSON, lest a peer that echoes start an error
//!   storm; the answer here is itself a JSON-RPC message, which rmcp ignores when echoed
//!   back, so no storm follows, and JSON-RPC 2.0 asks for it. A line with a message's
//!   outline whose fields rmcp still cannot parse gets rmcp's own `-32600` (no id).
//! - **Lifecycle.** `initialize` must come first (anything else ends the connection with an
//!   error); EOF on stdin ends it, after up to 5 seconds for answers still being written.
//! - **Unknown methods** are answered `-32601`; an unknown tool or params that do not fit the
//!   method are `-32602` (`handler`).

use std::sync::Arc;

use rmcp::ServiceExt;
use rmcp::service::ServerInitializeError;
use tokio::io::{
    AsyncBufRead, AsyncBufReadExt, AsyncRead, AsyncWrite, AsyncWriteExt, BufReader, DuplexStream,
};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;

use super::envelope::{self, Refusal};
use super::handler::McpHandler;
use crate::service::ToolService;

/// What each pipe between toold's lines and rmcp buffers.
const PIPE_BYTES: usize = 64 * 1024;
/// Lines waiting for stdout.
const QUEUED_LINES: usize = 64;
const UTF8_BOM: &[u8] = b"\xEF\xBB\xBF";

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
/// `initialize` is a normal end, not an error. A line longer than `max_message_bytes` is
/// refused.
pub async fn serve_stdio(
    service: Arc<ToolService>,
    session: String,
    max_message_bytes: usize,
    stop: CancellationToken,
) -> Result<(), StdioError> {
    let handler = McpHandler::for_session(service, session);
    let (stdin, stdout) = rmcp::transport::io::stdio_pipes();
    // A duplex pipe, not two simplex ones: rmcp drops its transport without shutting it
    // down, and only a dropped duplex end tells the other that it ended.
    let (rmcp_end, toold_end) = tokio::io::duplex(PIPE_BYTES);
    let (from_rmcp, to_rmcp) = tokio::io::split(toold_end);
    let (lines, queued) = mpsc::channel(QUEUED_LINES);
    let writer = tokio::spawn(write_lines(queued, stdout));
    let answers = tokio::spawn(forward_lines(from_rmcp, lines.clone()));
    let reader = tokio::spawn(read_messages(stdin, to_rmcp, lines, max_message_bytes));
    let served = serve(handler, rmcp_end, stop).await;
    // rmcp has let its transport go, so its answers end; stdin may still be open (`stop`
    // fired, or rmcp ended the connection) with a read pending.
    reader.abort();
    let _ = answers.await;
    let _ = writer.await;
    served
}

async fn serve(
    handler: McpHandler,
    transport: DuplexStream,
    stop: CancellationToken,
) -> Result<(), StdioError> {
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

/// Stdin's lines: each message on to rmcp, each refusal to stdout. Ends at EOF, or when rmcp
/// or stdout is gone, and then tells rmcp that its input ended.
async fn read_messages<R, W>(stdin: R, mut to_rmcp: W, lines: mpsc::Sender<Vec<u8>>, limit: usize)
where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    filter_lines(BufReader::new(stdin), &mut to_rmcp, &lines, limit).await;
    let _ = to_rmcp.shutdown().await;
}

async fn filter_lines<R, W>(
    mut stdin: BufReader<R>,
    to_rmcp: &mut W,
    lines: &mpsc::Sender<Vec<u8>>,
    limit: usize,
) where
    R: AsyncRead + Unpin,
    W: AsyncWrite + Unpin,
{
    let mut line = Vec::new();
    loop {
        let refusal = match read_line(&mut stdin, &mut line, limit).await {
            Err(err) => {
                tracing::error!(%err, "reading stdin");
                return;
            }
            Ok(LineRead::Eof) => return,
            Ok(LineRead::TooLong) => Refusal::too_long(limit),
            Ok(LineRead::Line) => {
                let message = message_of(&line);
                if message.iter().all(u8::is_ascii_whitespace) {
                    continue;
                }
                match envelope::check(message) {
                    Ok(_) => {
                        let passed = to_rmcp.write_all(message).await.is_ok()
                            && to_rmcp.write_all(b"\n").await.is_ok();
                        if !passed {
                            return;
                        }
                        continue;
                    }
                    Err(refusal) => refusal,
                }
            }
        };
        tracing::debug!(code = refusal.code(), "refused a line on stdin");
        let mut answer = refusal.to_json();
        answer.push(b'\n');
        if lines.send(answer).await.is_err() {
            return;
        }
    }
}

/// A line without its line ending and a leading byte order mark.
fn message_of(line: &[u8]) -> &[u8] {
    let line = line.strip_suffix(b"\n").unwrap_or(line);
    let line = line.strip_suffix(b"\r").unwrap_or(line);
    line.strip_prefix(UTF8_BOM).unwrap_or(line)
}

#[derive(Debug, PartialEq)]
enum LineRead {
    Line,
    /// Longer than the limit: read to its end and dropped.
    TooLong,
    Eof,
}

/// The next line into `line` (cleared first), its newline included; a last line without a
/// newline counts. A line longer than `limit` (its newline aside) is consumed as it comes,
/// never held.
async fn read_line<R: AsyncBufRead + Unpin>(
    reader: &mut R,
    line: &mut Vec<u8>,
    limit: usize,
) -> std::io::Result<LineRead> {
    line.clear();
    let mut too_long = false;
    loop {
        let available = reader.fill_buf().await?;
        if available.is_empty() {
            return Ok(match (too_long, line.is_empty()) {
                (true, _) => LineRead::TooLong,
                (false, true) => LineRead::Eof,
                (false, false) => LineRead::Line,
            });
        }
        let newline = available.iter().position(|byte| *byte == b'\n');
        let take = newline.map_or(available.len(), |at| at + 1);
        if !too_long && line.len() + take > limit.saturating_add(1) {
            too_long = true;
            line.clear();
        }
        if !too_long {
            line.extend_from_slice(&available[..take]);
        }
        reader.consume(take);
        if newline.is_some() {
            return Ok(if too_long {
                LineRead::TooLong
            } else {
                LineRead::Line
            });
        }
    }
}

/// rmcp's answers, a line at a time, to stdout's queue. When stdout is gone this returns, and
/// rmcp's next write fails, which ends the connection.
async fn forward_lines<R: AsyncRead + Unpin>(from_rmcp: R, lines: mpsc::Sender<Vec<u8>>) {
    let mut from_rmcp = BufReader::new(from_rmcp);
    loop {
        let mut line = Vec::new();
        match from_rmcp.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) if lines.send(line).await.is_err() => return,
            Ok(_) => {}
        }
    }
}

/// The one writer of stdout: whole lines, flushed whenever none is waiting.
async fn write_lines<W: AsyncWrite + Unpin>(mut queued: mpsc::Receiver<Vec<u8>>, mut stdout: W) {
    while let Some(line) = queued.recv().await {
        let mut written = stdout.write_all(&line).await;
        if written.is_ok() && queued.is_empty() {
            written = stdout.flush().await;
        }
        if let Err(err) = written {
            tracing::warn!(%err, "writing stdout; the MCP connection ends");
            return;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn lines_are_read_whole_and_a_long_one_is_dropped_without_being_held() {
        let input: &[u8] = b"short\r\n0123456789abc\n\nlast";
        // A small buffer, so that lines span reads.
        let mut reader = BufReader::with_capacity(4, input);
        let mut line = Vec::new();
        let mut seen = Vec::new();
        loop {
            let read = read_line(&mut reader, &mut line, 8).await.unwrap();
            if read == LineRead::Eof {
                break;
            }
            assert!(line.len() <= 9, "{line:?}");
            seen.push((read, String::from_utf8(message_of(&line).to_vec()).unwrap()));
        }
        assert_eq!(
            seen,
            [
                (LineRead::Line, "short".to_owned()),
                (LineRead::TooLong, String::new()),
                (LineRead::Line, String::new()),
                (LineRead::Line, "last".to_owned()),
            ]
        );
    }

    #[test]
    fn a_byte_order_mark_and_line_endings_are_not_the_message() {
        assert_eq!(message_of(b"\xEF\xBB\xBF{}\r\n"), b"{}");
        assert_eq!(message_of(b"{}"), b"{}");
    }
}
