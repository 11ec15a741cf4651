//! Environments at the façade (DESIGN §12): the image cache's operations for the doors
//! (`POST /v1/images/pull`, `GET /v1/images`, `DELETE /v1/images/{digest}`), and what a
//! session's creation does with `environment`: checks it, resolves its isolation tier and
//! limits against `[environments]`, and leases its image (pulling it, with `image:pull`
//! events, when the cache does not have it). A creation whose image cannot be had fails before
//! anything of the session exists: no row, no workspace, no lease.
//!
//! The limits: `disk_mb` is the filesystem the session's writes land on, made here before the
//! view is mounted (`environment::disk`); `memory_mb`, `pids` and `cpus` travel with the
//! tools' view of the environment to the sandbox, which puts them on the session's cgroup.
//!
//! A session from an environment session's snapshot (`service::sessions`) gets the same
//! resolved environment: its tier checked again (`check_isolation`), its image leased by
//! digest or, when the cache no longer has it, pulled as `repository@digest`
//! (`lease_by_digest`); its root is mounted with the snapshot's layers over the image's.
//!
//! Who may: pulling and listing are for admins and agents (observers read the list); deleting
//! an image is for admins only, since the cache is shared by every principal's sessions.
//! Deliberately absent: running anything in the environment (the tools and the sandbox).

use std::path::PathBuf;
use std::sync::Arc;

use serde::{Deserialize, Serialize};
use serde_json::json;

use super::sessions::CreateSessionRequest;
use super::{ServiceError, ToolService, error::ErrorCode};
use crate::environment::{
    EnvironmentRequest, ImageCache, ImageError, ImageInfo, ImageLease, Isolation, Limits, Network,
    PullProgress,
};
use crate::event::{EventDraft, EventType};
use crate::permission::{Principal, Role};

/// What the service knows of `[environments]` and of this daemon's sandbox.
#[derive(Clone)]
pub struct Environments {
    /// `None`: environments are refused (no image cache: tests and embedders).
    pub cache: Option<ImageCache>,
    pub default_isolation: Isolation,
    /// What `auto` means on this daemon: `bwrap` where it works, else `landlock`.
    pub auto_isolation: Isolation,
    /// Tiers this daemon can run (`gvisor` only with `runsc`).
    pub available: Vec<Isolation>,
    pub default_limits: Limits,
    pub max_limits: Limits,
}

impl Default for Environments {
    fn default() -> Self {
        Environments {
            cache: None,
            default_isolation: Isolation::Auto,
            auto_isolation: Isolation::Landlock,
            available: Vec::new(),
            default_limits: Limits::default(),
            max_limits: Limits::default(),
        }
    }
}

/// A session's environment as answers show it (`environment` in a session's JSON).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct EnvironmentInfo {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// The image's manifest digest.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub digest: Option<String>,
    /// The read-only root the session's filesystem is built on.
    pub rootfs: PathBuf,
    /// The tier taken (never `auto`).
    pub isolation: Isolation,
    pub network: Network,
    pub limits: Limits,
    pub workdir: PathBuf,
    /// The image's `Env` with the request's `env` over it (`NAME=value`).
    pub env: Vec<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub user: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image_working_dir: Option<String>,
}

/// An environment made ready for a session: its answer and its hold on the image.
pub(super) struct Prepared {
    pub info: EnvironmentInfo,
    pub lease: Option<ImageLease>,
}

/// An environment's filesystem mounted for a session: the image's root as the lower of a
/// copy-on-write view (`workspace::view`) private to it, with the workspace at `workdir`.
pub(super) struct Mounted {
    pub view: crate::workspace::MountedView,
    /// The workspace as the host sees it: the session's working directory.
    pub working_directory: PathBuf,
    pub tools: crate::tool::EnvironmentView,
}

impl ToolService {
    /// Mounts session `id`'s environment under `<data_dir>/environments/<id>` (again after a
    /// restart: the private upper is kept): `layers` (a snapshot's, topmost first; none for a
    /// session made on the image) over the image's root.
    pub(super) fn mount_environment(
        &self,
        id: &str,
        info: &EnvironmentInfo,
        layers: &[PathBuf],
    ) -> Result<Mounted, ServiceError> {
        let base = self
            .settings
            .workspaces_dir
            .parent()
            .unwrap_or(&self.settings.workspaces_dir)
            .join("environments")
            .join(id);
        let spec = crate::workspace::ViewSpec {
            lowers: layers
                .iter()
                .cloned()
                .chain(std::iter::once(info.rootfs.clone()))
                .collect(),
            private_dir: base.join("view"),
            root: base.join("root"),
        };
        if let Some(mb) = info.limits.disk_mb {
            // The writable layer on a filesystem of `disk_mb` (`environment::disk`). Without
            // one (no loop device, no privilege) the session runs unbounded, and says so.
            if let Err(err) = crate::environment::disk::attach(&spec.private_dir, mb) {
                tracing::warn!(session = %id, error = %err, "disk_mb = {mb} not applied: no filesystem of its own for the session");
            }
        }
        let mount = |method| crate::workspace::MountedView::mount(spec.clone(), method);
        let view = mount(crate::workspace::ViewMethod::Overlay)
            .or_else(|_| mount(crate::workspace::ViewMethod::FullCopy))
            .map_err(|err| {
                ServiceError::internal(format!("session \"{id}\"'s environment: {err}"))
            })?;
        let inside = crate::environment::spec::workdir_inside(&info.workdir)
            .map_err(ServiceError::invalid)?;
        let working_directory = spec.root.join(inside);
        std::fs::create_dir_all(&working_directory).map_err(|err| {
            ServiceError::internal(format!(
                "cannot make the workspace \"{}\" in the environment: {err}",
                info.workdir.display()
            ))
        })?;
        // The sandbox's mount points, made in the session's upper so that bubblewrap finds them
        // when the root is bound read-only.
        let points = ["dev", "proc", "tmp", ".toold/lib"];
        for point in points {
            let _ = std::fs::create_dir_all(spec.root.join(point));
        }
        for file in [".toold/ld.so", ".toold/toold"] {
            let path = spec.root.join(file);
            if !path.exists() {
                let _ = std::fs::write(&path, b"");
            }
        }
        let bash = spec.root.join("bin/bash");
        let shell = if std::fs::symlink_metadata(&bash).is_ok() {
            "/bin/bash"
        } else {
            "/bin/sh"
        };
        let tools = crate::tool::EnvironmentView {
            root: spec.root.clone(),
            workdir: info.workdir.clone(),
            env: info.env.clone(),
            shell: PathBuf::from(shell),
            isolation: info.isolation.as_str(),
            writable_root: false,
            limits: crate::tool::EnvironmentLimits {
                memory_mb: info.limits.memory_mb.unwrap_or(0),
                pids: info.limits.pids.unwrap_or(0),
                cpu_millis: info
                    .limits
                    .cpus
                    .map_or(0, |cpus| (cpus * 1000.0).round() as u64),
            },
        };
        Ok(Mounted {
            view,
            working_directory,
            tools,
        })
    }
}

impl ToolService {
    /// Uses `environments` for sessions that ask for one and for the image endpoints.
    pub fn with_environments(mut self, environments: Environments) -> ToolService {
        self.environments = environments;
        self
    }

    /// Pulls `image` into the cache (even when cached: a tag may have moved).
    pub async fn pull_image(
        &self,
        caller: &Principal,
        image: &str,
    ) -> Result<ImageInfo, ServiceError> {
        self.authorize_write(caller)?;
        let cache = self.image_cache()?;
        let progress = self.pull_events("", &caller.name);
        let result = cache.pull(image, &progress).await;
        crate::telemetry::record_image_pull(result.is_ok());
        result.map_err(image_error)
    }

    /// Every cached image.
    pub fn list_images(&self, _caller: &Principal) -> Result<Vec<ImageInfo>, ServiceError> {
        Ok(self.image_cache()?.list())
    }

    /// Removes a cached image no session uses (`conflict` while one does).
    pub fn delete_image(
        &self,
        caller: &Principal,
        digest: &str,
    ) -> Result<ImageInfo, ServiceError> {
        self.authorize_write(caller)?;
        if caller.role != Role::Admin {
            return Err(ServiceError::forbidden(format!(
                "principal \"{}\" may not delete images: the cache is shared (admins only)",
                caller.name
            )));
        }
        self.image_cache()?.delete(digest).map_err(image_error)
    }

    /// A restored session's hold on the image it was created on (no pull: it was cached).
    pub(super) fn relase(
        &self,
        info: &EnvironmentInfo,
    ) -> Result<Option<ImageLease>, ServiceError> {
        match (&info.digest, &self.environments.cache) {
            (Some(digest), Some(cache)) => {
                cache.lease_cached(digest).map(Some).map_err(image_error)
            }
            _ => Ok(None),
        }
    }

    /// Bytes the image cache holds (for `/metrics`).
    pub fn image_cache_bytes(&self) -> u64 {
        self.environments
            .cache
            .as_ref()
            .map_or(0, ImageCache::bytes)
    }

    /// Checks `request`, resolves it against `[environments]` and leases its image.
    pub(super) async fn prepare_environment(
        &self,
        session_id: &str,
        actor: &std::sync::Arc<str>,
        request: &EnvironmentRequest,
        rootfs: Option<PathBuf>,
    ) -> Result<Prepared, ServiceError> {
        request.check().map_err(ServiceError::invalid)?;
        let settings = &self.environments;
        let limits = request
            .limits
            .resolve(&settings.default_limits, &settings.max_limits)
            .map_err(ServiceError::invalid)?;
        let isolation = self.isolation(request.isolation)?;
        let (lease, rootfs, image_env, user, working_dir) = match (&request.image, rootfs) {
            (Some(image), _) => {
                let cache = self.image_cache()?;
                let progress = self.pull_events(session_id, actor);
                let result = cache.lease(image, &progress).await;
                let lease = result.map_err(image_error)?;
                let info = lease.info.clone();
                let rootfs = lease.rootfs.clone();
                (Some(lease), rootfs, info.env, info.user, info.working_dir)
            }
            (None, Some(rootfs)) => (None, rootfs, Vec::new(), None, None),
            (None, None) => return Err(ServiceError::invalid("environment: no root filesystem")),
        };
        let mut env = image_env;
        for (name, value) in &request.env {
            env.retain(|entry| entry.split('=').next() != Some(name.as_str()));
            env.push(format!("{name}={value}"));
        }
        Ok(Prepared {
            info: EnvironmentInfo {
                image: request.image.clone(),
                digest: lease.as_ref().map(|l| l.info.digest.clone()),
                rootfs,
                isolation,
                network: request.network,
                limits,
                workdir: request.workdir(),
                env,
                user: request.user.clone().or(user),
                image_working_dir: working_dir,
            },
            lease,
        })
    }

    /// `environment` checked and its image leased; a `rootfs` must be an allowed directory.
    async fn environment_for(
        &self,
        id: &str,
        actor: &Arc<str>,
        environment: &EnvironmentRequest,
    ) -> Result<Prepared, ServiceError> {
        environment.check().map_err(ServiceError::invalid)?;
        let rootfs = match &environment.rootfs {
            Some(dir) => Some(self.allowed_rootfs(dir)?),
            None => None,
        };
        self.prepare_environment(id, actor, environment, rootfs)
            .await
    }

    /// `environment.rootfs` checked against the allowed roots, its errors saying so.
    fn allowed_rootfs(&self, dir: &std::path::Path) -> Result<PathBuf, ServiceError> {
        self.allowed_directory(dir).map_err(|err| {
            ServiceError::new(err.code, format!("environment.rootfs: {}", err.message))
        })
    }

    /// The layers of the request's snapshot (if any) and the session's environment, made
    /// ready: the request's own, or the one an environment session's snapshot brings (its
    /// layers then go over the image's root; docs/decisions/environments.md, "Snapshots of an
    /// environment session"). `environment` with `from_snapshot` is refused either way.
    pub(super) async fn environment_of(
        &self,
        id: &str,
        actor: &Arc<str>,
        request: &CreateSessionRequest,
    ) -> Result<(Vec<PathBuf>, Option<Prepared>), ServiceError> {
        let (snapshot_layers, snapshot_environment) = match &request.from_snapshot {
            Some(snapshot) => (
                self.snapshot_layers("", crate::permission::Role::Admin, snapshot)
                    .await?,
                self.snapshot_environment(snapshot).await?,
            ),
            None => (Vec::new(), None),
        };
        let snapshot = request.from_snapshot.as_deref().unwrap_or_default();
        let prepared = match (&request.environment, snapshot_environment) {
            (Some(_), Some(_)) => {
                return Err(ServiceError::invalid(format!(
                    "from_snapshot \"{snapshot}\" is an environment session's snapshot: the session takes that environment (its image by digest, isolation, network, limits, workdir, env and user); give no environment with it"
                )));
            }
            (Some(_), None) if request.from_snapshot.is_some() => {
                return Err(ServiceError::invalid(format!(
                    "from_snapshot \"{snapshot}\" is a snapshot of a session without an environment (a workspace, not a root): it cannot start a session with environment"
                )));
            }
            (Some(_), None) if request.working_directory.is_some() => {
                return Err(ServiceError::invalid(
                    "working_directory and environment: an environment's workspace is inside it (environment.workdir)",
                ));
            }
            (Some(environment), None) => Some(self.environment_for(id, actor, environment).await?),
            (None, Some(info)) => Some(self.environment_again(id, actor, info).await?),
            (None, None) => None,
        };
        Ok((snapshot_layers, prepared))
    }

    /// The environment of a snapshot's source session, for a session from that snapshot: the
    /// same resolved environment, its image leased by digest (pulled by digest when the cache
    /// no longer has it), its tier one this daemon runs, a `rootfs` still an allowed directory.
    async fn environment_again(
        &self,
        id: &str,
        actor: &Arc<str>,
        info: EnvironmentInfo,
    ) -> Result<Prepared, ServiceError> {
        self.check_isolation(info.isolation)?;
        let lease = match &info.digest {
            Some(digest) => Some(
                self.lease_by_digest(id, actor, digest, info.image.as_deref())
                    .await?,
            ),
            None => {
                self.allowed_rootfs(&info.rootfs)?;
                None
            }
        };
        let rootfs = lease
            .as_ref()
            .map_or_else(|| info.rootfs.clone(), |l| l.rootfs.clone());
        Ok(Prepared {
            info: EnvironmentInfo { rootfs, ..info },
            lease,
        })
    }

    /// `tier` (a snapshot's environment's) is one this daemon runs.
    pub(super) fn check_isolation(&self, tier: Isolation) -> Result<(), ServiceError> {
        self.isolation(Some(tier)).map(|_| ())
    }

    /// A lease on the image `digest` (a snapshot's environment's): the cached one, else
    /// `image`'s repository pulled by that digest (never by its tag, which may have moved).
    /// Neither: `not_found` naming the digest.
    pub(super) async fn lease_by_digest(
        &self,
        session_id: &str,
        actor: &std::sync::Arc<str>,
        digest: &str,
        image: Option<&str>,
    ) -> Result<ImageLease, ServiceError> {
        let cache = self.image_cache()?;
        match cache.lease_cached(digest) {
            Ok(lease) => return Ok(lease),
            Err(ImageError::UnknownDigest(_)) => {}
            Err(err) => return Err(image_error(err)),
        }
        let Some(image) = image else {
            return Err(ServiceError::not_found(format!(
                "the snapshot's image {digest} is not in the cache, and no reference to pull it by is known"
            )));
        };
        let reference = by_digest(image, digest);
        let progress = self.pull_events(session_id, actor);
        let lease = cache.lease(&reference, &progress).await.map_err(|err| {
            let err = image_error(err);
            ServiceError::new(
                err.code,
                format!(
                    "the snapshot's image is no longer cached and pulling \"{reference}\" failed: {}",
                    err.message
                ),
            )
        })?;
        if lease.info.digest != digest {
            return Err(ServiceError::new(
                ErrorCode::BadGateway,
                format!(
                    "\"{reference}\" was pulled as {}, not the snapshot's {digest}",
                    lease.info.digest
                ),
            ));
        }
        Ok(lease)
    }

    fn isolation(&self, asked: Option<Isolation>) -> Result<Isolation, ServiceError> {
        let settings = &self.environments;
        let tier = match asked.unwrap_or(settings.default_isolation) {
            Isolation::Auto => settings.auto_isolation,
            tier => tier,
        };
        if settings.available.contains(&tier) {
            Ok(tier)
        } else {
            Err(ServiceError::invalid(format!(
                "environment.isolation \"{}\" is not available on this daemon (available: {})",
                tier.as_str(),
                settings
                    .available
                    .iter()
                    .map(|t| t.as_str())
                    .collect::<Vec<_>>()
                    .join(", ")
            )))
        }
    }

    fn image_cache(&self) -> Result<&ImageCache, ServiceError> {
        self.environments.cache.as_ref().ok_or_else(|| {
            ServiceError::invalid("this daemon runs no environments (no image cache)")
        })
    }

    /// A pull's progress as `image:pull` events (on `session_id`, empty for an ahead-of-time
    /// pull).
    fn pull_events<'a>(
        &'a self,
        session_id: &'a str,
        actor: &'a std::sync::Arc<str>,
    ) -> impl Fn(PullProgress) + Send + Sync + 'a {
        move |progress: PullProgress| {
            self.events.publish(
                EventDraft::new(EventType::ImagePull, session_id)
                    .actor(actor.clone())
                    .data(serde_json::to_value(&progress).unwrap_or_else(|_| json!({}))),
            );
        }
    }
}

/// `image` (a reference by tag or digest) naming `digest` instead:
/// `host:5000/team/py:3.12` → `host:5000/team/py@sha256:…`.
fn by_digest(image: &str, digest: &str) -> String {
    let name = image.split('@').next().unwrap_or(image);
    let last = name.rfind('/').map_or(0, |i| i + 1);
    let repository = match name[last..].find(':') {
        Some(tag) => &name[..last + tag],
        None => name,
    };
    format!("{repository}@{digest}")
}

/// An image cache error as the service's: unknown image 404, registry down or a digest that
/// does not match 502, a bad reference 400, an image in use 409.
pub(super) fn image_error(err: ImageError) -> ServiceError {
    let code = match &err {
        ImageError::InvalidReference(..) => ErrorCode::InvalidRequest,
        ImageError::NotFound(_) | ImageError::UnknownDigest(_) => ErrorCode::NotFound,
        ImageError::Unreachable(..) | ImageError::DigestMismatch(..) | ImageError::Registry(..) => {
            ErrorCode::BadGateway
        }
        ImageError::InUse(..) => ErrorCode::Conflict,
        ImageError::Unpack(..) => ErrorCode::Internal,
    };
    ServiceError::new(code, err.to_string())
}

#[cfg(test)]
mod tests {
    use super::by_digest;

    #[test]
    fn a_reference_by_tag_becomes_one_by_digest() {
        let d = "sha256:abc";
        for (image, expected) in [
            (
                "127.0.0.1:5000/test/busybox:1",
                "127.0.0.1:5000/test/busybox@sha256:abc",
            ),
            (
                "127.0.0.1:5000/test/busybox",
                "127.0.0.1:5000/test/busybox@sha256:abc",
            ),
            ("host/team/py@sha256:old", "host/team/py@sha256:abc"),
            ("busybox:1", "busybox@sha256:abc"),
        ] {
            assert_eq!(by_digest(image, d), expected, "{image}");
        }
    }
}
