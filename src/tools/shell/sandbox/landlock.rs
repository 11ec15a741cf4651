//! The Landlock ruleset that confines one shell, built in the daemon before the fork and
//! applied in the child between fork and exec.
//!
//! Rules: everything readable and executable (`/` with the ABI's read rights); every right on
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
use std::path::Path;

use landlock::{
    ABI, Access, AccessFs, AccessNet, CompatLevel, Compatible, Ruleset, RulesetAttr,
    RulesetCreatedAttr, Scope, path_beneath_rules,
};

/// Devices a shell writes to without meaning to write anywhere.
const WRITABLE_DEVICES: [&str; 3] = ["/dev/null", "/dev/zero", "/dev/full"];

/// Builds the ruleset for a shell confined to `writable` (the workspace and the session's
/// temporary directory); returns the ruleset's descriptor for [`restrict_self`].
pub(crate) fn ruleset(abi: i32, writable: &[&Path], network: bool) -> Result<OwnedFd, String> {
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
        .add_rules(path_beneath_rules(["/"], AccessFs::from_read(abi)))
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
