//! The workspace in and out (DESIGN §12): a session's filesystem as a copy-on-write view
//! ([`view`]), files and archives carried across its boundary ([`files`], [`archive`],
//! [`download`]), and the frozen layers snapshots and forks are made of ([`Workspaces`]).
//!
//! [`Workspaces`] is the daemon's one hub for views: it chooses the method once
//! ([`ViewMethod::probe`]), mounts each session's view at its working directory, keeps the
//! mounted views by session id, freezes one into a snapshot's layer, and takes them down when
//! a session closes or the daemon stops (a restart mounts them again from what the store
//! keeps). Where things live: a session's `upper/` and `work/` under
//! `<data_dir>/views/<session>`, a snapshot's layer under the snapshot root
//! (`<snapshot_root>/<snapshot>/layer`); an environment session's snapshot's layer in the first
//! allowed root's `.toold-snapshots` ([`Workspaces::environment_layer_dir`]). The hub does not
//! keep environments' views (the service mounts them: `service::environments`).
//!
//! Deliberately absent: permissions, audit and quotas (the service runs transfers through the
//! dispatch pipeline and counts snapshots), HTTP (the doors stream bodies in and out).

pub mod archive;
mod archive_zip;
pub mod copy;
pub mod download;
pub mod files;
pub mod transfer_tools;
pub mod view;

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard, OnceLock};

pub use view::{CopyKind, Frozen, MountedView, ViewError, ViewMethod, ViewSpec};

/// The directory of an allowed root that holds its sessions' snapshots.
pub const SHARED_SNAPSHOTS: &str = ".toold-snapshots";

/// Where the hub keeps things and how much an upload may hold.
#[derive(Clone, Debug)]
pub struct WorkspaceSettings {
    /// The daemon's data directory: views' private directories go under `views/`.
    pub data_dir: PathBuf,
    /// Where the layers of a fresh workspace's snapshots live: the data directory's
    /// `snapshots/`.
    pub snapshot_root: PathBuf,
    /// The allowed workspace roots: a session whose workspace lies under one keeps its
    /// snapshots' layers in that root's `.toold-snapshots/`, which every daemon of a fleet
    /// sharing the root sees (`docs/decisions/workspace.md`).
    pub allowed_roots: Vec<PathBuf>,
    /// `[environments] max_upload_mb`, in bytes.
    pub max_upload_bytes: u64,
    /// `[environments] max_upload_entries`.
    pub max_upload_entries: u64,
    /// `[limits] snapshots_per_principal` (0: none).
    pub snapshots_per_principal: usize,
    /// `[limits] snapshot_bytes_per_principal` (0: none).
    pub snapshot_bytes_per_principal: u64,
}

impl WorkspaceSettings {
    /// Defaults under `data_dir`, for tests and embedding.
    pub fn under(data_dir: &Path) -> WorkspaceSettings {
        WorkspaceSettings {
            data_dir: data_dir.to_path_buf(),
            snapshot_root: data_dir.join("snapshots"),
            allowed_roots: Vec::new(),
            max_upload_bytes: 4096 << 20,
            max_upload_entries: 200_000,
            snapshots_per_principal: 0,
            snapshot_bytes_per_principal: 0,
        }
    }

    /// The limits an archive is checked against.
    pub fn upload_limits(&self) -> archive::UploadLimits {
        archive::UploadLimits {
            max_bytes: self.max_upload_bytes,
            max_entries: self.max_upload_entries,
            ..archive::UploadLimits::default()
        }
    }
}

/// The daemon's views, by session id.
#[derive(Debug)]
pub struct Workspaces {
    settings: WorkspaceSettings,
    method: OnceLock<ViewMethod>,
    views: Mutex<HashMap<String, MountedView>>,
}

impl Workspaces {
    pub fn new(settings: WorkspaceSettings) -> Workspaces {
        Workspaces {
            settings,
            method: OnceLock::new(),
            views: Mutex::new(HashMap::new()),
        }
    }

    pub fn settings(&self) -> &WorkspaceSettings {
        &self.settings
    }

    /// How views with lowers are made here, probed on first use.
    pub fn method(&self) -> ViewMethod {
        *self.method.get_or_init(|| {
            let _ = std::fs::create_dir_all(&self.settings.data_dir);
            ViewMethod::probe(&self.settings.data_dir)
        })
    }

    fn views(&self) -> MutexGuard<'_, HashMap<String, MountedView>> {
        // Plain map inserts and removes: a panic cannot leave it half-changed.
        self.views.lock().unwrap_or_else(|p| p.into_inner())
    }

    fn private_dir(&self, session_id: &str) -> PathBuf {
        self.settings.data_dir.join("views").join(session_id)
    }

    /// The directories snapshots' layers may lie in: the data directory's, and each allowed
    /// root's `.toold-snapshots`.
    fn snapshot_roots(&self) -> impl Iterator<Item = PathBuf> + '_ {
        std::iter::once(self.settings.snapshot_root.clone()).chain(
            self.settings.allowed_roots.iter().map(|root| {
                root.canonicalize()
                    .unwrap_or_else(|_| root.clone())
                    .join(SHARED_SNAPSHOTS)
            }),
        )
    }

    /// Where the own layer of snapshot `snapshot_id` of a session at `root` goes: beside the
    /// allowed root the workspace lies under, else under the data directory.
    pub fn layer_dir(&self, snapshot_id: &str, root: &Path) -> PathBuf {
        let shared = self.settings.allowed_roots.iter().find_map(|allowed| {
            let allowed = allowed.canonicalize().ok()?;
            root.starts_with(&allowed)
                .then(|| allowed.join(SHARED_SNAPSHOTS))
        });
        shared
            .unwrap_or_else(|| self.settings.snapshot_root.clone())
            .join(snapshot_id)
            .join("layer")
    }

    /// Where the own layer of snapshot `snapshot_id` of an *environment* session goes: its
    /// root lies under the data directory, never under an allowed root, so its layer goes to
    /// the first allowed root's `.toold-snapshots` when the daemon has one (the directory a
    /// fleet shares: any daemon of it can start a session from the snapshot), else under the
    /// data directory. The layer is a copy of the session's changes either way
    /// ([`MountedView::copy_changes`]), so its filesystem does not matter.
    pub fn environment_layer_dir(&self, snapshot_id: &str) -> PathBuf {
        let shared = self.settings.allowed_roots.first().map(|allowed| {
            allowed
                .canonicalize()
                .unwrap_or_else(|_| allowed.clone())
                .join(SHARED_SNAPSHOTS)
        });
        shared
            .unwrap_or_else(|| self.settings.snapshot_root.clone())
            .join(snapshot_id)
            .join("layer")
    }

    /// Whether `layer` is a snapshot layer this hub may mount (a path read back from the store
    /// is only mounted if it is).
    pub fn owns_layer(&self, layer: &Path) -> bool {
        layer.is_absolute()
            && !layer
                .components()
                .any(|c| c == std::path::Component::ParentDir)
            && self.snapshot_roots().any(|root| layer.starts_with(root))
    }

    /// Makes session `session_id`'s view over `lowers` at `root` (its working directory) and
    /// keeps it; what it copied.
    pub fn open(
        &self,
        session_id: &str,
        root: &Path,
        lowers: Vec<PathBuf>,
    ) -> Result<CopyKind, ViewError> {
        let method = self.method();
        let spec = ViewSpec {
            lowers,
            private_dir: self.private_dir(session_id),
            root: root.to_path_buf(),
        };
        let view = MountedView::mount(spec, method)?;
        let copy = view.copy_kind();
        self.views().insert(session_id.to_owned(), view);
        Ok(copy)
    }

    /// Freezes session `session_id`'s view into snapshot `snapshot_id`'s layer; the layers a
    /// session from the snapshot stacks, topmost first. `movable`: the root is a fresh
    /// workspace the daemon made (see [`MountedView::freeze`]).
    pub fn freeze(
        &self,
        session_id: &str,
        root: &Path,
        snapshot_id: &str,
        movable: bool,
    ) -> Result<Frozen, ViewError> {
        let layer = self.layer_dir(snapshot_id, root);
        let mut views = self.views();
        if !views.contains_key(session_id) {
            // A plain session opened before views: its root is its own upper.
            let spec = ViewSpec {
                lowers: Vec::new(),
                private_dir: self.private_dir(session_id),
                root: root.to_path_buf(),
            };
            views.insert(
                session_id.to_owned(),
                MountedView::mount(spec, self.method())?,
            );
        }
        let view = views
            .get_mut(session_id)
            .expect("inserted above when missing");
        view.freeze(&layer, movable)
    }

    /// The lowers session `session_id`'s view stacks now (empty: a plain directory).
    pub fn lowers(&self, session_id: &str) -> Vec<PathBuf> {
        self.views()
            .get(session_id)
            .map(|view| view.spec().lowers.clone())
            .unwrap_or_default()
    }

    /// Takes session `session_id`'s view down and removes its private directory (the
    /// session's changes over its lowers go with it; its snapshots keep theirs).
    pub fn close(&self, session_id: &str) {
        let Some(view) = self.views().remove(session_id) else {
            return;
        };
        if let Err(err) = view.unmount() {
            tracing::warn!(session = session_id, error = %err, "view not unmounted");
        }
        if !view.spec().lowers.is_empty() {
            let _ = std::fs::remove_dir_all(&view.spec().private_dir);
        }
    }

    /// Takes every view down, keeping their uppers: the daemon stops, and the next one mounts
    /// them again.
    pub fn unmount_all(&self) {
        for (session, view) in self.views().drain() {
            if let Err(err) = view.unmount() {
                tracing::warn!(%session, error = %err, "view not unmounted");
            }
        }
    }

    /// Removes the files of the snapshot whose own layer is `layer` (`<root>/<id>/layer`).
    pub fn remove_snapshot(&self, layer: &Path) {
        let Some(dir) = layer.parent().filter(|_| self.owns_layer(layer)) else {
            return;
        };
        if let Err(err) = std::fs::remove_dir_all(dir)
            && err.kind() != std::io::ErrorKind::NotFound
        {
            tracing::warn!(dir = %dir.display(), error = %err, "snapshot files not removed");
        }
    }
}
