//! What this machine can confine a shell with: whether bubblewrap can create its namespaces
//! here, and which Landlock ABI the kernel offers.
//!
//! Both are probed once, at start: bubblewrap by running the same kind of sandbox the shell
//! gets (`bwrap … true`, so a missing binary, a kernel without user namespaces or a container
//! that forbids them all show as one failure with bwrap's own message), Landlock by asking the
//! kernel for its ABI version (`landlock_create_ruleset` with the version flag). Deliberately
//! absent: deciding which one to use (that is [`super::ShellSandbox::resolve`]).

use std::process::{Command, Stdio};

/// `LANDLOCK_CREATE_RULESET_VERSION`: ask for the ABI version instead of creating a ruleset.
const LANDLOCK_CREATE_RULESET_VERSION: libc::c_uint = 1;

/// Runs a minimal bubblewrap sandbox; `Err` carries why it cannot run here.
pub(crate) fn probe_bubblewrap(program: &str) -> Result<(), String> {
    let output = Command::new(program)
        .args(["--die-with-parent", "--unshare-all", "--cap-drop", "ALL"])
        .args(["--ro-bind", "/", "/", "--dev", "/dev", "--proc", "/proc"])
        .args(["--tmpfs", "/tmp", "--", "true"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .output()
        .map_err(|err| format!("cannot run \"{program}\": {err}"))?;
    if output.status.success() {
        return Ok(());
    }
    let stderr = String::from_utf8_lossy(&output.stderr);
    Err(format!(
        "\"{program}\" cannot create its sandbox here ({}): {}",
        output.status,
        stderr.trim()
    ))
}

/// The kernel's Landlock ABI version; `Err` with the reason when Landlock is unavailable
/// (not built in, not enabled among the LSMs, or a seccomp filter refusing the call).
pub(crate) fn landlock_abi() -> Result<i32, String> {
    // SAFETY: landlock_create_ruleset(NULL, 0, VERSION) reads no memory and returns a number.
    let version = unsafe {
        libc::syscall(
            libc::SYS_landlock_create_ruleset,
            std::ptr::null::<libc::c_void>(),
            0_usize,
            LANDLOCK_CREATE_RULESET_VERSION,
        )
    };
    if version < 1 {
        let err = std::io::Error::last_os_error();
        return Err(format!("the kernel offers no Landlock: {err}"));
    }
    i32::try_from(version).map_err(|_| format!("unexpected Landlock ABI version {version}"))
}
