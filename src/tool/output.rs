//! What a tool returns: text for the model, optional structured data and metadata, updates
//! to the session's state that the session applies after the call, and, for outputs too
//! large to hold in memory, the file that holds them whole ([`SpilledOutput`]).

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::SystemTime;

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

/// What the session knows of a file this session read or wrote (staleness is judged by
/// content hash, not by mtime alone).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct FileStateEntry {
    pub path: PathBuf,
    pub size: u64,
    pub modified: Option<SystemTime>,
    pub content_hash: String,
    /// A read of part of the file still counts as a read.
    pub partial: bool,
}

/// A change to session state that a call asks for. Tools never mutate the session directly;
/// the dispatcher applies these when the call completes, in completion order.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub enum ContextUpdate {
    /// A file was read or written by this session.
    FileState(FileStateEntry),
    /// The shell's working directory changed (a `cd` persists to the next call).
    ShellCwd { path: PathBuf },
    /// Deferred tools to load into the pool from the next batch.
    LoadTools { names: Vec<String> },
    /// The session's task list, replaced whole.
    Todos { todos: Value },
    /// A session runtime setting (the `config` tool).
    RuntimeSetting { key: String, value: Value },
}

/// The successful (or tool-judged failed) output of a call.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct ToolOutput {
    /// What the model reads.
    pub text: String,
    /// The tool ran but judges its own outcome a failure (e.g. a non-zero exit code); the
    /// result gets `is_error: true` and kind [`ToolOutput::error_kind`], with this text and
    /// metadata intact.
    pub is_error: bool,
    /// The kind of a failure: `execution` unless the tool says otherwise (a command its own
    /// timeout stopped is `timeout`, DESIGN §3, whichever layer enforced it).
    pub error_kind: Option<crate::tool::ErrorKind>,
    pub structured: Option<Value>,
    pub metadata: Map<String, Value>,
    pub context_updates: Vec<ContextUpdate>,
    /// The full output, when it was too large to keep in memory. `text` is then a bounded
    /// summary (the start, a note, the end) for whoever ignores the spill; the offload phase
    /// stores the file whole and previews [`SpilledOutput::head`] and [`SpilledOutput::tail`].
    pub spill: Option<Arc<SpilledOutput>>,
}

/// A tool's full output in a file of the spill directory, with its start and end in memory.
///
/// The file's bytes are the output exactly as the model would have read it had it fitted in
/// `text` (invalid UTF-8 included: whoever stores it decodes it like
/// `String::from_utf8_lossy` does). The file is deleted when the offload phase has stored
/// it, or when the last holder drops it, whichever comes first.
#[derive(Debug)]
pub struct SpilledOutput {
    path: PathBuf,
    /// Bytes in the file.
    pub bytes: u64,
    /// The start of the file, decoded; long enough for any preview's head.
    pub head: String,
    /// The end of the file, decoded; long enough for any preview's tail.
    pub tail: String,
    removed: AtomicBool,
}

impl SpilledOutput {
    /// Takes ownership of the file at `path`: it is deleted with this value.
    pub fn new(path: PathBuf, bytes: u64, head: String, tail: String) -> SpilledOutput {
        SpilledOutput {
            path,
            bytes,
            head,
            tail,
            removed: AtomicBool::new(false),
        }
    }

    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Deletes the file now, off the async threads' critical path (an unlink of a large file
    /// can take a while on some file systems).
    pub async fn remove(&self) -> std::io::Result<()> {
        if self.removed.swap(true, Ordering::AcqRel) {
            return Ok(());
        }
        match tokio::fs::remove_file(&self.path).await {
            Err(err) if err.kind() != std::io::ErrorKind::NotFound => Err(err),
            _ => Ok(()),
        }
    }
}

impl Drop for SpilledOutput {
    fn drop(&mut self) {
        if !*self.removed.get_mut() {
            // Best effort: a spill nobody stored (a refused or panicking pipeline) must not
            // stay on disk. Failure leaves a file in the spill directory, nothing worse.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

impl PartialEq for SpilledOutput {
    fn eq(&self, other: &SpilledOutput) -> bool {
        self.path == other.path
    }
}

impl ToolOutput {
    pub fn text(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            ..ToolOutput::default()
        }
    }

    /// Output the tool itself judges a failure (kind `execution`), keeping its text.
    pub fn failure(text: impl Into<String>) -> ToolOutput {
        ToolOutput {
            text: text.into(),
            is_error: true,
            ..ToolOutput::default()
        }
    }

    pub fn with_structured(mut self, data: Value) -> ToolOutput {
        self.structured = Some(data);
        self
    }

    pub fn with_metadata(mut self, key: impl Into<String>, value: Value) -> ToolOutput {
        self.metadata.insert(key.into(), value);
        self
    }

    pub fn with_update(mut self, update: ContextUpdate) -> ToolOutput {
        self.context_updates.push(update);
        self
    }

    pub fn with_spill(mut self, spill: SpilledOutput) -> ToolOutput {
        self.spill = Some(Arc::new(spill));
        self
    }
}
