//! An environment's `landlock` tier (DESIGN §12): for a daemon where bubblewrap cannot make
//! its namespaces (a container without user namespaces), the session's spawner runs on the
//! host, unconfined, and each command it forks enters the environment's root (`chroot`), gives
//! up every capability, and is confined by a Landlock ruleset: read and execute beneath the
//! root, write beneath the workspace, the root's `/tmp` and its `/dev/null`, `/dev/zero` and
//! `/dev/full` (beneath the whole root for a `danger_full_access` session), nothing outside.
//! The spawner builds the ruleset (`spawner::server`, `--chroot`); this module decides what it
//! says and prepares the root for it.
//!
//! Why each piece: `chroot` gives the commands the environment's paths (`/workspace`, the
//! image's `/bin/sh`) without a mount namespace; it is not a boundary by itself (a process
//! with `CAP_SYS_CHROOT` can climb out of one), so the capabilities go (bounding set, ambient,
//! effective, permitted; no-new-privs so an exec as uid 0 gains none back) and Landlock, whose
//! rules hold on the inodes whatever the process's root, is the boundary: a climb out reaches
//! nothing readable. Landlock also forbids mounting and ptrace of processes outside the
//! domain, and (ABI ≥ 6) signals to them, the daemon included.
//!
//! What it lacks beside `bwrap`: no `/proc` inside (mounting one needs the namespaces this
//! tier exists to do without), so `ps` and `/proc/self` do not work; `/tmp` is the root's own
//! directory (kept in the session's layer, not a fresh tmpfs); with `network = "none"` TCP
//! `bind` and `connect` are refused on every address (loopback too: it is the host's; UDP is
//! not covered by Landlock); device nodes the image lacks (`/dev/null`, `/dev/zero`,
//! `/dev/full`, `/dev/random`, `/dev/urandom`) are made in the session's root when the daemon
//! may (`CAP_MKNOD`), else a warning says which. Needs `CAP_SYS_CHROOT` (root, or a default
//! Docker container), probed at start ([`may_chroot`]).

use std::ffi::OsString;
use std::io;
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::path::{Path, PathBuf};

use crate::tool::EnvironmentView;

/// `CAP_SYS_CHROOT`'s bit in a capability set.
const CAP_SYS_CHROOT: u32 = 18;

/// The device nodes a shell expects, `(name, major, minor)`.
const DEVICES: [(&str, u32, u32); 5] = [
    ("null", 1, 3),
    ("zero", 1, 5),
    ("full", 1, 7),
    ("random", 1, 8),
    ("urandom", 1, 9),
];

/// Whether this process may `chroot` (its effective set has `CAP_SYS_CHROOT`).
pub(super) fn may_chroot() -> Result<(), String> {
    let status = std::fs::read_to_string("/proc/self/status")
        .map_err(|err| format!("cannot read /proc/self/status: {err}"))?;
    let effective = status
        .lines()
        .find_map(|line| line.strip_prefix("CapEff:"))
        .and_then(|hex| u64::from_str_radix(hex.trim(), 16).ok())
        .ok_or("/proc/self/status has no CapEff")?;
    if effective & (1 << CAP_SYS_CHROOT) == 0 {
        return Err("the daemon lacks CAP_SYS_CHROOT".into());
    }
    Ok(())
}

/// The spawner's flags for `environment` (`network`: `network = "host"`), once its root has
/// the `/tmp` and `/dev` entries commands expect.
pub(super) fn spawner_args(
    environment: &EnvironmentView,
    network: bool,
) -> io::Result<Vec<OsString>> {
    let root = &environment.root;
    prepare_root(root)?;
    let mut args: Vec<OsString> = vec!["--chroot".into(), root.clone().into()];
    let writable: Vec<PathBuf> = if environment.writable_root {
        vec![root.clone()]
    } else {
        let workdir = environment.to_host(&environment.workdir).ok_or_else(|| {
            io::Error::other(format!(
                "the workdir \"{}\" climbs out of the environment",
                environment.workdir.display()
            ))
        })?;
        // The devices a shell writes to by habit, the environment's own.
        let devices = super::landlock::WRITABLE_DEVICES
            .iter()
            .map(|device| root.join(device.trim_start_matches('/')))
            .filter(|path| path.exists());
        [workdir, root.join("tmp")]
            .into_iter()
            .chain(devices)
            .collect()
    };
    for path in writable {
        args.extend(["--landlock-write".into(), path.into()]);
    }
    if network {
        args.push("--landlock-network".into());
    }
    Ok(args)
}

/// Makes `root/tmp` (mode 1777) and the [`DEVICES`] the image lacks, in the session's own
/// layer. A device that cannot be made is a warning, not a failure (a shell runs without it).
fn prepare_root(root: &Path) -> io::Result<()> {
    let tmp = root.join("tmp");
    if !tmp.is_dir() {
        std::fs::create_dir_all(&tmp)?;
        std::fs::set_permissions(&tmp, std::fs::Permissions::from_mode(0o1777))?;
    }
    let dev = root.join("dev");
    std::fs::create_dir_all(&dev)?;
    for (name, major, minor) in DEVICES {
        let path = dev.join(name);
        if std::fs::symlink_metadata(&path).is_ok_and(|m| m.file_type().is_char_device()) {
            continue;
        }
        let _ = std::fs::remove_file(&path);
        let c_path = std::ffi::CString::new(path.as_os_str().as_encoded_bytes())
            .map_err(io::Error::other)?;
        // SAFETY: mknod and chmod on a NUL-terminated path that lives through the calls.
        let made = unsafe {
            libc::mknod(
                c_path.as_ptr(),
                libc::S_IFCHR | 0o666,
                libc::makedev(major, minor),
            ) == 0
                && libc::chmod(c_path.as_ptr(), 0o666) == 0
        };
        if !made {
            tracing::warn!(
                device = %path.display(),
                error = %io::Error::last_os_error(),
                "cannot make a device node in the environment's root (landlock tier); its commands run without it"
            );
        }
    }
    Ok(())
}
