//! Where the daemon's calls run, set up at start: the shell's sandbox (probed and tried,
//! [`sandbox`]), the environments' tiers and image cache ([`environments`]: `auto` is
//! bubblewrap where it works, else the landlock tier; gVisor only when asked), the private
//! mount namespace sessions' views live in, and where views and snapshots are kept.

use std::path::Path;

use super::ServerError;
use crate::config::Settings;
use crate::environment::{ImageCache, Isolation, Limits};
use crate::service::Environments;
use crate::tools::{SandboxCapability, SandboxKind, ShellSandbox};

/// Enters a mount namespace of the daemon's own, for sessions' views (see
/// `workspace::view::private_mount_namespace`); call it before any thread starts.
pub fn enter_private_mounts() -> bool {
    crate::workspace::view::private_mount_namespace()
}

/// Where views and snapshots live and what an upload may hold. A snapshot's layers go beside
/// the allowed root its session's workspace lies under (which a fleet's daemons share), else
/// under the data directory (docs/decisions/workspace.md).
pub(super) fn workspace_settings(
    settings: &Settings,
    data_dir: &Path,
) -> crate::workspace::WorkspaceSettings {
    crate::workspace::WorkspaceSettings {
        data_dir: data_dir.to_path_buf(),
        snapshot_root: data_dir.join("snapshots"),
        allowed_roots: settings.server.allowed_roots.clone(),
        max_upload_bytes: settings.environments.max_upload_mb.saturating_mul(1 << 20),
        max_upload_entries: settings.environments.max_upload_entries,
        snapshots_per_principal: settings.limits.snapshots_per_principal,
        snapshot_bytes_per_principal: settings.limits.snapshot_bytes_per_principal,
    }
}

/// `[environments]` and what this daemon's sandbox can run: `auto` is bubblewrap where the
/// shell's sandbox is bubblewrap, else Landlock; `gvisor` when `runsc` is on the PATH.
pub(super) fn environments(
    settings: &Settings,
    data_dir: &Path,
    sandbox: &ShellSandbox,
) -> Result<Environments, ServerError> {
    let section = &settings.environments;
    let registries = section.registries().map_err(ServerError::Environments)?;
    Limits::default()
        .resolve(&section.default_limits, &section.max_limits)
        .map_err(|err| ServerError::Environments(format!("default_limits: {err}")))?;
    let images = data_dir.join("images");
    let cache = ImageCache::open(&images, registries).map_err(|source| ServerError::DataDir {
        path: images,
        source,
    })?;
    // `auto` is bubblewrap where it works, else the landlock tier; gVisor only when asked
    // for (docs/decisions/environments.md).
    let mut available = match sandbox.kind() {
        SandboxKind::Bubblewrap => vec![Isolation::Bwrap],
        _ => Vec::new(),
    };
    if sandbox.environment_landlock().is_ok() {
        available.push(Isolation::Landlock);
    }
    if sandbox.gvisor_available() {
        available.push(Isolation::Gvisor);
    }
    let auto = available
        .iter()
        .copied()
        .find(|tier| *tier != Isolation::Gvisor)
        .unwrap_or(Isolation::Bwrap);
    Ok(Environments {
        cache: Some(cache),
        default_isolation: section.default_isolation,
        auto_isolation: auto,
        available,
        default_limits: section.default_limits,
        max_limits: section.max_limits,
    })
}

/// Probes what this machine can confine a shell with, tries each candidate `[sandbox] mode`
/// allows (a real spawner running one command), logs what was passed over and why, and
/// returns the sandbox taken.
pub(super) async fn sandbox(settings: &Settings, data_dir: &Path) -> ShellSandbox {
    let capability = SandboxCapability::probe();
    let bwrap = match &capability.bubblewrap {
        Ok(()) => "available".to_owned(),
        Err(why) => why.clone(),
    };
    let landlock = match &capability.landlock_abi {
        Ok(abi) => format!("ABI {abi}"),
        Err(why) => why.clone(),
    };
    let ((sandbox, passed_over), gvisor) = tokio::join!(
        ShellSandbox::start(&settings.sandbox, &capability, data_dir),
        ShellSandbox::probe_gvisor(data_dir)
    );
    if let Err(why) = &gvisor {
        tracing::info!("gvisor not available for environments: {why}");
    }
    let sandbox = sandbox
        .with_gvisor(gvisor.ok())
        .with_environment_landlock(&capability);
    if let Err(why) = sandbox.environment_landlock() {
        tracing::info!("the landlock tier is not available for environments: {why}");
    }
    let next = match sandbox.kind() {
        SandboxKind::None => "no sandbox is left to fall back to".to_owned(),
        kind => format!("falling back to {}", kind.as_str()),
    };
    for why in &passed_over {
        tracing::warn!(
            mode = ?settings.sandbox.mode,
            "sandbox passed over, it cannot run bash here ({why}); {next}"
        );
    }
    tracing::info!(
        bubblewrap = %bwrap,
        landlock = %landlock,
        mode = ?settings.sandbox.mode,
        "sandbox capability: {}",
        sandbox.describe()
    );
    if !sandbox.confines() {
        tracing::warn!("{}", sandbox.describe());
    }
    sandbox
}
