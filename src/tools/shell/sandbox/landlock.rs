//! The Landlock ruleset that confines a session's spawner (and so every shell it forks), built
//! in the daemon before the fork and applied once, in the spawner between fork and exec.
//!
//! Rules: everything readable and executable except the daemon's data directory (the
//! database, other sessions' workspaces and temporary directories): the read rights are
//! granted *around* it ([`readable_around`]: every entry of `/` but the one leading to it, and
//! so on down to it), not on `/` as a whole, since a Landlock rule cannot take away what a
//! rule on a parent granted. Entries created later beside that path (a new directory in
//! `/tmp` when the data directory is under `/tmp`) are not readable. Every right on
//! the workspace, on the session's temporary directory (the shell's `TMPDIR`) and on the
//! character devices a shell writes to by habit (`/dev/null`, `/dev/zero`, `/dev/full`);
//! nothing else is writable, `/tmp` included. With the network off and ABI ≥ 4, TCP `bind`
//! and `connect` are handled with no port allowed, so both fail on every address, loopback
//! included; UDP, raw and Unix sockets are not covered by Landlock's network rights (ABI ≥ 6
//! also scopes abstract Unix sockets to the sandbox). Signals are scoped (ABI ≥ 6): the shell
//! cannot signal processes outside its own domain, the daemon included.
//!
//! Building the ruleset opens files and allocates, so it happens in the parent; the child
//! only makes two system calls (`prctl(PR_SET_NO_NEW_PRIVS)` and `landlock_restrict_self` on
//! the inherited descriptor), both async-signal-safe. The descriptor is close-on-exec, so the
//! confined program never sees it.

use std::os::fd::{OwnedFd, RawFd};
use std::path::{Path, PathBuf};

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

/// Devices a shell writes to without meaning to write anywhere.
pub(super) const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// The paths to grant read rights on so that everything but `hidden` is readable: `/` when
/// nothing is hidden; otherwise, for each directory from `/` down to `hidden`'s parent, each
/// of its entries except the one on the way to `hidden`.
pub(crate) fn readable_around(hidden: Option<&Path>) -> Vec<PathBuf> {
    let Some(hidden) = hidden.filter(|h| h.is_absolute() && h.parent().is_some()) else {
        return vec![PathBuf::from("/")];
    };
    let mut readable = Vec::new();
    let mut directory = PathBuf::from("/");
    for component in hidden.components().skip(1) {
        let next = directory.join(component);
        if let Ok(entries) = std::fs::read_dir(&directory) {
            readable.extend(
                entries
                    .filter_map(Result::ok)
                    .map(|entry| entry.path())
                    .filter(|path| *path != next),
            );
        }
        directory = next;
    }
    readable
}

/// Builds the ruleset for a shell that may read `readable` and write `writable` (the
/// workspace and the session's temporary directory); returns the ruleset's descriptor for
/// [`restrict_self`].
pub(crate) fn ruleset(
    abi: i32,
    readable: &[PathBuf],
    writable: &[&Path],
    network: bool,
) -> Result<OwnedFd, String> {
    let abi = ABI::from(abi);
    let fail = |err: landlock::RulesetError| format!("building the landlock ruleset: {err}");
    let mut ruleset = Ruleset::default()
        // Every right this ABI knows is handled, so nothing is left unrestricted by accident;
        // the workspace must be confinable, so a partial ruleset is an error, not a shrug.
        .set_compatibility(CompatLevel::HardRequirement)
        .handle_access(AccessFs::from_all(abi))
        .map_err(fail)?;
    ruleset = ruleset.set_compatibility(CompatLevel::BestEffort);
    if !network && abi >= ABI::V4 {
        ruleset = ruleset
            .handle_access(AccessNet::from_all(abi))
            .map_err(fail)?;
    }
    if abi >= ABI::V6 {
        let scopes = if network {
            Scope::Signal.into()
        } else {
            Scope::from_all(abi)
        };
        ruleset = ruleset.scope(scopes).map_err(fail)?;
    }
    let created = ruleset
        .create()
        .map_err(fail)?
        .add_rules(path_beneath_rules(readable, AccessFs::from_read(abi)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(writable, AccessFs::from_all(abi)))
        .map_err(fail)?
        .add_rules(path_beneath_rules(
            WRITABLE_DEVICES,
            AccessFs::from_all(abi),
        ))
        .map_err(fail)?;
    let fd: Option<OwnedFd> = created.into();
    fd.ok_or_else(|| "the kernel did not create a landlock ruleset".to_owned())
}

/// In the child, between fork and exec: no new privileges, then the ruleset. Only
/// async-signal-safe system calls; no allocation.
pub(crate) fn restrict_self(ruleset: RawFd) -> std::io::Result<()> {
    // SAFETY: prctl and the landlock syscall take integers only; both are async-signal-safe.
    unsafe {
        if libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0 {
            return Err(std::io::Error::last_os_error());
        }
        if libc::syscall(libc::SYS_landlock_restrict_self, ruleset, 0_u32) != 0 {
            return Err(std::io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn read_rights_go_around_the_hidden_directory() {
        let root = tempfile::tempdir().unwrap();
        let data = root.path().join("data");
        std::fs::create_dir_all(data.join("workspaces")).unwrap();
        std::fs::create_dir(root.path().join("beside")).unwrap();
        let readable = readable_around(Some(&data));
        assert!(
            readable.contains(&root.path().join("beside")),
            "{readable:?}"
        );
        assert!(
            readable
                .iter()
                .all(|p| !data.starts_with(p) && !p.starts_with(&data)),
            "{readable:?}"
        );
        assert!(readable.contains(&PathBuf::from("/usr")));
        assert_eq!(readable_around(None), vec![PathBuf::from("/")]);
    }
}
