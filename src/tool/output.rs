//! What a tool returns: text for the model, optional structured data and metadata, and
//! updates to the session's state that the session applies after the call.

use std::path::PathBuf;
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
    /// result gets `is_error: true` and kind `execution`, with this text and metadata intact.
    pub is_error: bool,
    pub structured: Option<Value>,
    pub metadata: Map<String, Value>,
    pub context_updates: Vec<ContextUpdate>,
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
}
