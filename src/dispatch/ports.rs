//! The ports the store implements for dispatch: the two places a call's result goes besides
//! the caller, the audit log ([`AuditSink`]) and, when the output is too large for the model,
//! the offload store ([`ResultStore`]). Dispatch writes through these traits and never names
//! the store (`store/` implements them for SQLite and Postgres); the in-memory versions here
//! serve tests, benchmarks and embedding without a database.
//!
//! Outputs too large for memory reach the store as a byte stream
//! ([`ResultStore::offload_reader`]); [`TextChunker`] is how every store turns that stream
//! into text: decoded exactly as `String::from_utf8_lossy` would decode it whole (each
//! invalid sequence becomes one U+FFFD), cut into chunks of a fixed number of characters,
//! so the character counts a store records agree with what it reads back.

use std::collections::{HashMap, VecDeque};
use std::sync::{Arc, Mutex};
use std::time::SystemTime;

use async_trait::async_trait;
use serde_json::Value;
use tokio::io::{AsyncRead, AsyncReadExt};

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
    /// Who stopped a call of kind `cancelled`: `session_close`, `session_interrupt`, or
    /// whoever cancelled its batch alone (`mcp_client`); `None` for any other call.
    pub cancelled_by: Option<String>,
    /// The trace the call ran in (32 hex digits), if any: the exported span's, or the
    /// `traceparent` the request brought when spans are not exported.
    pub trace_id: Option<String>,
    /// The principal whose request ran the call (DESIGN §10); `None` for rows written before
    /// principals were recorded, and for calls run outside any request.
    pub principal: Option<String>,
    /// Where the call ran (DESIGN §12): an environment session's tier (`bwrap`, `landlock`,
    /// `gvisor`) on every row; in a plain session, the sandbox a bash call ran in (`bwrap`,
    /// `landlock`, `none`), and `None` for its other tools (they run in the daemon itself), for
    /// calls refused before they ran, and for rows written before the column.
    pub isolation: Option<String>,
}

#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{0}")]
pub struct SinkError(pub String);

/// Where audit rows go. `record` returns once the row is durable.
#[async_trait]
pub trait AuditSink: Send + Sync + 'static {
    async fn record(&self, record: AuditRecord) -> Result<(), SinkError>;

    /// Records several rows (a whole batch's), all durable when this returns. A sink may
    /// write them together; this one writes them one by one and stops at the first failure.
    async fn record_many(&self, records: Vec<AuditRecord>) -> Result<(), SinkError> {
        for record in records {
            self.record(record).await?;
        }
        Ok(())
    }
}

/// The audit rows of a batch whose results are all returned at once: its calls leave their
/// rows here and the batch writes them together before answering (one write instead of one
/// per call), which keeps "durable before the result is returned".
#[derive(Clone, Default)]
pub struct HeldAudit {
    records: Arc<Mutex<Vec<AuditRecord>>>,
}

impl HeldAudit {
    pub fn hold(&self, record: AuditRecord) {
        self.records
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .push(record);
    }

    /// Everything held so far, in the order the calls finished.
    pub fn take(&self) -> Vec<AuditRecord> {
        std::mem::take(&mut *self.records.lock().unwrap_or_else(|p| p.into_inner()))
    }
}

/// A page of an offloaded output, by character range.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResultPage {
    pub result_id: String,
    /// The session whose call stored the result (who may read it depends on it).
    pub session_id: String,
    pub total_chars: u64,
    pub offset: u64,
    pub content: String,
}

/// The byte source of [`ResultStore::offload_reader`].
pub type OffloadSource<'a> = dyn AsyncRead + Send + Unpin + 'a;

/// Where oversized outputs go, and how they are read back.
#[async_trait]
pub trait ResultStore: Send + Sync + 'static {
    async fn offload(
        &self,
        session_id: &str,
        call_id: &str,
        content: &str,
    ) -> Result<OffloadedResult, SinkError>;

    /// Stores the output read from `content` to its end, never holding it whole: its bytes
    /// are decoded as [`TextChunker`] decodes them (invalid UTF-8 becomes U+FFFD, as
    /// `String::from_utf8_lossy` would make it). A read error fails the offload and stores
    /// nothing that can be read.
    async fn offload_reader(
        &self,
        session_id: &str,
        call_id: &str,
        content: &mut OffloadSource<'_>,
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
fn page(session_id: &str, result_id: &str, content: &str, offset: u64, limit: u64) -> ResultPage {
    ResultPage {
        result_id: result_id.to_owned(),
        session_id: session_id.to_owned(),
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

    async fn offload_reader(
        &self,
        session_id: &str,
        call_id: &str,
        content: &mut OffloadSource<'_>,
    ) -> Result<OffloadedResult, SinkError> {
        // Memory is where this store keeps results anyway; only the decoding must match.
        let mut bytes = Vec::new();
        content
            .read_to_end(&mut bytes)
            .await
            .map_err(|err| SinkError(format!("reading the output to store failed: {err}")))?;
        let text = String::from_utf8_lossy(&bytes);
        self.offload(session_id, call_id, &text).await
    }

    async fn read(
        &self,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        let (session_id, content) = self.stored(result_id)?;
        Ok(page(&session_id, result_id, &content, offset, limit))
    }

    async fn read_for_session(
        &self,
        session_id: &str,
        result_id: &str,
        offset: u64,
        limit: u64,
    ) -> Result<ResultPage, SinkError> {
        match self.stored(result_id)? {
            (owner, content) if owner == session_id => {
                Ok(page(&owner, result_id, &content, offset, limit))
            }
            _ => Err(SinkError(format!("unknown result \"{result_id}\""))),
        }
    }
}

/// A piece of decoded text and its length in characters.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TextChunk {
    pub text: String,
    pub chars: u64,
}

/// Decodes a byte stream pushed in pieces of any size, cut anywhere (inside a character
/// too), into chunks of exactly `max_chars` characters (the last one shorter). The text is
/// what `String::from_utf8_lossy` makes of all the bytes at once: an incomplete sequence at
/// the end of a push is held until the next push completes or refutes it, and one still
/// incomplete at [`TextChunker::finish`] becomes one U+FFFD.
#[derive(Debug)]
pub struct TextChunker {
    max_chars: usize,
    /// The start of a character whose remaining bytes have not arrived (at most 3 bytes).
    partial: Vec<u8>,
    current: String,
    current_chars: usize,
    ready: VecDeque<TextChunk>,
    ready_bytes: usize,
}

impl TextChunker {
    pub fn new(max_chars: usize) -> TextChunker {
        TextChunker {
            max_chars: max_chars.max(1),
            partial: Vec::new(),
            current: String::new(),
            current_chars: 0,
            ready: VecDeque::new(),
            ready_bytes: 0,
        }
    }

    pub fn push(&mut self, bytes: &[u8]) {
        if self.partial.is_empty() {
            self.decode(bytes, false);
        } else {
            let mut joined = std::mem::take(&mut self.partial);
            joined.extend_from_slice(bytes);
            self.decode(&joined, false);
        }
    }

    /// The end of the stream: what is held becomes the last chunk.
    pub fn finish(&mut self) {
        let partial = std::mem::take(&mut self.partial);
        self.decode(&partial, true);
        if self.current_chars > 0 {
            self.complete_current();
        }
    }

    /// The next complete chunk.
    pub fn pop(&mut self) -> Option<TextChunk> {
        let chunk = self.ready.pop_front()?;
        self.ready_bytes -= chunk.text.len();
        Some(chunk)
    }

    /// Bytes of text in complete chunks not yet popped.
    pub fn ready_bytes(&self) -> usize {
        self.ready_bytes
    }

    fn decode(&mut self, bytes: &[u8], at_end: bool) {
        let mut pieces = bytes.utf8_chunks().peekable();
        while let Some(piece) = pieces.next() {
            self.append(piece.valid());
            let invalid = piece.invalid();
            if invalid.is_empty() {
                continue;
            }
            if !at_end && pieces.peek().is_none() && is_incomplete(invalid) {
                // Ends this push; the next one may complete it.
                self.partial.extend_from_slice(invalid);
            } else {
                self.append(char::REPLACEMENT_CHARACTER.encode_utf8(&mut [0; 4]));
            }
        }
    }

    fn append(&mut self, mut text: &str) {
        while !text.is_empty() {
            let room = self.max_chars - self.current_chars;
            let (cut, count) = split_after_chars(text, room);
            self.current.push_str(&text[..cut]);
            self.current_chars += count;
            text = &text[cut..];
            if self.current_chars == self.max_chars {
                self.complete_current();
            }
        }
    }

    fn complete_current(&mut self) {
        let text = std::mem::take(&mut self.current);
        self.ready_bytes += text.len();
        self.ready.push_back(TextChunk {
            text,
            chars: std::mem::take(&mut self.current_chars) as u64,
        });
    }
}

/// Whether an invalid sequence at the end of the input is only the start of a character
/// (`String::from_utf8_lossy` would wait for more). `utf8_chunks` groups bytes into one
/// invalid sequence only while they are a valid prefix, so a lead byte that may start a
/// character and fewer bytes than it announces is exactly that.
fn is_incomplete(sequence: &[u8]) -> bool {
    let needed = match sequence[0] {
        0xC2..=0xDF => 2,
        0xE0..=0xEF => 3,
        0xF0..=0xF4 => 4,
        _ => return false,
    };
    sequence.len() < needed
}

/// The byte length of `text`'s first `chars` characters (all of it if shorter), and how many
/// characters that is.
fn split_after_chars(text: &str, chars: usize) -> (usize, usize) {
    let prefix = &text.as_bytes()[..chars.min(text.len())];
    if prefix.is_ascii() {
        // One byte per character: the common case costs no decoding.
        return (prefix.len(), prefix.len());
    }
    match text.char_indices().nth(chars) {
        Some((cut, _)) => (cut, chars),
        None => (text.len(), text.chars().count()),
    }
}

#[cfg(test)]
#[path = "ports_tests.rs"]
mod chunker_tests;

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
