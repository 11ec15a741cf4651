//! A session's filesystem as one directory: the copy-on-write *view* every tool sees.
//!
//! What a session's filesystem is: a stack of read-only **lower** directories (topmost first:
//! a snapshot's frozen layers, and for an environment session an image's unpacked layers
//! below them) plus one private, writable **upper** directory, merged at the view's **root**.
//! A session with no lowers is what sessions always were: its root is a plain directory and
//! is its own upper (nothing is mounted).
//!
//! How the tools reach it: the merged view is *mounted on the host* at the root, a path under
//! the daemon's data directory (`workspaces/<session>`), and that path is the session's
//! working directory. So the daemon's file tools (`read_file`, `write_file`, `edit_file`,
//! `glob_search`, `grep_search`, `notebook_edit`), the upload/download endpoints and the
//! sandboxed shell all use the one path they used before views existed:
//! - bubblewrap binds the root writable at its own path (`--bind ROOT ROOT` binds the overlay
//!   mount, since it binds what the path resolves to when the sandbox starts);
//! - Landlock's rules are opened on the root, i.e. on the overlay's root inode.
//!
//! An environment's root is a view too (its image's root the bottom lower, a snapshot's layers
//! above it); its upper lives on a `disk_mb` filesystem of its own, so it is frozen by
//! [`MountedView::copy_changes`] (the upper copied, the view left as it is) rather than
//! renamed.
//!
//! Because a bind mount and a Landlock rule hold the *directory they opened*, not the path,
//! whoever changes a mounted view (a snapshot freezing it, [`MountedView::freeze`]) must first
//! stop the session's spawner and background shells, so the next shell starts on the new
//! view; the service does that.
//!
//! The methods ([`ViewMethod`]), chosen once per daemon by [`ViewMethod::probe`]:
//! - `Overlay`: the daemon may mount (root, or `CAP_SYS_ADMIN` in its namespace): overlayfs
//!   with `lowerdir=L1:L2…,upperdir=U,workdir=W` on the root. Nothing is copied: a fork's cost
//!   does not grow with the workspace's size. Mounted `volatile` where the kernel has it
//!   (5.10): otherwise taking a view down (every freeze after a session's first) syncs the
//!   whole filesystem under the data directory, so a fork waits for every dirty page on the
//!   disk, the daemon's or not. The cost: an `fsync` inside a view does not reach the disk,
//!   so a host crash may lose a session's last writes (the kernel's writeback still flushes
//!   them within seconds; a daemon restart loses nothing). The work directory is made afresh
//!   at every mount, which clears the marker a crashed volatile mount leaves.
//! - `FullCopy`: it may not. A view with lowers is then materialised by copying the lowers
//!   (bottom up, whiteouts applied) into the root, which is then a plain directory; answers
//!   say `"copy": "full"`. (Mounting inside a per-session user namespace and reaching it
//!   through `/proc/<pid>/root` is the way to copy-on-write without privilege; not built yet,
//!   see `docs/decisions/workspace.md`.)
//!
//! The mounts live in the daemon's own mount namespace ([`private_mount_namespace`], entered
//! at start when the daemon may): on the host, a session's root reads as an empty directory;
//! `/proc/<daemon pid>/root/<root>` shows the view.
//!
//! Deliberately absent: which lowers a session has (the service and the store keep that),
//! quotas, and anything about images (an environment passes its layers as lowers).

use std::ffi::CString;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};

use super::copy::{CopyError, copy_layers};

/// How views with lowers are made on this daemon.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ViewMethod {
    /// overlayfs mounted on the host at the view's root.
    Overlay,
    /// The lowers copied into the root.
    FullCopy,
}

/// How much a view (or a snapshot) copied, for answers: `"cow"` or `"full"`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CopyKind {
    /// Copy-on-write: no file data copied.
    Cow,
    /// Every file copied.
    Full,
}

/// Why a view could not be made, changed or taken down.
#[derive(Debug, thiserror::Error)]
pub enum ViewError {
    #[error("cannot mount the view at \"{root}\": {source}")]
    Mount {
        root: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error("cannot prepare \"{path}\" for the view: {source}")]
    Prepare {
        path: PathBuf,
        #[source]
        source: io::Error,
    },
    #[error(transparent)]
    Copy(#[from] CopyError),
}

/// What a view is made of.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ViewSpec {
    /// Read-only lower directories, topmost first (overlayfs's `lowerdir` order). Empty: a
    /// plain directory.
    pub lowers: Vec<PathBuf>,
    /// The session's own directory for the view's machinery: `upper/` and `work/` live here.
    /// It must be on one filesystem, and not inside the root or a lower.
    pub private_dir: PathBuf,
    /// Where the merged view appears: the session's working directory.
    pub root: PathBuf,
}

impl ViewSpec {
    /// The writable layer of an overlay view.
    pub fn upper(&self) -> PathBuf {
        self.private_dir.join("upper")
    }

    fn work(&self) -> PathBuf {
        self.private_dir.join("work")
    }
}

/// A view made: mounted, or copied, or a plain directory.
#[derive(Debug)]
pub struct MountedView {
    spec: ViewSpec,
    method: ViewMethod,
    /// Whether an overlay is mounted at the root now.
    mounted: bool,
}

/// What freezing a view left: the frozen layers, topmost first (the new snapshot's lowers).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Frozen {
    pub layers: Vec<PathBuf>,
    pub copy: CopyKind,
}

impl ViewMethod {
    /// Whether this process can mount an overlay: tries one in a temporary directory under
    /// `scratch` (the data directory), then takes it down.
    pub fn probe(scratch: &Path) -> ViewMethod {
        let works = || -> Result<(), ViewError> {
            let dir = tempfile::Builder::new()
                .prefix(".overlay-probe-")
                .tempdir_in(scratch)
                .map_err(|source| ViewError::Prepare {
                    path: scratch.to_path_buf(),
                    source,
                })?;
            let lower = dir.path().join("lower");
            mkdir(&lower)?;
            let spec = ViewSpec {
                lowers: vec![lower],
                private_dir: dir.path().join("private"),
                root: dir.path().join("root"),
            };
            let view = MountedView::mount(spec, ViewMethod::Overlay)?;
            view.unmount()
        };
        match works() {
            Ok(()) => ViewMethod::Overlay,
            Err(err) => {
                tracing::info!(error = %err, "overlayfs unavailable: views with lowers are full copies");
                ViewMethod::FullCopy
            }
        }
    }

    /// What a view made this way copies.
    pub fn copy_kind(self) -> CopyKind {
        match self {
            ViewMethod::Overlay => CopyKind::Cow,
            ViewMethod::FullCopy => CopyKind::Full,
        }
    }
}

impl MountedView {
    /// Makes the view: creates the root (and the private directory), and mounts the overlay
    /// or copies the lowers. Idempotent after a crash: a stale mount at the root is detached
    /// first, the upper kept (it holds the session's changes).
    pub fn mount(spec: ViewSpec, method: ViewMethod) -> Result<MountedView, ViewError> {
        mkdir(&spec.root)?;
        let mut view = MountedView {
            spec,
            method,
            mounted: false,
        };
        if view.spec.lowers.is_empty() {
            return Ok(view);
        }
        match method {
            ViewMethod::Overlay => {
                detach(&view.spec.root);
                mkdir(&view.spec.upper())?;
                fresh_dir(&view.spec.work())?;
                overlay(&view.spec)?;
                view.mounted = true;
            }
            ViewMethod::FullCopy => {
                // Copied once: a root that holds files already is the session's own work.
                let empty = std::fs::read_dir(&view.spec.root)
                    .map_err(|source| ViewError::Prepare {
                        path: view.spec.root.clone(),
                        source,
                    })?
                    .next()
                    .is_none();
                if empty {
                    copy_layers(&view.spec.lowers, &view.spec.root)?;
                }
            }
        }
        Ok(view)
    }

    /// The merged directory: the session's working directory.
    pub fn root(&self) -> &Path {
        &self.spec.root
    }

    pub fn spec(&self) -> &ViewSpec {
        &self.spec
    }

    /// What this view copied when it was made.
    pub fn copy_kind(&self) -> CopyKind {
        if self.spec.lowers.is_empty() {
            CopyKind::Cow
        } else {
            self.method.copy_kind()
        }
    }

    /// Takes the overlay down (lazily: a process still inside keeps its view until it
    /// leaves). The upper stays; a plain or copied view has nothing to take down.
    pub fn unmount(&self) -> Result<(), ViewError> {
        if self.mounted {
            umount_lazy(&self.spec.root).map_err(|source| ViewError::Mount {
                root: self.spec.root.clone(),
                source,
            })?;
        }
        Ok(())
    }

    /// Freezes the view's current content into `layer` (a new directory, on the same
    /// filesystem as the upper for copy-on-write) and carries on over it. `movable` says
    /// whether a plain root belongs to the daemon (a fresh workspace), so it may be moved;
    /// a directory someone placed on the host is copied instead.
    ///
    /// Copy-on-write (an overlay method, and a root or upper that can be renamed into
    /// `layer`): the session's writable layer *becomes* `layer`, the view is mounted again
    /// over `[layer] + lowers` with an empty upper. Otherwise the merged view is copied into
    /// `layer` and the session goes on unchanged. The caller stops the session's shells first.
    pub fn freeze(&mut self, layer: &Path, movable: bool) -> Result<Frozen, ViewError> {
        if self.method == ViewMethod::Overlay && (self.mounted || movable) {
            match self.freeze_in_place(layer) {
                Ok(frozen) => return Ok(frozen),
                // Another filesystem (a fleet's shared root): copy below instead.
                Err(ViewError::Prepare { source, .. })
                    if source.raw_os_error() == Some(libc::EXDEV) => {}
                Err(err) => return Err(err),
            }
        }
        copy_layers(std::slice::from_ref(&self.spec.root), layer)?;
        Ok(Frozen {
            layers: vec![layer.to_path_buf()],
            copy: CopyKind::Full,
        })
    }

    /// Freezes the view's *changes* into `layer` by copying its upper (whiteouts, opaque
    /// directories, owners and modes kept: `cp -a`, as root it keeps `trusted.overlay.*`),
    /// leaving the view as it is; the layers a view over the snapshot stacks are `layer` over
    /// this view's lowers. For an environment's root, whose upper lives on a `disk_mb`
    /// filesystem of its own (`environment::disk`), so that a rename out of it is `EXDEV`:
    /// what is copied is what the session wrote, never the lowers (the image). The copy goes
    /// to a temporary name beside `layer` and is renamed into place, so a failure leaves no
    /// layer. A view without an overlay (no lowers, or a full copy) copies its root. Not
    /// `copy::copy_tree`: that merges (applies whiteouts, drops owners and opaque markers),
    /// where an upper kept as a layer must keep all three.
    pub fn copy_changes(&self, layer: &Path) -> Result<Frozen, ViewError> {
        let Some(parent) = layer.parent() else {
            return Err(ViewError::Prepare {
                path: layer.to_path_buf(),
                source: io::Error::new(io::ErrorKind::InvalidInput, "a layer needs a parent"),
            });
        };
        mkdir(parent)?;
        if !self.mounted {
            copy_layers(std::slice::from_ref(&self.spec.root), layer)?;
            return Ok(Frozen {
                layers: vec![layer.to_path_buf()],
                copy: CopyKind::Full,
            });
        }
        let partial = parent.join(".layer.partial");
        let _ = std::fs::remove_dir_all(&partial);
        let fail = |source| ViewError::Prepare {
            path: self.spec.upper(),
            source,
        };
        let output = std::process::Command::new("cp")
            .arg("-a")
            .arg("--")
            .arg(self.spec.upper())
            .arg(&partial)
            .output()
            .map_err(fail)?;
        if !output.status.success() {
            let _ = std::fs::remove_dir_all(&partial);
            return Err(fail(io::Error::other(format!(
                "cp -a failed ({}): {}",
                output.status,
                String::from_utf8_lossy(&output.stderr).trim()
            ))));
        }
        std::fs::rename(&partial, layer).map_err(fail)?;
        let mut layers = vec![layer.to_path_buf()];
        layers.extend(self.spec.lowers.iter().cloned());
        Ok(Frozen {
            layers,
            copy: CopyKind::Full,
        })
    }

    fn freeze_in_place(&mut self, layer: &Path) -> Result<Frozen, ViewError> {
        if let Some(parent) = layer.parent() {
            mkdir(parent)?;
        }
        let moved = if self.mounted {
            self.spec.upper()
        } else {
            self.spec.root.clone()
        };
        rename(&moved, layer)?;
        if self.mounted {
            self.unmount()?;
            self.mounted = false;
        }
        self.spec.lowers.insert(0, layer.to_path_buf());
        mkdir(&self.spec.root)?;
        mkdir(&self.spec.upper())?;
        fresh_dir(&self.spec.work())?;
        overlay(&self.spec)?;
        self.mounted = true;
        Ok(Frozen {
            layers: self.spec.lowers.clone(),
            copy: CopyKind::Cow,
        })
    }
}

/// Gives this process a mount namespace of its own, when it may (root, or `CAP_SYS_ADMIN`),
/// so the views it mounts are its alone and vanish with it: a daemon killed with `kill -9`
/// leaves no mount behind, and a restarted one mounts its sessions' views again. Mounts of
/// the host still reach it (the root is made a *slave*), its own never reach the host.
/// Must be called while the process has one thread (`unshare(CLONE_NEWNS)` refuses a
/// threaded process); `false` when it could not (the views are then mounted on the host's
/// namespace, or copied).
pub fn private_mount_namespace() -> bool {
    // SAFETY: plain system calls on NUL-terminated constants; no memory is handed over.
    unsafe {
        if libc::unshare(libc::CLONE_NEWNS) != 0 {
            return false;
        }
        let slave = libc::mount(
            c"none".as_ptr(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_SLAVE,
            std::ptr::null(),
        );
        if slave != 0 {
            tracing::warn!(error = %io::Error::last_os_error(), "views may show on the host: / not made a slave mount");
        }
    }
    true
}

fn mkdir(path: &Path) -> Result<(), ViewError> {
    std::fs::create_dir_all(path).map_err(|source| ViewError::Prepare {
        path: path.to_path_buf(),
        source,
    })
}

/// overlayfs wants an empty work directory of its own.
fn fresh_dir(path: &Path) -> Result<(), ViewError> {
    match std::fs::remove_dir_all(path) {
        Ok(()) => {}
        Err(err) if err.kind() == io::ErrorKind::NotFound => {}
        Err(source) => {
            return Err(ViewError::Prepare {
                path: path.to_path_buf(),
                source,
            });
        }
    }
    mkdir(path)
}

fn rename(from: &Path, to: &Path) -> Result<(), ViewError> {
    // A directory that is a mount point in any mount namespace cannot be renamed (EBUSY). A
    // session's sandbox binds its root in a namespace of its own, and the shells the caller
    // stopped may take a moment to exit and take that namespace with them: wait a little for
    // it (schemathesis found the race: a snapshot right after a bash call answered 500).
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
    loop {
        match std::fs::rename(from, to) {
            Err(err)
                if err.raw_os_error() == Some(libc::EBUSY)
                    && std::time::Instant::now() < deadline =>
            {
                std::thread::sleep(std::time::Duration::from_millis(20));
            }
            done => {
                return done.map_err(|source| ViewError::Prepare {
                    path: from.to_path_buf(),
                    source,
                });
            }
        }
    }
}

fn c_path(path: &Path) -> io::Result<CString> {
    CString::new(path.as_os_str().as_bytes())
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "path holds a NUL byte"))
}

/// overlayfs options separate layers with `:` and options with `,`; such a path would be
/// misread, so it is refused.
fn option_path(path: &Path) -> io::Result<String> {
    let text = path
        .to_str()
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "layer path is not UTF-8"))?;
    if text.contains([':', ',', '\\']) {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("layer path \"{text}\" holds ':', ',' or '\\'"),
        ));
    }
    Ok(text.to_owned())
}

fn overlay(spec: &ViewSpec) -> Result<(), ViewError> {
    let fail = |source| ViewError::Mount {
        root: spec.root.clone(),
        source,
    };
    let lowers = spec
        .lowers
        .iter()
        .map(|l| option_path(l))
        .collect::<io::Result<Vec<_>>>()
        .map_err(fail)?
        .join(":");
    let options = format!(
        "lowerdir={lowers},upperdir={},workdir={}",
        option_path(&spec.upper()).map_err(fail)?,
        option_path(&spec.work()).map_err(fail)?
    );
    let target = c_path(&spec.root).map_err(fail)?;
    let mount = |options: String| {
        let data = CString::new(options)
            .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in options"))?;
        // SAFETY: every pointer is a NUL-terminated string that outlives the call.
        let rc = unsafe {
            libc::mount(
                c"overlay".as_ptr(),
                target.as_ptr(),
                c"overlay".as_ptr(),
                0,
                data.as_ptr().cast(),
            )
        };
        if rc != 0 {
            return Err(io::Error::last_os_error());
        }
        Ok(())
    };
    // `volatile` (Linux 5.10): taking the view down does not sync the upper's filesystem —
    // which is the whole disk the data directory is on, everybody's dirty pages (a fork of a
    // session already forked once took 0.36 s with 1 GiB written elsewhere on the disk, 10 ms
    // without). A kernel without it refuses the option: mounted as before.
    match mount(format!("{options},volatile")) {
        Err(err) if err.raw_os_error() == Some(libc::EINVAL) => mount(options).map_err(fail),
        mounted => mounted.map_err(fail),
    }
}

fn umount_lazy(root: &Path) -> io::Result<()> {
    let target = c_path(root)?;
    // SAFETY: a NUL-terminated path that outlives the call.
    let rc = unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) };
    if rc != 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Detaches whatever a crashed daemon left mounted at `root` (nothing there: no harm).
fn detach(root: &Path) {
    while umount_lazy(root).is_ok() {}
}

#[cfg(test)]
#[path = "view_tests.rs"]
mod tests;
