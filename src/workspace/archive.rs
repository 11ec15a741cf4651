//! Unpacking an uploaded archive (tar, tar.gz or zip, told apart by its first bytes) into a
//! directory of a session's view, so that a hostile archive writes nothing.
//!
//! How: every entry is checked as it is read and written into a *staging directory* inside
//! the view (`<root>/.toold-upload-<id>`, on the same filesystem, so moving in is a rename);
//! only when the whole archive passed, and every destination has been checked against what the
//! workspace holds, is the staged tree moved into place. A refusal removes the staging
//! directory: the workspace is what it was.
//!
//! Refused, naming the entry: an absolute path or a `..` component; a symlink whose target is
//! absolute or climbs out of the target directory; a hard link to anything but an earlier
//! entry; an entry beneath a symlink an earlier entry made; devices, FIFOs and other special
//! entries; more than [`UploadLimits::max_entries`] entries or [`UploadLimits::max_bytes`]
//! unpacked bytes (413); unpacked bytes past [`UploadLimits::max_ratio`] times the compressed
//! bytes read, once past [`RATIO_FLOOR`] (a zip bomb); and a destination that is a symlink, or
//! a file where the archive has a directory (or the reverse). Modes keep their permission bits
//! (the executable bit survives); owners, times and set-id bits do not.
//!
//! The parsing is the `tar`, `flate2` and `zip` crates'; the rules above are this file's.

use std::collections::HashSet;
use std::fs;
use std::io::{self, Read};
use std::os::unix::fs::PermissionsExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

/// Below this many unpacked bytes the compression ratio is not judged (small files of zeros).
pub const RATIO_FLOOR: u64 = 16 << 20;

/// What one archive may hold.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct UploadLimits {
    pub max_bytes: u64,
    pub max_entries: u64,
    /// Unpacked bytes per compressed byte, at most.
    pub max_ratio: u64,
}

impl Default for UploadLimits {
    fn default() -> Self {
        UploadLimits {
            max_bytes: 4096 << 20,
            max_entries: 200_000,
            max_ratio: 200,
        }
    }
}

/// The formats an upload may be in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ArchiveFormat {
    Tar,
    TarGz,
    Zip,
}

impl ArchiveFormat {
    /// The format whose magic `head` (the body's first 512 bytes, or all of a shorter one)
    /// starts with; `None`: neither.
    pub fn detect(head: &[u8]) -> Option<ArchiveFormat> {
        if head.starts_with(&[0x1f, 0x8b]) {
            Some(ArchiveFormat::TarGz)
        } else if head.starts_with(b"PK\x03\x04") || head.starts_with(b"PK\x05\x06") {
            Some(ArchiveFormat::Zip)
        } else if head.len() >= 262 && &head[257..262] == b"ustar" {
            Some(ArchiveFormat::Tar)
        } else {
            None
        }
    }

    pub fn as_str(self) -> &'static str {
        match self {
            ArchiveFormat::Tar => "tar",
            ArchiveFormat::TarGz => "tar.gz",
            ArchiveFormat::Zip => "zip",
        }
    }
}

/// Why an archive was not unpacked.
#[derive(Debug, thiserror::Error)]
pub enum ArchiveError {
    /// A hostile or broken entry (400).
    #[error("archive entry \"{entry}\" refused: {reason}")]
    Refused { entry: String, reason: String },
    /// Past a size limit (413).
    #[error("archive entry \"{entry}\" refused: {reason}")]
    TooLarge { entry: String, reason: String },
    /// Not an archive of a known format, or unreadable (400).
    #[error("{0}")]
    Unreadable(String),
    /// The daemon's side failed (500).
    #[error("cannot unpack into \"{path}\": {source}")]
    Io {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
}

fn refused(entry: &str, reason: impl Into<String>) -> ArchiveError {
    ArchiveError::Refused {
        entry: entry.to_owned(),
        reason: reason.into(),
    }
}

fn io_at(path: &Path) -> impl FnOnce(io::Error) -> ArchiveError + '_ {
    move |source| ArchiveError::Io {
        path: path.to_path_buf(),
        source,
    }
}

/// What an upload put in place.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Unpacked {
    pub entries: u64,
    pub bytes: u64,
}

/// Counts the bytes read through it (the compressed side, for the ratio).
pub struct CountingReader<R> {
    inner: R,
    count: Arc<AtomicU64>,
}

impl<R> CountingReader<R> {
    pub fn new(inner: R) -> (CountingReader<R>, Arc<AtomicU64>) {
        let count = Arc::new(AtomicU64::new(0));
        (
            CountingReader {
                inner,
                count: count.clone(),
            },
            count,
        )
    }
}

impl<R: Read> Read for CountingReader<R> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let n = self.inner.read(buf)?;
        self.count.fetch_add(n as u64, Ordering::Relaxed);
        Ok(n)
    }
}

/// An entry's path made relative and plain: `./` and empty components dropped; absolute
/// paths and `..` refused. `None`: the archive's root itself.
pub fn entry_path(raw: &str) -> Result<Option<PathBuf>, ArchiveError> {
    if raw.starts_with('/') || raw.contains('\0') {
        return Err(refused(raw, "absolute path"));
    }
    let mut clean = PathBuf::new();
    for component in Path::new(raw).components() {
        match component {
            Component::Normal(part) => clean.push(part),
            Component::CurDir => {}
            Component::ParentDir => return Err(refused(raw, "path has a \"..\" component")),
            Component::RootDir | Component::Prefix(_) => {
                return Err(refused(raw, "absolute path"));
            }
        }
    }
    Ok((!clean.as_os_str().is_empty()).then_some(clean))
}

/// Whether a symlink at `entry` (relative to the target) with `link` stays inside the target.
fn link_stays_inside(entry: &Path, link: &Path) -> bool {
    if link.is_absolute() {
        return false;
    }
    let mut depth: i64 = entry.components().count() as i64 - 1;
    for component in link.components() {
        match component {
            Component::Normal(_) => depth += 1,
            Component::ParentDir => {
                depth -= 1;
                if depth < 0 {
                    return false;
                }
            }
            Component::CurDir => {}
            Component::RootDir | Component::Prefix(_) => return false,
        }
    }
    true
}

/// One entry as the formats give it.
pub enum EntryKind {
    Directory,
    File,
    Symlink(PathBuf),
    HardLink(PathBuf),
    /// A device, FIFO, socket or anything else that is not workspace content.
    Special(&'static str),
}

/// The staging side of an upload: checks entries one by one and writes them beneath the
/// staging directory.
pub struct Stager {
    staging: PathBuf,
    limits: UploadLimits,
    unpacked: Unpacked,
    symlinks: HashSet<PathBuf>,
    seen: HashSet<PathBuf>,
    dir_modes: Vec<(PathBuf, u32)>,
    compressed: Option<Arc<AtomicU64>>,
}

impl Stager {
    /// A stager writing into a fresh staging directory inside `root`.
    pub fn new(root: &Path, limits: UploadLimits) -> Result<Stager, ArchiveError> {
        let staging = root.join(format!(".toold-upload-{}", uuid::Uuid::now_v7().simple()));
        fs::create_dir(&staging).map_err(io_at(&staging))?;
        Ok(Stager {
            staging,
            limits,
            unpacked: Unpacked::default(),
            symlinks: HashSet::new(),
            seen: HashSet::new(),
            dir_modes: Vec::new(),
            compressed: None,
        })
    }

    /// Judges the ratio of unpacked bytes to these compressed bytes read.
    pub fn watch_compressed(&mut self, count: Arc<AtomicU64>) {
        self.compressed = Some(count);
    }

    /// Checks one entry and writes it into staging; `data` is the entry's content (files).
    pub fn entry(
        &mut self,
        raw: &str,
        kind: EntryKind,
        mode: u32,
        data: &mut dyn Read,
    ) -> Result<(), ArchiveError> {
        let Some(path) = entry_path(raw)? else {
            return Ok(());
        };
        self.unpacked.entries += 1;
        if self.unpacked.entries > self.limits.max_entries {
            return Err(ArchiveError::TooLarge {
                entry: raw.to_owned(),
                reason: format!(
                    "more than {} entries ([environments] max_upload_entries)",
                    self.limits.max_entries
                ),
            });
        }
        if let Some(link) = path
            .ancestors()
            .skip(1)
            .find(|a| self.symlinks.contains(*a))
        {
            return Err(refused(
                raw,
                format!(
                    "it lies beneath the symlink \"{}\" an earlier entry made",
                    link.display()
                ),
            ));
        }
        if self.symlinks.contains(&path) {
            return Err(refused(raw, "it replaces a symlink an earlier entry made"));
        }
        let dest = self.staging.join(&path);
        if let Some(parent) = dest.parent() {
            fs::create_dir_all(parent).map_err(io_at(parent))?;
        }
        match kind {
            EntryKind::Directory => {
                match fs::create_dir(&dest) {
                    Err(err) if err.kind() != io::ErrorKind::AlreadyExists => {
                        return Err(io_at(&dest)(err));
                    }
                    _ => {}
                }
                self.dir_modes.push((dest, mode & 0o777));
            }
            EntryKind::File => self.file(raw, &dest, mode, data)?,
            EntryKind::Symlink(link) => {
                if !link_stays_inside(&path, &link) {
                    return Err(refused(
                        raw,
                        format!(
                            "symlink to \"{}\" resolves outside the target",
                            link.display()
                        ),
                    ));
                }
                remove_file_if_any(&dest)?;
                std::os::unix::fs::symlink(&link, &dest).map_err(io_at(&dest))?;
                self.symlinks.insert(path.clone());
            }
            EntryKind::HardLink(link) => {
                let target = entry_path(&link.to_string_lossy())
                    .map_err(|_| {
                        refused(
                            raw,
                            format!(
                                "hard link to \"{}\" resolves outside the target",
                                link.display()
                            ),
                        )
                    })?
                    .filter(|t| self.seen.contains(t) && !self.symlinks.contains(t))
                    .ok_or_else(|| {
                        refused(
                            raw,
                            format!(
                                "hard link to \"{}\", which is not an earlier file of the archive",
                                link.display()
                            ),
                        )
                    })?;
                remove_file_if_any(&dest)?;
                fs::hard_link(self.staging.join(target), &dest).map_err(io_at(&dest))?;
            }
            EntryKind::Special(what) => {
                return Err(refused(raw, format!("{what} entries are not allowed")));
            }
        }
        self.seen.insert(path);
        Ok(())
    }

    fn file(
        &mut self,
        raw: &str,
        dest: &Path,
        mode: u32,
        data: &mut dyn Read,
    ) -> Result<(), ArchiveError> {
        if fs::symlink_metadata(dest).is_ok_and(|m| m.is_dir()) {
            return Err(refused(
                raw,
                "a file where an earlier entry made a directory",
            ));
        }
        remove_file_if_any(dest)?;
        let mut out = fs::File::create(dest).map_err(io_at(dest))?;
        let mut buf = vec![0u8; 256 << 10];
        loop {
            let n = match data.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => n,
                Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
                Err(err) => {
                    return Err(ArchiveError::Unreadable(format!(
                        "archive entry \"{raw}\" is unreadable: {err}"
                    )));
                }
            };
            self.unpacked.bytes += n as u64;
            self.check_size(raw)?;
            io::Write::write_all(&mut out, &buf[..n]).map_err(io_at(dest))?;
        }
        fs::set_permissions(dest, fs::Permissions::from_mode(mode & 0o777)).map_err(io_at(dest))?;
        Ok(())
    }

    fn check_size(&self, raw: &str) -> Result<(), ArchiveError> {
        let bytes = self.unpacked.bytes;
        if bytes > self.limits.max_bytes {
            return Err(ArchiveError::TooLarge {
                entry: raw.to_owned(),
                reason: format!(
                    "more than {} MiB unpacked ([environments] max_upload_mb)",
                    self.limits.max_bytes >> 20
                ),
            });
        }
        if let Some(compressed) = &self.compressed {
            let compressed = compressed.load(Ordering::Relaxed).max(1);
            if bytes > RATIO_FLOOR && bytes / compressed > self.limits.max_ratio {
                return Err(ArchiveError::TooLarge {
                    entry: raw.to_owned(),
                    reason: format!(
                        "compression ratio past {}:1 ({bytes} bytes from {compressed})",
                        self.limits.max_ratio
                    ),
                });
            }
        }
        Ok(())
    }

    /// Checks the staged tree against `target` and moves it in; what was unpacked. The
    /// staging directory is gone afterwards, whatever the outcome.
    pub fn finish(self, target: &Path) -> Result<Unpacked, ArchiveError> {
        let result = self.move_in(target);
        let _ = fs::remove_dir_all(&self.staging);
        result
    }

    /// Removes the staging directory after a refusal.
    pub fn abandon(self) {
        let _ = fs::remove_dir_all(&self.staging);
    }

    fn move_in(&self, target: &Path) -> Result<Unpacked, ArchiveError> {
        for (dir, mode) in &self.dir_modes {
            fs::set_permissions(dir, fs::Permissions::from_mode(mode | 0o700))
                .map_err(io_at(dir))?;
        }
        check_destinations(&self.staging, target, Path::new(""))?;
        fs::create_dir_all(target).map_err(io_at(target))?;
        merge(&self.staging, target)?;
        Ok(self.unpacked)
    }
}

fn remove_file_if_any(path: &Path) -> Result<(), ArchiveError> {
    match fs::symlink_metadata(path) {
        Ok(meta) if !meta.is_dir() => fs::remove_file(path).map_err(io_at(path)),
        _ => Ok(()),
    }
}

/// Refuses, before anything moves, a destination that is a symlink, or whose kind (directory
/// or not) differs from the staged entry's.
fn check_destinations(staged: &Path, target: &Path, rel: &Path) -> Result<(), ArchiveError> {
    let dest = target.join(rel);
    let Ok(existing) = fs::symlink_metadata(&dest) else {
        return Ok(());
    };
    let shown = || rel.display().to_string();
    if existing.file_type().is_symlink() {
        if rel.as_os_str().is_empty() {
            return Ok(());
        }
        return Err(refused(
            &shown(),
            "the workspace has a symlink there; nothing is written through one",
        ));
    }
    let staged_here = staged.join(rel);
    let staged_meta = fs::symlink_metadata(&staged_here).map_err(io_at(&staged_here))?;
    if staged_meta.is_dir() != existing.is_dir() {
        let what = if existing.is_dir() {
            "a directory"
        } else {
            "a file"
        };
        return Err(refused(&shown(), format!("the workspace has {what} there")));
    }
    if staged_meta.is_dir() {
        for entry in fs::read_dir(&staged_here).map_err(io_at(&staged_here))? {
            let entry = entry.map_err(io_at(&staged_here))?;
            check_destinations(staged, target, &rel.join(entry.file_name()))?;
        }
    }
    Ok(())
}

/// Moves `from`'s entries into `to`: a directory that exists in both is merged, anything
/// else renamed over.
fn merge(from: &Path, to: &Path) -> Result<(), ArchiveError> {
    for entry in fs::read_dir(from).map_err(io_at(from))? {
        let entry = entry.map_err(io_at(from))?;
        let source = entry.path();
        let dest = to.join(entry.file_name());
        let is_dir = entry.file_type().map_err(io_at(&source))?.is_dir();
        if is_dir && fs::symlink_metadata(&dest).is_ok_and(|m| m.is_dir()) {
            merge(&source, &dest)?;
            let mode = fs::symlink_metadata(&source)
                .map_err(io_at(&source))?
                .permissions();
            fs::set_permissions(&dest, mode).map_err(io_at(&dest))?;
        } else {
            fs::rename(&source, &dest).map_err(io_at(&dest))?;
        }
    }
    Ok(())
}

/// Unpacks `body` (in `format`) into `target`, a directory of the view rooted at `root`.
pub fn unpack(
    body: &mut dyn Read,
    format: ArchiveFormat,
    root: &Path,
    target: &Path,
    limits: UploadLimits,
    spool: &Path,
) -> Result<Unpacked, ArchiveError> {
    let mut stager = Stager::new(root, limits)?;
    let staged = match format {
        ArchiveFormat::Tar => stage_tar(body, &mut stager),
        ArchiveFormat::TarGz => {
            let (counting, count) = CountingReader::new(body);
            stager.watch_compressed(count);
            stage_tar(&mut flate2::read::GzDecoder::new(counting), &mut stager)
        }
        ArchiveFormat::Zip => super::archive_zip::stage_zip(body, &mut stager, spool),
    };
    match staged {
        Ok(()) => stager.finish(target),
        Err(err) => {
            stager.abandon();
            Err(err)
        }
    }
}

fn stage_tar(body: &mut dyn Read, stager: &mut Stager) -> Result<(), ArchiveError> {
    let unreadable =
        |err: io::Error| ArchiveError::Unreadable(format!("not a readable tar archive: {err}"));
    let mut archive = tar::Archive::new(body);
    for entry in archive.entries().map_err(unreadable)? {
        let mut entry = entry.map_err(unreadable)?;
        let raw = String::from_utf8_lossy(&entry.path_bytes()).into_owned();
        let mode = entry.header().mode().unwrap_or(0o644);
        let link = || -> Result<PathBuf, ArchiveError> {
            let bytes = entry
                .link_name_bytes()
                .ok_or_else(|| refused(&raw, "link without a target"))?;
            Ok(PathBuf::from(String::from_utf8_lossy(&bytes).into_owned()))
        };
        use tar::EntryType as T;
        // Extended headers (a `git archive`'s comment) describe, they are not content.
        if matches!(entry.header().entry_type(), T::XGlobalHeader | T::XHeader) {
            continue;
        }
        let kind = match entry.header().entry_type() {
            T::Regular | T::Continuous => EntryKind::File,
            T::Directory => EntryKind::Directory,
            T::Symlink => EntryKind::Symlink(link()?),
            T::Link => EntryKind::HardLink(link()?),
            T::Char | T::Block => EntryKind::Special("device"),
            T::Fifo => EntryKind::Special("FIFO"),
            T::GNUSparse => EntryKind::Special("sparse file"),
            _ => EntryKind::Special("special"),
        };
        stager.entry(&raw, kind, mode, &mut entry)?;
    }
    Ok(())
}
