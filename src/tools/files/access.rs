//! Opening the file tools' paths without stepping outside what the call was authorised for.
//!
//! A path is judged when the call is authorised and resolved again when it runs
//! (`paths::resolve_for_execution`). Between that second resolution and the `open` a symlink
//! could still be swapped, so a path inside the workspace is opened relative to a descriptor of
//! the workspace root with `openat2(RESOLVE_BENEATH)`: the kernel refuses any step out (EXDEV),
//! whatever changed meanwhile. Where `openat2` is missing (Linux before 5.6, or a seccomp filter
//! refusing it) the path is walked one component at a time with `O_NOFOLLOW`; the path was
//! canonical when resolved, so a symlink met now is a change and is refused. A call authorised
//! for `danger_full_access` may go anywhere, and its path is opened as written.
//!
//! A read of a path written as it is (beneath the workspace, plain names, no symlink) skips the
//! resolution: `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)` opens such a path and nothing
//! else, so the kernel both resolves and checks it as it opens
//! ([`Location::open_read_as_written`]).
//!
//! Writes go to a temporary file created in the target's directory (itself opened the same
//! way), made durable, given the old file's permissions, and renamed over the target: readers
//! see the old file or the new one, never half of one. This module knows descriptors and
//! syscalls; what a tool does with the bytes is not its business.

use std::ffi::{CString, OsStr, OsString};
use std::fs::{File, Metadata, Permissions};
use std::io::{self, Write};
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{MetadataExt, PermissionsExt};
use std::path::{Component, Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};

use serde_json::Value;

use crate::tool::{PermissionLevel, ToolContext, ToolError};
use crate::tools::paths;

/// Set once `openat2` answered ENOSYS; later opens go straight to the component walk.
static OPENAT2_MISSING: AtomicBool = AtomicBool::new(false);

/// Retries of `openat2` when the kernel reports a concurrent rename during resolution.
const EAGAIN_RETRIES: usize = 3;

/// A path a call may touch, with how it must be opened.
#[derive(Clone, Debug)]
pub struct Location {
    /// Absolute, canonical when resolved; what messages and the file-state cache use.
    pub path: PathBuf,
    scope: Scope,
}

#[derive(Clone, Debug)]
enum Scope {
    /// The call was authorised for the workspace only: resolution may not leave `root`.
    Beneath { root: PathBuf, relative: PathBuf },
    /// The call was authorised for anything: resolved from `/` as written.
    Anywhere,
}

/// The owner and permissions a rewritten file keeps.
#[derive(Clone, Copy, Debug)]
pub struct Keep {
    pub mode: u32,
    pub uid: u32,
    pub gid: u32,
}

impl Keep {
    pub fn of(metadata: &Metadata) -> Keep {
        Keep {
            mode: metadata.mode(),
            uid: metadata.uid(),
            gid: metadata.gid(),
        }
    }
}

impl Location {
    /// Resolves `input[field]` for execution and decides how it is opened: beneath the
    /// workspace unless the call was authorised for `danger_full_access`.
    pub fn resolve(input: &Value, field: &str, ctx: &ToolContext) -> Result<Location, ToolError> {
        let resolved = paths::resolve_for_execution(input, field, ctx)?;
        if let Some(environment) = ctx.session.environment() {
            // Opened beneath the environment's root, whatever the mode: nothing of the host.
            return Location::beneath(resolved.path, environment.root.clone()).ok_or_else(|| {
                ToolError::Validation(format!(
                    "{field} \"{}\" leaves the session's environment",
                    paths::input_path(input, field).unwrap_or_default()
                ))
            });
        }
        if ctx.authorized >= PermissionLevel::DangerFullAccess {
            return Ok(Location::anywhere(resolved.path));
        }
        let workspace = ctx.session.working_directory();
        // A prefix of a canonical path is canonical: when the resolved path lies under the
        // workspace as configured, that is the root, and resolving it again can be skipped.
        let root = if resolved.path.starts_with(workspace) {
            workspace.to_path_buf()
        } else {
            ctx.session.real_working_directory().to_path_buf()
        };
        Location::beneath(resolved.path, root).ok_or_else(|| {
            // resolve_for_execution refuses outside paths for such calls; this is that check's
            // twin, kept so that a disagreement can never widen access.
            ToolError::Validation(format!(
                "{field} \"{}\" is outside the workspace",
                paths::input_path(input, field).unwrap_or_default()
            ))
        })
    }

    /// Opens `input[field]` for reading without resolving it first, when it lies in the
    /// workspace exactly as written: relative to it (or absolute beneath it), plain names only
    /// (no `..`), no symlink on the way. `openat2(RESOLVE_NO_SYMLINKS)` of the workspace
    /// (which is real) joined with such a path opens it and nothing else, so its success shows that the path as written is
    /// canonical and inside, which is what [`Location::resolve`] finds by walking it with a
    /// `stat` per component, and shows it at the moment of the open. `None` whenever that
    /// cannot be shown (a symlink, `..`, a missing file, no `openat2`, a workspace configured
    /// through a symlink): the caller then resolves and opens the general way, which also
    /// words any error.
    pub fn open_read_as_written(
        input: &Value,
        field: &str,
        ctx: &ToolContext,
    ) -> Option<(Location, File)> {
        if OPENAT2_MISSING.load(Ordering::Relaxed) {
            return None;
        }
        let raw = paths::input_path(input, field).ok()?;
        let workspace = ctx.session.working_directory();
        // Paths are judged against the real workspace: only when the configured one is that
        // (as it is for sessions the daemon creates) is a path canonical beneath one also
        // canonical beneath the other.
        let real = ctx.session.real_working_directory();
        if workspace.as_os_str() != real.as_os_str() || workspace.to_str().is_none() {
            return None;
        }
        let mut relative = PathBuf::new();
        for component in workspace
            .join(raw)
            .strip_prefix(workspace)
            .ok()?
            .components()
        {
            match component {
                Component::Normal(part) => relative.push(part),
                Component::CurDir => {}
                Component::ParentDir | Component::RootDir | Component::Prefix(_) => return None,
            }
        }
        if relative.as_os_str().is_empty() {
            return None;
        }
        // Opened beneath the workspace whatever the call was authorised for: inside, that is
        // the same file `anywhere` would open.
        let location = Location::beneath(workspace.join(&relative), workspace.to_path_buf())?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        // The workspace is real (no symlink on its path) and `relative` is plain names, so
        // refusing every symlink on the whole absolute path keeps the open beneath the
        // workspace exactly as `RESOLVE_BENEATH` from a descriptor of it would, without opening
        // the workspace first (two system calls fewer per read). A workspace since replaced by
        // a symlink fails here and takes the general way.
        let file = openat2_raw(
            libc::AT_FDCWD,
            &location.path,
            flags,
            0,
            libc::RESOLVE_NO_SYMLINKS,
        )
        .ok()?;
        Some((location, File::from(file)))
    }

    /// A location opened from `/` as written (authorised for anything).
    pub fn anywhere(path: PathBuf) -> Location {
        Location {
            path,
            scope: Scope::Anywhere,
        }
    }

    /// A location that may not leave `root`; `None` when `path` is not under it.
    pub fn beneath(path: PathBuf, root: PathBuf) -> Option<Location> {
        let relative = path.strip_prefix(&root).ok()?.to_path_buf();
        Some(Location {
            path,
            scope: Scope::Beneath { root, relative },
        })
    }

    /// Opens the file for reading. Never blocks on a FIFO (`O_NONBLOCK`); callers check the
    /// file type before reading.
    pub fn open_read(&self) -> io::Result<File> {
        let root = self.root()?;
        let flags = libc::O_RDONLY | libc::O_NONBLOCK | libc::O_NOCTTY | libc::O_CLOEXEC;
        self.open_in(root.as_fd(), &self.relative(), flags, 0)
            .map(File::from)
    }

    /// Replaces (or creates) the file with `bytes` atomically, keeping `keep`'s permissions and
    /// (where allowed) owner, creating missing parent directories when `create_parents`.
    /// Returns the new file's metadata.
    pub fn write_atomic(
        &self,
        bytes: &[u8],
        keep: Option<Keep>,
        create_parents: bool,
    ) -> io::Result<Metadata> {
        let relative = self.relative();
        let name = relative
            .file_name()
            .ok_or_else(|| io::Error::from_raw_os_error(libc::EISDIR))?
            .to_os_string();
        let parent_relative = relative.parent().unwrap_or(Path::new("")).to_path_buf();
        let root = self.root()?;
        let parent = self.open_parent(root.as_fd(), &parent_relative, create_parents)?;
        let temporary = OsString::from(format!(".toold-{}.tmp", uuid::Uuid::now_v7().simple()));
        // A fresh name in a directory already opened safely: O_CREAT|O_EXCL never follows a
        // symlink, so plain openat is enough here.
        let flags =
            libc::O_WRONLY | libc::O_CREAT | libc::O_EXCL | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        let mut file = File::from(openat(parent.as_fd(), &temporary, flags, 0o666)?);
        let written = (|| {
            file.write_all(bytes)?;
            if let Some(keep) = keep {
                let current = file.metadata()?;
                if current.uid() != keep.uid || current.gid() != keep.gid {
                    // Only a privileged daemon can give a file away; otherwise the new file
                    // keeps the daemon's owner, as any editor's rewrite would.
                    let _ = std::os::unix::fs::fchown(&file, Some(keep.uid), Some(keep.gid));
                }
                file.set_permissions(Permissions::from_mode(keep.mode & 0o7777))?;
            }
            file.sync_all()?;
            renameat(parent.as_fd(), &temporary, &name)?;
            file.metadata()
        })();
        if written.is_err() {
            let _ = unlinkat(parent.as_fd(), &temporary);
        }
        written
    }

    fn root(&self) -> io::Result<OwnedFd> {
        let root: &Path = match &self.scope {
            Scope::Beneath { root, .. } => root,
            Scope::Anywhere => Path::new("/"),
        };
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        // The workspace root itself is the anchor of trust: it is opened as configured.
        let c_root = c_path(root.as_os_str())?;
        // SAFETY: `c_root` is a valid NUL-terminated string that outlives the call.
        let fd = unsafe { libc::open(c_root.as_ptr(), flags) };
        owned(fd)
    }

    /// The path relative to the root descriptor (`.` for the root itself).
    fn relative(&self) -> PathBuf {
        let relative = match &self.scope {
            Scope::Beneath { relative, .. } => relative.clone(),
            Scope::Anywhere => self
                .path
                .strip_prefix("/")
                .unwrap_or(&self.path)
                .to_path_buf(),
        };
        if relative.as_os_str().is_empty() {
            PathBuf::from(".")
        } else {
            relative
        }
    }

    /// Opens `relative` under `dir` with this location's rules.
    fn open_in(
        &self,
        dir: BorrowedFd<'_>,
        relative: &Path,
        flags: i32,
        mode: u32,
    ) -> io::Result<OwnedFd> {
        match self.scope {
            Scope::Anywhere => openat(dir, relative.as_os_str(), flags, mode),
            Scope::Beneath { .. } => open_beneath(dir, relative, flags, mode),
        }
    }

    /// The directory that will hold the file, created (each component beneath the last) when
    /// asked to.
    fn open_parent(
        &self,
        root: BorrowedFd<'_>,
        parent: &Path,
        create: bool,
    ) -> io::Result<OwnedFd> {
        let flags = libc::O_PATH | libc::O_DIRECTORY | libc::O_CLOEXEC;
        let whole = if parent.as_os_str().is_empty() {
            Path::new(".")
        } else {
            parent
        };
        match self.open_in(root, whole, flags, 0) {
            Err(err) if create && err.raw_os_error() == Some(libc::ENOENT) => {}
            other => return other,
        }
        let mut current: Option<OwnedFd> = None;
        for component in parent.components() {
            let Component::Normal(part) = component else {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            };
            let at = current.as_ref().map_or(root, AsFd::as_fd);
            let next = match self.open_in(at, Path::new(part), flags, 0) {
                Err(err) if err.raw_os_error() == Some(libc::ENOENT) => match mkdirat(at, part) {
                    Err(err) if err.raw_os_error() != Some(libc::EEXIST) => return Err(err),
                    _ => self.open_in(at, Path::new(part), flags, 0)?,
                },
                other => other?,
            };
            current = Some(next);
        }
        match current {
            Some(fd) => Ok(fd),
            None => self.open_in(root, Path::new("."), flags, 0),
        }
    }
}

/// Opens `relative` under `dir`, refusing any resolution that leaves `dir`.
fn open_beneath(
    dir: BorrowedFd<'_>,
    relative: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    if !OPENAT2_MISSING.load(Ordering::Relaxed) {
        match openat2_beneath(dir, relative, flags, mode) {
            Err(err) if err.raw_os_error() == Some(libc::ENOSYS) => {
                OPENAT2_MISSING.store(true, Ordering::Relaxed);
            }
            // A seccomp filter may answer EPERM for a syscall it does not know; the walk
            // below gives the real answer either way.
            Err(err) if err.raw_os_error() == Some(libc::EPERM) => {}
            other => return other,
        }
    }
    walk_beneath(dir, relative, flags, mode)
}

/// `struct open_how` of linux/openat2.h (the `libc` one cannot be built outside the crate).
#[repr(C)]
struct OpenHow {
    flags: u64,
    mode: u64,
    resolve: u64,
}

/// `openat2(dir, relative, {flags, mode, RESOLVE_BENEATH | RESOLVE_NO_MAGICLINKS})`.
pub(super) fn openat2_beneath(
    dir: BorrowedFd<'_>,
    relative: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let resolve = libc::RESOLVE_BENEATH | libc::RESOLVE_NO_MAGICLINKS;
    openat2(dir, relative, flags, mode, resolve)
}

/// `openat2(dir, relative, {flags, mode, resolve})`, retried a few times when the kernel
/// reports a concurrent rename.
fn openat2(
    dir: BorrowedFd<'_>,
    relative: &Path,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    openat2_raw(dir.as_raw_fd(), relative, flags, mode, resolve)
}

/// [`openat2`] from a raw directory descriptor, which may be `AT_FDCWD`.
fn openat2_raw(
    dir: RawFd,
    relative: &Path,
    flags: i32,
    mode: u32,
    resolve: u64,
) -> io::Result<OwnedFd> {
    let c_relative = c_path(relative.as_os_str())?;
    let how = OpenHow {
        // Flags are non-negative bit sets; the kernel takes them as u64.
        flags: u64::from(flags.cast_unsigned()),
        mode: u64::from(mode),
        resolve,
    };
    let mut attempts = 0;
    loop {
        // SAFETY: the path is NUL-terminated and `how` is a live `open_how` whose size is
        // passed; both outlive the call, which only reads them.
        let fd = unsafe {
            libc::syscall(
                libc::SYS_openat2,
                dir,
                c_relative.as_ptr(),
                &raw const how,
                std::mem::size_of::<OpenHow>(),
            )
        };
        if fd >= 0 {
            let fd = i32::try_from(fd).map_err(|_| io::Error::from_raw_os_error(libc::EBADF))?;
            return owned(fd);
        }
        let err = io::Error::last_os_error();
        attempts += 1;
        if err.raw_os_error() != Some(libc::EAGAIN) || attempts > EAGAIN_RETRIES {
            return Err(err);
        }
    }
}

/// Opens `relative` under `dir` one component at a time, following no symlink. Every
/// component must be a plain name (the path was canonical when resolved).
pub(super) fn walk_beneath(
    dir: BorrowedFd<'_>,
    relative: &Path,
    flags: i32,
    mode: u32,
) -> io::Result<OwnedFd> {
    let mut parts = Vec::new();
    for component in relative.components() {
        match component {
            Component::Normal(part) => parts.push(part),
            Component::CurDir => {}
            Component::ParentDir | Component::RootDir | Component::Prefix(_) => {
                return Err(io::Error::from_raw_os_error(libc::EXDEV));
            }
        }
    }
    let Some((last, directories)) = parts.split_last() else {
        return openat(dir, OsStr::new("."), flags, mode);
    };
    let mut current: Option<OwnedFd> = None;
    for part in directories {
        let at = current.as_ref().map_or(dir, AsFd::as_fd);
        let step = libc::O_PATH | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
        current = Some(openat(at, part, step, 0)?);
    }
    let at = current.as_ref().map_or(dir, AsFd::as_fd);
    openat(at, last, flags | libc::O_NOFOLLOW, mode)
}

fn c_path(path: &OsStr) -> io::Result<CString> {
    CString::new(path.as_bytes()).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))
}

fn owned(fd: i32) -> io::Result<OwnedFd> {
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` was just returned by the kernel for this process and nothing else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn openat(dir: BorrowedFd<'_>, path: &OsStr, flags: i32, mode: u32) -> io::Result<OwnedFd> {
    let c_name = c_path(path)?;
    // SAFETY: `c_name` is NUL-terminated and outlives the call; `dir` is a live descriptor.
    let fd = unsafe { libc::openat(dir.as_raw_fd(), c_name.as_ptr(), flags, mode) };
    owned(fd)
}

fn mkdirat(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c_name = c_path(name)?;
    // SAFETY: as for `openat`.
    let status = unsafe { libc::mkdirat(dir.as_raw_fd(), c_name.as_ptr(), 0o777) };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn renameat(dir: BorrowedFd<'_>, from: &OsStr, to: &OsStr) -> io::Result<()> {
    let (c_from, c_to) = (c_path(from)?, c_path(to)?);
    let fd = dir.as_raw_fd();
    // SAFETY: as for `openat`; both names are single components of `dir`.
    let status = unsafe { libc::renameat(fd, c_from.as_ptr(), fd, c_to.as_ptr()) };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn unlinkat(dir: BorrowedFd<'_>, name: &OsStr) -> io::Result<()> {
    let c_name = c_path(name)?;
    // SAFETY: as for `openat`.
    let status = unsafe { libc::unlinkat(dir.as_raw_fd(), c_name.as_ptr(), 0) };
    if status == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

/// The whole of `file` (`size` bytes, from its `fstat`) if it is all in the page cache now:
/// `preadv2(RWF_NOWAIT)` reads it without waiting for storage, so a caller on an async thread
/// may use it. `None` when the read would wait, the filesystem does not offer it, or the file
/// is no longer `size` bytes long; the caller then reads on the blocking pool.
pub fn read_cached(file: &File, size: u64) -> Option<Vec<u8>> {
    let size = usize::try_from(size).ok()?;
    // One byte more than expected: a file that grew shows as a longer read. The kernel fills
    // the buffer, so it is not zeroed first.
    let mut buffer = Vec::with_capacity(size + 1);
    let spare = buffer.spare_capacity_mut();
    let iov = libc::iovec {
        iov_base: spare.as_mut_ptr().cast(),
        iov_len: spare.len(),
    };
    // SAFETY: `iov` describes the buffer's spare capacity, which is live and writable for its
    // whole length during the call; the descriptor is owned by `file`.
    let read = unsafe { libc::preadv2(file.as_raw_fd(), &raw const iov, 1, 0, libc::RWF_NOWAIT) };
    if usize::try_from(read).ok()? != size {
        return None;
    }
    // SAFETY: the kernel wrote `size` bytes (the count it returned) at the buffer's start,
    // within its capacity.
    unsafe { buffer.set_len(size) };
    Some(buffer)
}

/// A directory's entries (name, is-directory, is-symlink), read through its descriptor so the
/// listing is of the directory that was opened, whatever happened to its path since.
pub fn list_directory(dir: &OwnedFd) -> io::Result<Vec<(OsString, bool, bool)>> {
    let proc_path = PathBuf::from(format!("/proc/self/fd/{}", dir.as_raw_fd()));
    let mut entries = Vec::new();
    for entry in std::fs::read_dir(proc_path)? {
        let entry = entry?;
        let kind = entry.file_type()?;
        entries.push((entry.file_name(), kind.is_dir(), kind.is_symlink()));
    }
    Ok(entries)
}

/// Opens the subdirectory `name` of `dir` without following a symlink.
pub fn open_child_directory(dir: &OwnedFd, name: &OsStr) -> io::Result<OwnedFd> {
    let flags = libc::O_RDONLY | libc::O_DIRECTORY | libc::O_NOFOLLOW | libc::O_CLOEXEC;
    openat(dir.as_fd(), name, flags, 0)
}

/// Turns an I/O failure on `path` into the error the model sees. A refused escape (EXDEV from
/// `openat2`, ELOOP from the walk) is a validation error: the path changed after it was
/// authorised.
pub fn describe(err: &io::Error, path: &Path, action: &str) -> ToolError {
    let shown = path.display();
    match err.raw_os_error() {
        Some(libc::ENOENT) => ToolError::Validation(format!("\"{shown}\" does not exist")),
        Some(libc::EXDEV | libc::ELOOP) => ToolError::Validation(format!(
            "\"{shown}\" now leads outside the workspace or through a symlink that changed after the call was authorised; refusing to {action} it"
        )),
        Some(libc::ENOTDIR) => ToolError::Validation(format!(
            "a parent of \"{shown}\" is not a directory (or was replaced by a symlink after the call was authorised)"
        )),
        Some(libc::EISDIR) => ToolError::Validation(format!("\"{shown}\" is a directory")),
        Some(libc::EACCES | libc::EPERM) => {
            ToolError::Execution(format!("permission denied: cannot {action} \"{shown}\""))
        }
        _ => ToolError::Execution(format!("cannot {action} \"{shown}\": {err}")),
    }
}

#[cfg(test)]
#[path = "access_tests.rs"]
mod tests;
