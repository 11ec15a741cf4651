//! A stdio server's pipes as rmcp's client transport ([`StdioTransport`]): newline-delimited
//! JSON-RPC, each message one line, in place of rmcp's `AsyncRwTransport` (issue 18: a bridged
//! call may add at most 150 µs to calling the server directly). rmcp's client still does the
//! handshake, the request ids, the routing of answers and notifications and the cancellation;
//! this module only turns lines into messages and messages into lines.
//!
//! - **Why not rmcp's.** Per call, `AsyncRwTransport` (with the meter toold put under it) went
//!   through a 4 KiB answer byte by byte twice, parsed it through rmcp's untagged
//!   `ServerResult` (fifteen variants tried before `CallToolResult`, each through serde's
//!   buffered `Content`), and wrote the request from a task of its own: about 230 000
//!   instructions of the daemon's 600 000 per bridged call (callgrind), on the path between the
//!   server's answer and the HTTP response. Here a line is found with `memchr`, parsed once into
//!   JSON, and a request is written from the service task as it is handed over.
//! - **Answers to `tools/call`** (their ids noted as the requests go out) are handed to rmcp as
//!   [`CustomResult`]s holding the result's JSON, which [`super::tool`] checks and renders
//!   ([`super::content`] reads results as JSON anyway). Every other message (the handshake,
//!   `tools/list`, notifications, a server's requests, errors) is read into rmcp's types from
//!   that JSON exactly as rmcp reads it.
//! - **As rmcp's** for what a server sends wrong: a line that is not JSON is skipped; JSON that
//!   is no message gets an `Invalid request` error back, unless it is a notification outside
//!   the protocol, which is skipped; blank lines, a UTF-8 BOM and a `\r` before the newline are
//!   allowed.
//! - **Oversized messages.** A line over [`MAX_MESSAGE_BYTES`] (with its newline) is dropped as
//!   it arrives, keeping its first and last bytes only. It is counted, and when those bytes show
//!   which request it answers (rmcp and Python write `"id"` before `"result"`, the TypeScript
//!   SDK writes it last) [`Routes`] is told, so that call fails at once instead of at its
//!   timeout.
//! - **Progress in order.** rmcp hands each notification to a task of its own, so progress
//!   reports could pass each other and the answer that follows them. `notifications/progress`
//!   is delivered from here, in order and before any later answer; the client handler then
//!   leaves stdio progress alone (the notification still goes on to rmcp).

use std::collections::HashSet;
use std::future::Future;
use std::pin::Pin;
use std::sync::atomic::Ordering;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};

use rmcp::model::{
    ClientNotification, ClientRequest, CustomResult, ErrorData, JsonRpcMessage, RequestId,
    ServerResult,
};
use rmcp::service::{RoleClient, RxJsonRpcMessage, TxJsonRpcMessage};
use rmcp::transport::Transport;
use serde::Deserialize;
use serde_json::{Map, Value};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};

use super::connection::{MAX_MESSAGE_BYTES, Routes};

/// How many bytes of an oversized line's start and end are kept to find its id.
const EDGE_BYTES: usize = 256;
/// What one read asks for.
const READ_BYTES: usize = 64 * 1024;
/// A buffer grown past this for a large message is given back once it is read.
const KEPT_BUFFER: usize = 1024 * 1024;
/// Past this many unanswered `tools/call` requests the list is forgotten (a server that never
/// answers and a caller that never cancels): their answers then take the general path.
const MAX_NOTED_CALLS: usize = 4096;

/// rmcp's client transport over a child's stdout (`R`) and stdin (`W`).
pub struct StdioTransport<R, W> {
    reader: R,
    /// The longest line read ([`MAX_MESSAGE_BYTES`]; less in tests).
    max_bytes: usize,
    /// Bytes read and not yet taken: the line being read, and any after it.
    buffer: Vec<u8>,
    /// How much of `buffer` was searched for a newline already.
    searched: usize,
    /// `Some` while an oversized line is being skipped: its last bytes, and whether its call
    /// was told already (from its first ones).
    skipping: Option<(Vec<u8>, bool)>,
    writer: Arc<tokio::sync::Mutex<Option<W>>>,
    /// The ids of `tools/call` requests sent and not yet answered.
    calls: Arc<Mutex<HashSet<RequestId>>>,
    routes: Arc<Routes>,
}

impl<R, W> StdioTransport<R, W> {
    pub fn new(reader: R, writer: W, routes: Arc<Routes>) -> StdioTransport<R, W> {
        routes.progress_read_in_order.store(true, Ordering::Release);
        StdioTransport {
            reader,
            max_bytes: MAX_MESSAGE_BYTES,
            buffer: Vec::new(),
            searched: 0,
            skipping: None,
            writer: Arc::new(tokio::sync::Mutex::new(Some(writer))),
            calls: Arc::default(),
            routes,
        }
    }

    #[cfg(test)]
    fn with_max_bytes(mut self, max_bytes: usize) -> StdioTransport<R, W> {
        self.max_bytes = max_bytes;
        self
    }
}

/// What a line was.
enum Line {
    Message(Box<RxJsonRpcMessage<RoleClient>>),
    /// Nothing to hand on (blank, not JSON, a notification outside the protocol).
    Skipped,
    /// JSON that is no message: rmcp answers `Invalid request`.
    Invalid,
}

impl<R, W> StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    /// The next line, or `None` at the end of the stream. Cancel-safe: everything read stays
    /// in `self` between awaits, and a read either fills the buffer or leaves it as it was.
    async fn next_line(&mut self) -> Option<std::ops::Range<usize>> {
        loop {
            if let Some(end) = self.take_newline() {
                match self.skipping.take() {
                    Some((mut tail, told)) => {
                        tail.extend_from_slice(&self.buffer[..end]);
                        self.oversized_end(&tail, told);
                        self.consume(end + 1);
                    }
                    None if end + 1 > self.max_bytes => {
                        let told = self.oversized_start();
                        self.oversized_end(&self.buffer[end.saturating_sub(EDGE_BYTES)..end], told);
                        self.consume(end + 1);
                    }
                    None => return Some(0..end),
                }
                continue;
            }
            if let Some((tail, _)) = &mut self.skipping {
                keep_last(tail, &self.buffer);
                self.buffer.clear();
                self.searched = 0;
            } else if self.buffer.len() > self.max_bytes {
                let told = self.oversized_start();
                let mut tail = Vec::with_capacity(2 * EDGE_BYTES);
                keep_last(&mut tail, &self.buffer);
                self.consume(self.buffer.len());
                self.skipping = Some((tail, told));
            }
            if self.buffer.capacity() - self.buffer.len() < READ_BYTES / 4 {
                self.buffer.reserve(READ_BYTES);
            }
            match self.reader.read_buf(&mut self.buffer).await {
                Ok(0) => return None,
                Ok(_) => {}
                Err(err) => {
                    tracing::error!(error = %err, "reading an MCP server's stdout failed");
                    return None;
                }
            }
        }
    }

    /// Where the next newline in the buffer is, searching only what was not searched yet.
    fn take_newline(&mut self) -> Option<usize> {
        match memchr::memchr(b'\n', &self.buffer[self.searched..]) {
            Some(at) => Some(self.searched + at),
            None => {
                self.searched = self.buffer.len();
                None
            }
        }
    }

    /// Drops the first `bytes` of the buffer (a line and its newline).
    fn consume(&mut self, bytes: usize) {
        self.buffer.drain(..bytes);
        self.searched = 0;
        if self.buffer.capacity() > KEPT_BUFFER && self.buffer.len() < READ_BYTES {
            self.buffer.shrink_to(READ_BYTES);
        }
    }

    /// An oversized line began (its first bytes lead the buffer): counted, and its call told
    /// when its id comes first; whether it was.
    fn oversized_start(&self) -> bool {
        tracing::error!(
            max_bytes = self.max_bytes,
            "an MCP server's message exceeded the maximum size, discarding it"
        );
        self.routes.discarded();
        let head = &self.buffer[..self.buffer.len().min(EDGE_BYTES)];
        match leading_id(head) {
            Some(id) => {
                self.routes.discarded_answer(id);
                true
            }
            None => false,
        }
    }

    /// An oversized line ended with `tail`: its call told when its id comes last.
    fn oversized_end(&self, tail: &[u8], told: bool) {
        if !told && let Some(id) = trailing_id(&tail[tail.len().saturating_sub(EDGE_BYTES)..]) {
            self.routes.discarded_answer(id);
        }
    }

    /// What a line is (without its newline).
    fn read_line(&self, line: &[u8]) -> Line {
        let line = line.strip_suffix(b"\r").unwrap_or(line);
        let line = line.strip_prefix(b"\xEF\xBB\xBF").unwrap_or(line);
        if line.is_empty() {
            return Line::Skipped;
        }
        let value: Value = match serde_json::from_slice(line) {
            Ok(value) => value,
            Err(err) => {
                // As rmcp: no id to answer, and answering garbage can start an error storm.
                tracing::debug!(error = %err, "ignoring an unparsable line from an MCP server");
                return Line::Skipped;
            }
        };
        let Value::Object(mut message) = value else {
            return Line::Invalid;
        };
        if let Some(id) = self.call_answered(&message)
            && let Some(result) = message.remove("result")
        {
            let answer =
                JsonRpcMessage::response(ServerResult::CustomResult(CustomResult(result)), id);
            return Line::Message(Box::new(answer));
        }
        if is_progress(&message) {
            let params = message.get("params").cloned().unwrap_or(Value::Null);
            if let Ok(params) = serde_json::from_value(params) {
                self.routes.deliver_progress(params);
            }
        }
        let method = message
            .get("method")
            .and_then(Value::as_str)
            .map(str::to_owned);
        let is_notification = !message.contains_key("id");
        match serde_json::from_value::<RxJsonRpcMessage<RoleClient>>(Value::Object(message)) {
            Ok(message) => Line::Message(Box::new(message)),
            Err(_) if method.is_some_and(|m| ignored_notification(&m, is_notification)) => {
                Line::Skipped
            }
            Err(err) => {
                tracing::debug!(error = %err, "an MCP server sent JSON that is no message");
                Line::Invalid
            }
        }
    }

    /// The id of the `tools/call` request `message` answers (a result or an error), no longer
    /// noted.
    fn call_answered(&self, message: &Map<String, Value>) -> Option<RequestId> {
        if message.get("jsonrpc").and_then(Value::as_str) != Some("2.0") {
            return None;
        }
        let id = RequestId::deserialize(message.get("id")?).ok()?;
        let answered = message.contains_key("result") || message.contains_key("error");
        (answered && lock(&self.calls).remove(&id)).then_some(id)
    }
}

impl<R, W> Transport<RoleClient> for StdioTransport<R, W>
where
    R: AsyncRead + Unpin + Send,
    W: AsyncWrite + Unpin + Send + 'static,
{
    type Error = std::io::Error;

    /// Writes `item` as a line. The write is started here, in rmcp's service task, as the
    /// request is handed over, rather than in the task rmcp spawns for the returned future:
    /// the request reaches the server one task hop sooner. What a full pipe leaves unwritten
    /// is finished by that future, in order (the writer's lock is held until the line is out).
    fn send(
        &mut self,
        item: TxJsonRpcMessage<RoleClient>,
    ) -> impl Future<Output = Result<(), Self::Error>> + Send + 'static {
        self.note(&item);
        let line = serde_json::to_vec(&item).map(|mut line| {
            line.push(b'\n');
            line
        });
        let writer = self.writer.clone();
        let mut write: Pin<Box<dyn Future<Output = std::io::Result<()>> + Send>> =
            Box::pin(async move {
                let line = line.map_err(std::io::Error::other)?;
                let mut writer = writer.lock_owned().await;
                let Some(stdin) = writer.as_mut() else {
                    return Err(std::io::Error::new(
                        std::io::ErrorKind::NotConnected,
                        "the transport is closed",
                    ));
                };
                stdin.write_all(&line).await?;
                stdin.flush().await
            });
        // Polled once without a waker: a later poll (rmcp's task) registers its own.
        let now = write.as_mut().poll(&mut Context::from_waker(Waker::noop()));
        async move {
            match now {
                Poll::Ready(result) => result,
                Poll::Pending => write.await,
            }
        }
    }

    async fn receive(&mut self) -> Option<RxJsonRpcMessage<RoleClient>> {
        loop {
            let range = self.next_line().await?;
            let end = range.end;
            let line = self.read_line(&self.buffer[range]);
            self.consume(end + 1);
            match line {
                Line::Message(message) => return Some(*message),
                Line::Skipped => {}
                Line::Invalid => {
                    let refusal = JsonRpcMessage::error(
                        ErrorData::invalid_request("Invalid request", None),
                        None,
                    );
                    // On a task of its own: rmcp drops this future whenever another event
                    // comes first, and a refusal cut off half-written (a full pipe) would run
                    // into the next line. The writer's lock keeps the lines whole and in order.
                    let refusing = self.send(refusal);
                    tokio::spawn(async move {
                        if let Err(err) = refusing.await {
                            tracing::debug!(error = %err, "an MCP server's stdin took no refusal");
                        }
                    });
                }
            }
        }
    }

    async fn close(&mut self) -> Result<(), Self::Error> {
        drop(self.writer.lock().await.take());
        Ok(())
    }
}

impl<R, W> StdioTransport<R, W> {
    /// Notes a `tools/call` request's id (its answer takes the short path); forgets the id of
    /// a call being cancelled.
    fn note(&self, item: &TxJsonRpcMessage<RoleClient>) {
        match item {
            JsonRpcMessage::Request(request)
                if matches!(request.request, ClientRequest::CallToolRequest(_)) =>
            {
                let mut calls = lock(&self.calls);
                if calls.len() >= MAX_NOTED_CALLS {
                    calls.clear();
                }
                calls.insert(request.id.clone());
            }
            JsonRpcMessage::Notification(notification) => {
                if let ClientNotification::CancelledNotification(cancelled) =
                    &notification.notification
                    && let Some(id) = &cancelled.params.request_id
                {
                    lock(&self.calls).remove(id);
                }
            }
            _ => {}
        }
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only whole ids are inserted or removed under this lock.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// Appends `bytes` to `tail`, keeping its last [`EDGE_BYTES`].
fn keep_last(tail: &mut Vec<u8>, bytes: &[u8]) {
    tail.extend_from_slice(&bytes[bytes.len().saturating_sub(EDGE_BYTES)..]);
    let extra = tail.len().saturating_sub(EDGE_BYTES);
    tail.drain(..extra);
}

/// Whether `message` is a `notifications/progress` (a notification: no id).
fn is_progress(message: &Map<String, Value>) -> bool {
    message.get("method").and_then(Value::as_str) == Some("notifications/progress")
        && !message.contains_key("id")
}

/// Whether a message that is not one of rmcp's is a notification rmcp skips rather than
/// refuses: any outside the protocol's methods, and any `notifications/…` it does not know
/// (rmcp's `should_ignore_notification`, at rmcp 3.11).
fn ignored_notification(method: &str, is_notification: bool) -> bool {
    (is_notification && !is_standard_method(method))
        || (method.starts_with("notifications/") && !is_standard_notification(method))
}

fn is_standard_method(method: &str) -> bool {
    matches!(
        method,
        "initialize"
            | "ping"
            | "server/discover"
            | "prompts/get"
            | "prompts/list"
            | "resources/list"
            | "resources/read"
            | "resources/subscribe"
            | "resources/unsubscribe"
            | "resources/templates/list"
            | "subscriptions/listen"
            | "tools/call"
            | "tools/list"
            | "completion/complete"
            | "elicitation/create"
            | "logging/setLevel"
            | "roots/list"
            | "sampling/createMessage"
    ) || is_standard_notification(method)
}

fn is_standard_notification(method: &str) -> bool {
    matches!(
        method,
        "notifications/cancelled"
            | "notifications/initialized"
            | "notifications/message"
            | "notifications/progress"
            | "notifications/prompts/list_changed"
            | "notifications/resources/list_changed"
            | "notifications/resources/updated"
            | "notifications/roots/list_changed"
            | "notifications/subscriptions/acknowledged"
            | "notifications/tools/list_changed"
    )
}

/// The id of a JSON-RPC answer from the start of its text, when `"id"` comes before
/// `"result"` or `"error"` (as rmcp and Python write it) and is a number or a plain string.
pub(super) fn leading_id(head: &[u8]) -> Option<String> {
    let head = String::from_utf8_lossy(head);
    let at = head.find("\"id\"")?;
    let body = ["\"result\"", "\"error\""]
        .iter()
        .filter_map(|key| head.find(key))
        .min()
        .unwrap_or(usize::MAX);
    if at > body {
        return None;
    }
    id_value(head[at + 4..].trim_start().strip_prefix(':')?)
}

/// The id of a JSON-RPC answer from the end of its text, when `"id"` is its last member (as
/// the TypeScript SDK writes it: `…,"jsonrpc":"2.0","id":2}`).
pub(super) fn trailing_id(tail: &[u8]) -> Option<String> {
    let tail = String::from_utf8_lossy(tail);
    let tail = tail.trim_end().strip_suffix('}')?.trim_end();
    let at = tail.rfind("\"id\"")?;
    let value = tail[at + 4..].trim_start().strip_prefix(':')?.trim();
    let plain = value.parse::<i64>().is_ok()
        || value.len() >= 2
            && value.starts_with('"')
            && value.ends_with('"')
            && !value[1..value.len() - 1].contains('"');
    plain.then(|| value.to_owned())
}

/// A number or a plain string at the start of `rest`, as JSON text; `None` when it may go on.
fn id_value(rest: &str) -> Option<String> {
    let rest = rest.trim_start();
    let end = if let Some(text) = rest.strip_prefix('"') {
        text.find('"')? + 2
    } else {
        rest.find(|c: char| !c.is_ascii_digit() && c != '-')?
    };
    serde_json::from_str::<Value>(&rest[..end])
        .ok()
        .map(|id| id.to_string())
}

#[cfg(test)]
#[path = "stdio_tests.rs"]
mod tests;
