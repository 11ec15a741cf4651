//! Snapshots and forks (DESIGN §12): freezing a session's filesystem, sessions that start from
//! a snapshot, forks (a snapshot and N sessions in one call), listing and deleting.
//!
//! A snapshot belongs to the principal that took it: another agent's is `not_found` with the
//! message an unknown id gets, an observer may read but not take or delete. Taking one waits
//! for the session's running batches and stops its background shells and spawner (they hold
//! the directory the freeze replaces; `docs/decisions/workspace.md`); the session runs on over
//! the frozen layer. Quotas (`[limits] snapshots_per_principal`, `snapshot_bytes_per_principal`)
//! are checked before a snapshot is taken: over one is 429 `limit_exceeded`. A fork measures
//! its snapshot's size after answering (walking the files would make its cost grow with the
//! workspace); a plain snapshot measures it before.
//!
//! An environment session's snapshot freezes its *root's* changes (`freeze_environment`): the
//! environment view's upper is copied (it lives on the session's `disk_mb` filesystem, out of
//! which a rename is `EXDEV`), never the image, into a layer in the first allowed root's
//! `.toold-snapshots` (else the data directory's), and the session's view is left as it is.
//! A session from it takes the source session's environment (`snapshot_environment`, read
//! from the source's stored row) and stacks the layers over the image's root
//! (`docs/decisions/environments.md`).

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant, SystemTime};

use serde::{Deserialize, Serialize};

use super::access::Access;
use super::sessions::CreateSessionRequest;
use super::{ErrorCode, ServiceError, SessionInfo, ToolService};
use crate::permission::{Principal, Role};
use crate::store::SnapshotRecord;
use crate::workspace::copy::tree_bytes;

/// How long a snapshot waits for the session's running batches.
const QUIET_WAIT: Duration = Duration::from_secs(60);
/// The most sessions one fork makes.
pub const MAX_FORKS: usize = 64;

/// `POST /v1/sessions/{id}/snapshots`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct SnapshotRequest {
    pub name: Option<String>,
}

/// `POST /v1/sessions/{id}/fork`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ForkRequest {
    /// Sessions to make from the snapshot, 1 to [`MAX_FORKS`].
    pub count: usize,
    #[serde(default)]
    pub name: Option<String>,
}

/// A snapshot as the API shows it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SnapshotInfo {
    pub id: String,
    pub name: Option<String>,
    pub session_id: String,
    pub principal: Option<String>,
    /// Bytes of the files its own layer holds (0 until a fork's is measured).
    pub size_bytes: u64,
    /// `cow`: nothing was copied; `full`: its files were copied.
    pub copy: String,
    /// How many layers a session from it stacks.
    pub layers: usize,
    /// RFC 3339.
    pub created_at: String,
}

/// What a fork made.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ForkInfo {
    pub snapshot_id: String,
    pub sessions: Vec<SessionInfo>,
    pub copy: String,
}

fn info(record: &SnapshotRecord) -> SnapshotInfo {
    SnapshotInfo {
        id: record.id.clone(),
        name: record.name.clone(),
        session_id: record.session_id.clone(),
        principal: record.principal.clone(),
        size_bytes: record.size_bytes,
        copy: record.copy.clone(),
        layers: record.layers.len(),
        created_at: humantime::format_rfc3339_millis(record.created_at).to_string(),
    }
}

fn unknown_snapshot(id: &str) -> ServiceError {
    ServiceError::not_found(format!("unknown snapshot \"{id}\""))
}

fn check_name(name: &Option<String>) -> Result<(), ServiceError> {
    match name {
        Some(name) if name.chars().count() > 200 || name.chars().any(char::is_control) => {
            Err(ServiceError::invalid(format!(
                "snapshot name \"{}\" must be at most 200 characters without control characters",
                name.escape_debug()
            )))
        }
        _ => Ok(()),
    }
}

impl ToolService {
    /// Freezes session `session_id`'s filesystem into a new snapshot of `caller`'s.
    pub async fn take_snapshot(
        &self,
        caller: &Principal,
        session_id: &str,
        request: SnapshotRequest,
    ) -> Result<SnapshotInfo, ServiceError> {
        let mut record = self
            .freeze_session(caller, session_id, request.name)
            .await?;
        let layer = record.layers.first().cloned().unwrap_or_default();
        record.size_bytes = tokio::task::spawn_blocking(move || tree_bytes(&layer))
            .await
            .unwrap_or(0);
        self.store.insert_snapshot(&record).await?;
        Ok(info(&record))
    }

    /// A snapshot of session `session_id` and `request.count` sessions from it.
    pub async fn fork_session(
        &self,
        caller: &Principal,
        session_id: &str,
        request: ForkRequest,
    ) -> Result<ForkInfo, ServiceError> {
        if request.count == 0 || request.count > MAX_FORKS {
            return Err(ServiceError::invalid(format!(
                "count {} must be between 1 and {MAX_FORKS}",
                request.count
            )));
        }
        let started = Instant::now();
        let parent = self
            .session_for(caller, session_id, Access::Write)?
            .info
            .clone();
        let record = self
            .freeze_session(caller, session_id, request.name)
            .await?;
        self.store.insert_snapshot(&record).await?;
        let mut sessions = Vec::with_capacity(request.count);
        for _ in 0..request.count {
            let fork = CreateSessionRequest {
                permission_mode: Some(parent.permission_mode),
                rules: parent.rules.clone(),
                tools: parent.tools.clone(),
                interactive: parent.interactive,
                mcp_servers: parent.mcp_servers.clone(),
                providers: parent.providers.clone(),
                metadata: parent.metadata.clone(),
                network: parent.network,
                from_snapshot: Some(record.id.clone()),
                ..CreateSessionRequest::default()
            };
            sessions.push(self.create_session(caller, fork).await?);
        }
        crate::telemetry::record_fork(started.elapsed());
        self.measure_later(&record);
        Ok(ForkInfo {
            snapshot_id: record.id.clone(),
            sessions,
            copy: record.copy,
        })
    }

    /// Measures a snapshot's size in the background and stores it.
    fn measure_later(&self, record: &SnapshotRecord) {
        let store = self.store.clone();
        let (id, layer) = (
            record.id.clone(),
            record.layers.first().cloned().unwrap_or_default(),
        );
        tokio::spawn(async move {
            let size = tokio::task::spawn_blocking(move || tree_bytes(&layer))
                .await
                .unwrap_or(0);
            if let Err(err) = store.set_snapshot_size(&id, size).await {
                tracing::warn!(snapshot = %id, error = %err, "snapshot size not stored");
            }
        });
    }

    /// Freezes the session (quota checked, batches waited for, shells stopped); the record
    /// (size 0), not yet stored.
    async fn freeze_session(
        &self,
        caller: &Principal,
        session_id: &str,
        name: Option<String>,
    ) -> Result<SnapshotRecord, ServiceError> {
        check_name(&name)?;
        let live = self.session_for(caller, session_id, Access::Write)?;
        self.check_snapshot_quota(caller).await?;
        let _quiet = tokio::time::timeout(QUIET_WAIT, live.batches_running.write())
            .await
            .map_err(|_| {
                ServiceError::new(
                    ErrorCode::Unavailable,
                    format!("session \"{session_id}\" is still running a batch; snapshot it when it is done"),
                )
            })?;
        self.shells.kill_session(session_id).await;
        let id = format!("snap_{}", uuid::Uuid::now_v7().simple());
        let (layers, copy) = if live.environment_view.is_some() {
            (self.freeze_environment(&live, &id).await?, "full")
        } else {
            let root = live.info.working_directory.clone();
            let movable = self.is_fresh_workspace(&root);
            let workspaces = self.workspaces.clone();
            let (session, snapshot) = (session_id.to_owned(), id.clone());
            let frozen = tokio::task::spawn_blocking(move || {
                workspaces.freeze(&session, &root, &snapshot, movable)
            })
            .await
            .map_err(|err| ServiceError::internal(format!("snapshot stopped: {err}")))?
            .map_err(|err| ServiceError::internal(err.to_string()))?;
            let copy = match frozen.copy {
                crate::workspace::CopyKind::Cow => {
                    self.store
                        .set_session_layers(session_id, &frozen.layers)
                        .await?;
                    "cow"
                }
                crate::workspace::CopyKind::Full => "full",
            };
            (frozen.layers, copy)
        };
        crate::telemetry::record_snapshot();
        Ok(SnapshotRecord {
            id,
            principal: Some(caller.name.to_string()),
            session_id: session_id.to_owned(),
            name,
            layers,
            size_bytes: 0,
            copy: copy.to_owned(),
            created_at: SystemTime::now(),
        })
    }

    /// Freezes an environment session's root changes into snapshot `snapshot`'s layer: its
    /// upper copied (it lives on the session's `disk_mb` filesystem, so it cannot be renamed
    /// out; `MountedView::copy_changes`), the session's view left as it is. The layers a
    /// session from the snapshot stacks over the image's root, topmost first: the image's
    /// root itself is not among them (it is the environment's, leased by digest).
    async fn freeze_environment(
        &self,
        live: &std::sync::Arc<super::LiveSession>,
        snapshot: &str,
    ) -> Result<Vec<PathBuf>, ServiceError> {
        let layer = self.workspaces.environment_layer_dir(snapshot);
        let image_root = live.info.environment.as_ref().map(|e| e.rootfs.clone());
        let session = live.clone();
        let frozen = tokio::task::spawn_blocking(move || {
            let view = session.environment_view.as_ref()?;
            Some(view.copy_changes(&layer))
        })
        .await
        .map_err(|err| ServiceError::internal(format!("snapshot stopped: {err}")))?
        .ok_or_else(|| ServiceError::internal("the session's environment is not mounted"))?
        .map_err(|err| ServiceError::internal(err.to_string()))?;
        Ok(frozen
            .layers
            .into_iter()
            .filter(|l| Some(l) != image_root.as_ref())
            .collect())
    }

    /// The environment of snapshot `id`'s source session, if it had one (a session's row is
    /// kept once it closed, so a snapshot outlives its source; `None` for a plain session's).
    pub(super) async fn snapshot_environment(
        &self,
        id: &str,
    ) -> Result<Option<super::environments::EnvironmentInfo>, ServiceError> {
        let Some(record) = self.store.get_snapshot(id).await? else {
            return Ok(None);
        };
        let Some(source) = self.store.get_session(&record.session_id).await? else {
            return Ok(None);
        };
        Ok(super::sessions::stored_options(&source)?.1)
    }

    /// Whether `root` is a workspace the daemon made (under its workspaces directory).
    fn is_fresh_workspace(&self, root: &Path) -> bool {
        self.settings
            .workspaces_dir
            .canonicalize()
            .is_ok_and(|dir| root.parent() == Some(dir.as_path()))
    }

    async fn check_snapshot_quota(&self, caller: &Principal) -> Result<(), ServiceError> {
        let settings = self.workspaces.settings();
        let (max_count, max_bytes) = (
            settings.snapshots_per_principal,
            settings.snapshot_bytes_per_principal,
        );
        if max_count == 0 && max_bytes == 0 {
            return Ok(());
        }
        let mine: Vec<SnapshotRecord> = self
            .store
            .list_snapshots()
            .await?
            .into_iter()
            .filter(|s| s.principal.as_deref() == Some(&*caller.name))
            .collect();
        let bytes: u64 = mine.iter().map(|s| s.size_bytes).sum();
        if max_count > 0 && mine.len() >= max_count {
            return Err(ServiceError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "\"{}\" holds {} snapshots, its limit ([limits] snapshots_per_principal)",
                    caller.name,
                    mine.len()
                ),
            ));
        }
        if max_bytes > 0 && bytes >= max_bytes {
            return Err(ServiceError::new(
                ErrorCode::LimitExceeded,
                format!(
                    "\"{}\"'s snapshots hold {bytes} bytes, at or past its limit of {max_bytes} ([limits] snapshot_bytes_per_principal)",
                    caller.name
                ),
            ));
        }
        Ok(())
    }

    /// Snapshot `id` if `caller` may see it.
    async fn snapshot_for(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<SnapshotRecord, ServiceError> {
        let record = self
            .store
            .get_snapshot(id)
            .await?
            .ok_or_else(|| unknown_snapshot(id))?;
        let sees = caller.role != Role::Agent || record.principal.as_deref() == Some(&*caller.name);
        if !sees || caller.session_scope.is_some() {
            return Err(unknown_snapshot(id));
        }
        Ok(record)
    }

    pub async fn get_snapshot(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<SnapshotInfo, ServiceError> {
        Ok(info(&self.snapshot_for(caller, id).await?))
    }

    /// The snapshots `caller` sees, oldest first.
    pub async fn list_snapshots(
        &self,
        caller: &Principal,
    ) -> Result<Vec<SnapshotInfo>, ServiceError> {
        let all = self.store.list_snapshots().await?;
        Ok(all
            .iter()
            .filter(|_| caller.session_scope.is_none())
            .filter(|s| caller.role != Role::Agent || s.principal.as_deref() == Some(&*caller.name))
            .map(info)
            .collect())
    }

    /// Deletes snapshot `id`; its files go once no snapshot or open session stacks them.
    pub async fn delete_snapshot(
        &self,
        caller: &Principal,
        id: &str,
    ) -> Result<SnapshotInfo, ServiceError> {
        self.authorize_write(caller)?;
        let record = self.snapshot_for(caller, id).await?;
        if !self.store.delete_snapshot(id).await? {
            return Err(unknown_snapshot(id));
        }
        // Its own layer is its topmost; the ones below belong to the snapshots it stacks on.
        if let Some(own) = record.layers.first()
            && !self.layer_in_use(own).await?
        {
            self.workspaces.remove_snapshot(own);
        }
        Ok(info(&record))
    }

    async fn layer_in_use(&self, layer: &Path) -> Result<bool, ServiceError> {
        if self
            .store
            .list_snapshots()
            .await?
            .iter()
            .any(|s| s.layers.iter().any(|l| l == layer))
        {
            return Ok(true);
        }
        for session in self.store.list_sessions(false).await? {
            if self
                .store
                .session_layers(&session.id)
                .await?
                .iter()
                .any(|l| l == layer)
            {
                return Ok(true);
            }
        }
        Ok(false)
    }

    /// The layers a session from snapshot `id` stacks, checked: `caller` sees it and its
    /// layers are this daemon's to mount.
    pub(super) async fn snapshot_layers(
        &self,
        caller_name: &str,
        role: Role,
        id: &str,
    ) -> Result<Vec<PathBuf>, ServiceError> {
        let record = self
            .store
            .get_snapshot(id)
            .await?
            .ok_or_else(|| unknown_snapshot(id))?;
        if role == Role::Agent && record.principal.as_deref() != Some(caller_name) {
            return Err(unknown_snapshot(id));
        }
        if let Some(layer) = record
            .layers
            .iter()
            .find(|l| !self.workspaces.owns_layer(l) || !l.is_dir())
        {
            return Err(ServiceError::new(
                ErrorCode::Unavailable,
                format!(
                    "snapshot \"{id}\"'s files (\"{}\") are not reachable from this daemon",
                    layer.display()
                ),
            ));
        }
        Ok(record.layers)
    }

    /// Mounts session `id`'s view over `lowers` at `root`; how much it copied.
    pub(super) fn open_view(
        &self,
        id: &str,
        root: &Path,
        lowers: Vec<PathBuf>,
    ) -> Result<crate::workspace::CopyKind, ServiceError> {
        self.workspaces
            .open(id, root, lowers)
            .map_err(|err| ServiceError::internal(err.to_string()))
    }

    /// Takes every view down (the daemon stops; the next one mounts them again).
    pub fn unmount_views(&self) {
        self.workspaces.unmount_all();
    }

    /// Takes session `id`'s view down (it closed).
    pub(super) fn close_view(&self, id: &str) {
        self.workspaces.close(id);
    }
}
