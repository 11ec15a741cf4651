//! Zip uploads: a zip's directory is at its end, so the body is spooled to a file first (on
//! disk, never in memory), then read entry by entry through the `zip` crate into the same
//! [`Stager`] as a tar. The ratio is judged against the whole spooled file's size.

use std::fs;
use std::io::{self, Read};
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::AtomicU64;

use super::archive::{ArchiveError, EntryKind, Stager};

/// The largest symlink target read from a zip entry.
const MAX_LINK_BYTES: u64 = 4096;

pub(super) fn stage_zip(
    body: &mut dyn Read,
    stager: &mut Stager,
    spool: &Path,
) -> Result<(), ArchiveError> {
    let io_at = |path: &Path| {
        let path = path.to_path_buf();
        move |source| ArchiveError::Io { path, source }
    };
    fs::create_dir_all(spool).map_err(io_at(spool))?;
    let mut file = tempfile::tempfile_in(spool).map_err(io_at(spool))?;
    let size = io::copy(body, &mut file).map_err(io_at(spool))?;
    stager.watch_compressed(Arc::new(AtomicU64::new(size)));
    let unreadable = |err: zip::result::ZipError| {
        ArchiveError::Unreadable(format!("not a readable zip archive: {err}"))
    };
    let mut archive = zip::ZipArchive::new(file).map_err(unreadable)?;
    for index in 0..archive.len() {
        let mut entry = archive.by_index(index).map_err(unreadable)?;
        let raw = entry
            .name()
            .map(|name| name.into_owned())
            .map_err(unreadable)?;
        let mode = entry.unix_mode().unwrap_or(0o644);
        let kind = match mode & 0o170000 {
            _ if entry.is_dir() => EntryKind::Directory,
            0o120000 => {
                let mut link = String::new();
                (&mut entry)
                    .take(MAX_LINK_BYTES)
                    .read_to_string(&mut link)
                    .map_err(|err| {
                        ArchiveError::Unreadable(format!(
                            "archive entry \"{raw}\" is unreadable: {err}"
                        ))
                    })?;
                EntryKind::Symlink(PathBuf::from(link))
            }
            0o020000 | 0o060000 => EntryKind::Special("device"),
            0o010000 => EntryKind::Special("FIFO"),
            0o140000 => EntryKind::Special("socket"),
            _ => EntryKind::File,
        };
        stager.entry(&raw, kind, mode, &mut entry)?;
    }
    Ok(())
}
