//! A stdio server's stdout, measured on its way to rmcp ([`LineMeter`]): the two things rmcp
//! does not do for the bridge.
//!
//! - **Oversized messages.** rmcp drops a line over [`MAX_MESSAGE_BYTES`] without a word to
//!   the call waiting for it. The meter counts it and reads which request it answers from its
//!   first bytes (rmcp and Python write `"id"` before `"result"`) or its last (the TypeScript
//!   SDK writes it last), so that call fails at once instead of at its timeout.
//! - **Progress in order.** rmcp hands each notification to a task of its own, so progress
//!   reports can pass each other and the answer that follows them (and be lost). The meter
//!   reads `notifications/progress` off the stream itself, in order, before rmcp reads the
//!   answer; the client handler then leaves stdio progress alone.

use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::Ordering;
use std::task::{Context, Poll};

use serde_json::Value;
use tokio::io::{AsyncRead, ReadBuf};

use super::connection::{MAX_MESSAGE_BYTES, Routes};

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

/// A server's stdout, measuring the line being read: a line that passes
/// [`MAX_MESSAGE_BYTES`] (rmcp drops it without a word to the call waiting for it) is counted,
/// and when its first or last bytes show which request it answers, [`Routes`] is told, so that
/// call fails at once.
pub struct LineMeter<R> {
    inner: R,
    /// Bytes since the last newline.
    line: usize,
    /// The first [`EDGE_BYTES`] of the line, and (once it is over the limit) its last ones.
    head: Vec<u8>,
    tail: Vec<u8>,
    /// The line's answer was told already (from its head).
    told: bool,
    /// The whole line while it is short (a progress notification is read from it).
    short: Vec<u8>,
    routes: Arc<Routes>,
}

const EDGE_BYTES: usize = 256;
/// The longest line kept whole, for a progress notification.
const SHORT_LINE: usize = 16 * 1024;

impl<R> LineMeter<R> {
    pub fn new(inner: R, routes: Arc<Routes>) -> LineMeter<R> {
        routes.progress_read_in_order.store(true, Ordering::Release);
        LineMeter {
            inner,
            line: 0,
            head: Vec::new(),
            tail: Vec::new(),
            told: false,
            short: Vec::new(),
            routes,
        }
    }

    /// A whole short line: a progress notification is delivered.
    fn short_line(&self) {
        const PROGRESS: &[u8] = b"\"notifications/progress\"";
        const RESULT: &[u8] = b"\"result\"";
        let has = |text: &[u8], what: &[u8]| text.windows(what.len()).any(|w| w == what);
        // The SDKs write a notification's method first: the head usually tells. An answer
        // (its "result" early) is not searched through.
        let progress =
            has(&self.head, PROGRESS) || !has(&self.head, RESULT) && has(&self.short, PROGRESS);
        if !progress {
            return;
        }
        let Ok(message) = serde_json::from_slice::<Value>(&self.short) else {
            return;
        };
        let is_progress = message.get("method").and_then(Value::as_str)
            == Some("notifications/progress")
            && message.get("id").is_none();
        let params = message.get("params").cloned().unwrap_or(Value::Null);
        if let (true, Ok(params)) = (is_progress, serde_json::from_value(params)) {
            self.routes.deliver_progress(params);
        }
    }

    fn measure(&mut self, chunk: &[u8]) {
        if self.line + chunk.len() <= SHORT_LINE {
            self.short.extend_from_slice(chunk);
        }
        if self.head.len() < EDGE_BYTES {
            let take = (EDGE_BYTES - self.head.len()).min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
        }
        let over_before = self.line > MAX_MESSAGE_BYTES;
        self.line += chunk.len();
        let over = self.line > MAX_MESSAGE_BYTES;
        if over {
            self.tail
                .extend_from_slice(&chunk[chunk.len().saturating_sub(EDGE_BYTES)..]);
            let extra = self.tail.len().saturating_sub(EDGE_BYTES);
            self.tail.drain(..extra);
        }
        if over && !over_before {
            self.routes.discarded();
            if let Some(id) = leading_id(&self.head) {
                self.routes.discarded_answer(id);
                self.told = true;
            }
        }
        if chunk.ends_with(b"\n") {
            if self.line <= SHORT_LINE {
                self.short_line();
            }
            if over
                && !self.told
                && let Some(id) = trailing_id(&self.tail)
            {
                self.routes.discarded_answer(id);
            }
            self.line = 0;
            self.head.clear();
            self.tail.clear();
            self.short.clear();
            self.told = false;
        }
    }
}

impl<R: AsyncRead + Unpin> AsyncRead for LineMeter<R> {
    fn poll_read(
        mut self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<std::io::Result<()>> {
        let before = buf.filled().len();
        let polled = Pin::new(&mut self.inner).poll_read(cx, buf);
        let read = buf.filled()[before..].to_vec();
        for chunk in read.split_inclusive(|b| *b == b'\n') {
            self.measure(chunk);
        }
        polled
    }
}

#[cfg(test)]
mod tests {
    use super::{leading_id, trailing_id};

    #[test]
    fn an_answers_id_is_read_from_its_start_or_its_end() {
        let lead = |text: &str| leading_id(text.as_bytes());
        assert_eq!(
            lead(r#"{"jsonrpc":"2.0","id":7,"result":{"content":[{"#).as_deref(),
            Some("7")
        );
        assert_eq!(
            lead(r#"{"id": "a-1", "jsonrpc":"2.0","result":"#).as_deref(),
            Some("\"a-1\"")
        );
        assert_eq!(lead(r#"{"jsonrpc":"2.0","result":{"id":3,"#), None);
        assert_eq!(lead(r#"{"jsonrpc":"2.0","method":"notifications/x""#), None);
        assert_eq!(
            lead(r#"{"jsonrpc":"2.0","id":12"#),
            None,
            "the number may go on"
        );
        let trail = |text: &str| trailing_id(text.as_bytes());
        assert_eq!(
            trail("xxx\"}]},\"jsonrpc\":\"2.0\",\"id\":2}\n").as_deref(),
            Some("2")
        );
        assert_eq!(
            trail("x\"},\"jsonrpc\":\"2.0\",\"id\":\"r-9\"}").as_deref(),
            Some("\"r-9\"")
        );
        assert_eq!(trail("\"text\":\"xxxx\"}]}}"), None);
        assert_eq!(trail("\"id\":{\"a\":1}}"), None);
    }
}
