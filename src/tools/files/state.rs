//! The session's file-state cache as the file tools use it: content hashes, the entries a
//! read or a write leaves, and the rule that a file may be changed only if this session read
//! it and it has not changed since.
//!
//! Staleness is judged by content (an xxh3-128 hash of the whole file), never by mtime alone:
//! a `touch` does not make a file stale, and a change within the same mtime tick does. The
//! cache itself lives in the session; tools only read it (through
//! [`crate::tool::SessionView::file_state`]) and return [`ContextUpdate::FileState`] for the
//! dispatcher to apply when the call completes.

use std::fs::Metadata;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::time::SystemTime;

use xxhash_rust::xxh3::xxh3_128;

use super::access::{self, Keep, Location};
use crate::tool::{ContextUpdate, FileStateEntry, SessionView, ToolError};

/// The largest file the tools load whole to change it (larger ones are the shell's job).
pub const MAX_FILE_BYTES: u64 = 64 * 1024 * 1024;

/// The hash recorded for `bytes` (32 hex digits of xxh3-128).
pub fn content_hash(bytes: &[u8]) -> String {
    hash_hex(xxh3_128(bytes))
}

pub fn hash_hex(hash: u128) -> String {
    format!("{hash:032x}")
}

/// The cache entry for a file of `size` bytes whose content hashes to `content_hash`.
pub fn file_state(
    path: PathBuf,
    size: u64,
    modified: Option<SystemTime>,
    content_hash: String,
    partial: bool,
) -> ContextUpdate {
    ContextUpdate::FileState(FileStateEntry {
        path,
        size,
        modified,
        content_hash,
        partial,
    })
}

/// A file as it is on disk now, loaded whole by a tool about to change it.
pub struct OnDisk {
    pub bytes: Vec<u8>,
    pub metadata: Metadata,
}

impl OnDisk {
    pub fn keep(&self) -> Keep {
        Keep::of(&self.metadata)
    }
}

/// Loads the file at `location` whole, or `None` when it does not exist. A directory, a
/// special file, or a file over `max_bytes` is a validation error.
pub fn load(location: &Location, max_bytes: u64) -> Result<Option<OnDisk>, ToolError> {
    let path = &location.path;
    let mut file = match location.open_read() {
        Ok(file) => file,
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => return Ok(None),
        Err(err) => return Err(access::describe(&err, path, "open")),
    };
    let metadata = file
        .metadata()
        .map_err(|err| access::describe(&err, path, "inspect"))?;
    if metadata.is_dir() {
        return Err(ToolError::Validation(format!(
            "\"{}\" is a directory, not a file",
            path.display()
        )));
    }
    if !metadata.is_file() {
        return Err(ToolError::Validation(format!(
            "\"{}\" is not a regular file",
            path.display()
        )));
    }
    if metadata.len() > max_bytes {
        return Err(ToolError::Validation(format!(
            "\"{}\" is {} bytes, more than the {max_bytes} bytes these tools change in one piece; use bash for files this large",
            path.display(),
            metadata.len()
        )));
    }
    let mut bytes = Vec::with_capacity(usize::try_from(metadata.len()).unwrap_or(0));
    file.read_to_end(&mut bytes)
        .map_err(|err| access::describe(&err, path, "read"))?;
    Ok(Some(OnDisk { bytes, metadata }))
}

/// Refuses to change a file this session has not read, or that changed since it last read
/// (or wrote) it. `how_to_read` names the call that reads it (`read_file`, `view`).
pub fn require_fresh(
    session: &dyn SessionView,
    path: &Path,
    on_disk: &OnDisk,
    how_to_read: &str,
) -> Result<(), ToolError> {
    let Some(entry) = session.file_state(path) else {
        return Err(ToolError::Validation(format!(
            "\"{}\" has not been read in this session; read it first ({how_to_read}), then change it",
            path.display()
        )));
    };
    if entry.content_hash != content_hash(&on_disk.bytes) {
        return Err(ToolError::Validation(format!(
            "\"{}\" has changed since this session last read it; read it again ({how_to_read}) before changing it",
            path.display()
        )));
    }
    Ok(())
}

/// Writes `bytes` to `location` atomically, keeping the previous file's permissions, and
/// returns the cache entry that lets this session change the file again without reading it.
pub fn commit(
    location: &Location,
    bytes: &[u8],
    previous: Option<&OnDisk>,
) -> Result<ContextUpdate, ToolError> {
    let metadata = location
        .write_atomic(bytes, previous.map(OnDisk::keep), true)
        .map_err(|err| access::describe(&err, &location.path, "write"))?;
    Ok(file_state(
        location.path.clone(),
        metadata.len(),
        metadata.modified().ok(),
        content_hash(bytes),
        false,
    ))
}

/// Runs blocking filesystem work off the async threads.
pub async fn blocking<T, F>(work: F) -> Result<T, ToolError>
where
    T: Send + 'static,
    F: FnOnce() -> Result<T, ToolError> + Send + 'static,
{
    tokio::task::spawn_blocking(work).await.map_err(|err| {
        ToolError::Execution(format!("the file operation did not complete: {err}"))
    })?
}
