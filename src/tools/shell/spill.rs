//! `SpillWriter`: a foreground command's whole output, in memory while it is small and in a
//! file of the spill directory once it is not.
//!
//! The output stays in memory up to [`SpillSettings::memory_bytes`]; the write that would pass
//! it creates a file, moves what was held there and appends everything after, up to
//! [`SpillSettings::cap_bytes`]. Past the cap bytes are counted, not written, and
//! [`SpillWriter::finish`] appends a note and the output's last [`PREVIEW_BYTES`], so the
//! stored output still ends the way the command ended. Whatever happens, the first and last
//! [`PREVIEW_BYTES`] stay in memory for the preview. The file is deleted when the writer is
//! dropped unfinished, and otherwise by the [`SpilledOutput`] it becomes.
//!
//! Deliberately absent: decoding (the file holds the bytes as written; the store decodes) and
//! any spill for background tasks (their output is read incrementally, from memory).

use std::collections::VecDeque;
use std::path::PathBuf;

use tokio::io::AsyncWriteExt;

use crate::tool::SpilledOutput;

/// Bytes of the start and of the end kept in memory: at least 4 096 characters, more than
/// any preview shows (the offload phase shows at most 2 000).
pub(crate) const PREVIEW_BYTES: usize = 16 * 1024;

/// Where and when a foreground shell output moves from memory to a file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SpillSettings {
    /// The directory spill files are created in (it must exist). The daemon points it into
    /// its data directory; the default is the system's temporary directory.
    pub directory: PathBuf,
    /// Output up to this size stays in memory and is never written to a file.
    pub memory_bytes: usize,
    /// The most a spill file holds; past it the middle of the output is dropped (with a note)
    /// so one command cannot fill the disk.
    pub cap_bytes: u64,
}

impl Default for SpillSettings {
    fn default() -> SpillSettings {
        SpillSettings {
            directory: std::env::temp_dir(),
            memory_bytes: 1024 * 1024,
            cap_bytes: 1024 * 1024 * 1024,
        }
    }
}

/// A spill file being written; deleted if dropped before [`SpillWriter::finish`] hands it on.
#[derive(Debug)]
struct SpillFile {
    path: PathBuf,
    file: tokio::fs::File,
}

impl Drop for SpillFile {
    fn drop(&mut self) {
        if !self.path.as_os_str().is_empty() {
            // Best effort; a failure leaves a file in the spill directory, nothing worse.
            let _ = std::fs::remove_file(&self.path);
        }
    }
}

#[derive(Debug)]
pub(crate) struct SpillWriter {
    settings: SpillSettings,
    /// Everything so far, until the file exists.
    pending: Vec<u8>,
    file: Option<SpillFile>,
    /// Bytes in the file.
    written: u64,
    /// Bytes past the cap, not written.
    dropped: u64,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Why the file cannot be trusted to hold the whole output.
    failed: Option<String>,
}

impl SpillWriter {
    /// A writer whose output starts with `prefix` (a note the result puts before it).
    pub(crate) fn new(settings: SpillSettings, prefix: &[u8]) -> SpillWriter {
        let mut writer = SpillWriter {
            settings,
            pending: Vec::new(),
            file: None,
            written: 0,
            dropped: 0,
            head: Vec::new(),
            tail: VecDeque::new(),
            failed: None,
        };
        writer.remember(prefix);
        writer.pending.extend_from_slice(prefix);
        writer
    }

    /// Whether the output has gone to a file (and is still whole there, cap aside).
    pub(crate) fn spilled(&self) -> bool {
        self.file.is_some() && self.failed.is_none()
    }

    /// Whether the output so far ends with a newline.
    pub(crate) fn ends_with_newline(&self) -> bool {
        self.tail.back() == Some(&b'\n')
    }

    /// Why spilling failed, if it did.
    pub(crate) fn failure(&self) -> Option<&str> {
        self.failed.as_deref()
    }

    pub(crate) async fn write(&mut self, bytes: &[u8]) {
        self.remember(bytes);
        if self.failed.is_some() {
            return;
        }
        if self.file.is_none() {
            if self.pending.len() + bytes.len() <= self.settings.memory_bytes {
                self.pending.extend_from_slice(bytes);
                return;
            }
            if let Err(err) = self.create().await {
                self.fail(format!(
                    "could not create a spill file in \"{}\": {err}",
                    self.settings.directory.display()
                ));
                return;
            }
            let held = std::mem::take(&mut self.pending);
            self.append(&held).await;
        }
        self.append(bytes).await;
    }

    /// Ends the output with `suffix` (the result's last line) and hands the file on; `None`
    /// when the output never left memory or the file failed.
    pub(crate) async fn finish(mut self, suffix: &str) -> Option<SpilledOutput> {
        if !self.spilled() {
            return None;
        }
        if self.dropped > 0 {
            let kept_end = self.tail_bytes(self.dropped);
            let note = format!(
                "\n[… {} bytes of output omitted: the output passed the {} MiB spill limit; its last {} bytes follow …]\n",
                self.dropped - kept_end.len() as u64,
                self.settings.cap_bytes / (1024 * 1024),
                kept_end.len()
            );
            let mut end = note.into_bytes();
            end.extend_from_slice(&kept_end);
            self.write_past_cap(&end).await;
            // The stored output now ends with the note and the kept end, not the raw stream.
            self.tail.clear();
            self.remember_tail(&end);
        }
        self.write_past_cap(suffix.as_bytes()).await;
        self.remember_tail(suffix.as_bytes());
        let mut file = self.file.take()?;
        if let Err(err) = file.file.flush().await {
            self.fail(format!("could not write the spill file: {err}"));
        }
        if self.failed.is_some() {
            return None;
        }
        let path = std::mem::take(&mut file.path);
        let bytes = self.written;
        let head = String::from_utf8_lossy(&self.head).into_owned();
        let tail = String::from_utf8_lossy(self.tail.make_contiguous()).into_owned();
        Some(SpilledOutput::new(path, bytes, head, tail))
    }

    /// Bytes of the output dropped past the cap and not kept in the file's end.
    pub(crate) fn omitted_bytes(&self) -> u64 {
        self.dropped.saturating_sub(PREVIEW_BYTES as u64)
    }

    async fn create(&mut self) -> std::io::Result<()> {
        let path = self
            .settings
            .directory
            .join(format!("toold-spill-{}.out", uuid::Uuid::now_v7().simple()));
        let file = tokio::fs::OpenOptions::new()
            .write(true)
            .create_new(true)
            .open(&path)
            .await?;
        self.file = Some(SpillFile { path, file });
        Ok(())
    }

    /// Writes what fits under the cap and counts the rest.
    async fn append(&mut self, bytes: &[u8]) {
        let room = self.settings.cap_bytes.saturating_sub(self.written);
        let fits = bytes.len().min(usize::try_from(room).unwrap_or(usize::MAX));
        self.dropped += (bytes.len() - fits) as u64;
        self.write_past_cap(&bytes[..fits]).await;
    }

    async fn write_past_cap(&mut self, bytes: &[u8]) {
        let Some(file) = &mut self.file else { return };
        if bytes.is_empty() {
            return;
        }
        match file.file.write_all(bytes).await {
            Ok(()) => self.written += bytes.len() as u64,
            Err(err) => self.fail(format!("could not write the spill file: {err}")),
        }
    }

    fn fail(&mut self, why: String) {
        self.failed.get_or_insert(why);
        self.pending = Vec::new();
    }

    fn remember(&mut self, bytes: &[u8]) {
        let room = PREVIEW_BYTES
            .saturating_sub(self.head.len())
            .min(bytes.len());
        self.head.extend_from_slice(&bytes[..room]);
        self.remember_tail(bytes);
    }

    fn remember_tail(&mut self, bytes: &[u8]) {
        let bytes = &bytes[bytes.len().saturating_sub(PREVIEW_BYTES)..];
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(PREVIEW_BYTES);
        self.tail.drain(..excess);
    }

    /// The last `at_most` bytes of the output (up to [`PREVIEW_BYTES`]).
    fn tail_bytes(&mut self, at_most: u64) -> Vec<u8> {
        let tail = self.tail.make_contiguous();
        let keep = tail
            .len()
            .min(usize::try_from(at_most).unwrap_or(usize::MAX));
        tail[tail.len() - keep..].to_vec()
    }
}

#[cfg(test)]
#[path = "spill_tests.rs"]
mod tests;
