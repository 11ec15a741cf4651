//! Environments (DESIGN §12) through the real daemon: images pulled from a real registry on
//! loopback (`support::registry`), the cache and its endpoints (and gRPC's `PullImage`),
//! sessions on an image (under bubblewrap and gVisor, and the escapes both keep out), the tier on
//! their audit rows, their limits and their network, and their snapshots and forks.

mod audit_isolation;
mod escapes;
mod grpc_pull;
mod gvisor;
mod images;
mod landlock;
mod limits;
mod network;
mod sessions;
mod snapshots;

use std::sync::Arc;

use crate::http::harness::Toold;
use crate::support::registry::{self, Registry};

/// A registry with the test image and a daemon configured for it; `None` (skipped outside
/// CI) when the fixture's programs are missing.
pub fn fixture(extra_settings: &str) -> Option<(Registry, Toold)> {
    if let Err(why) = registry::available() {
        crate::support::skip_unless_ci(&why);
        return None;
    }
    let registry = Registry::start();
    let toold = daemon_for(&registry, extra_settings);
    Some((registry, toold))
}

/// A daemon whose settings name `registry` (plain HTTP) plus `extra_settings`.
pub fn daemon_for(registry: &Registry, extra_settings: &str) -> Toold {
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, format!("{extra_settings}\n{}", registry.settings())).unwrap();
    let file = file.to_str().unwrap().to_owned();
    Toold::start_with(dir, &["--config", &file])
}
