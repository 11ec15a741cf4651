//! The bubblewrap command line that confines one shell.
//!
//! The whole filesystem read-only (`--ro-bind / /`), a fresh `/dev` and `/proc`, a private
//! `/tmp` (tmpfs, `TMPDIR=/tmp`), the daemon's data directory hidden behind an empty tmpfs
//! (it holds the database and other sessions' workspaces; remounted read-only after the
//! workspace is bound into it), then the workspace bound writable
//! at its own path, so paths inside and outside the sandbox agree (`pwd -P` reports the same
//! directory). The spawner's own binary (the running toold) is bound read-only at its own path
//! last: it may live where the sandbox shows something else (under `/tmp`, which the tmpfs
//! hides, or under the hidden data directory), and bubblewrap execs it from inside. Every namespace is unshared (`--unshare-all`: user, ipc, pid, net, uts, cgroup),
//! the network given back only with `--share-net`; all capabilities are dropped, so even root
//! inside cannot remount; `--die-with-parent` takes the sandbox down when the shell's bwrap
//! is killed. No `--new-session`: the shell must stay in the process group toold stops (stdin
//! is /dev/null and the group has no terminal, so TIOCSTI has nothing to reach).

use std::ffi::OsString;
use std::path::Path;

/// Arguments for `bwrap` up to and including `--`; the shell's own command line follows.
/// `program`, when given, is the binary bubblewrap runs inside (the spawner): bound read-only
/// at its own path unless the workspace holds it already.
pub(crate) fn arguments(
    workspace: &Path,
    cwd: &Path,
    hidden: Option<&Path>,
    network: bool,
    program: Option<&Path>,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = [
        "--die-with-parent",
        "--unshare-all",
        "--cap-drop",
        "ALL",
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--setenv",
        "TMPDIR",
        "/tmp",
    ]
    .iter()
    .map(OsString::from)
    .collect();
    if network {
        args.push("--share-net".into());
    }
    // A hidden directory that contains the workspace is fine (the workspace is bound back
    // into the empty tmpfs); one inside the workspace (or the workspace itself) is not hidden,
    // since that would hide part of the workspace.
    let hidden = hidden.filter(|h| !h.starts_with(workspace));
    if let Some(hidden) = hidden {
        args.extend(["--tmpfs".into(), hidden.as_os_str().to_owned()]);
    }
    args.extend([
        "--bind".into(),
        workspace.as_os_str().to_owned(),
        workspace.as_os_str().to_owned(),
    ]);
    // Bound before the hidden directory is made read-only, since bubblewrap creates the mount
    // point (and its parents) in whatever tmpfs covers it.
    if let Some(program) = program.filter(|p| !p.starts_with(workspace)) {
        args.extend([
            "--ro-bind".into(),
            program.as_os_str().to_owned(),
            program.as_os_str().to_owned(),
        ]);
    }
    // The empty tmpfs becomes read-only once the workspace is bound into it, so the
    // workspace's hidden parents take no writes either (the bound workspace stays writable).
    if let Some(hidden) = hidden {
        args.extend(["--remount-ro".into(), hidden.as_os_str().to_owned()]);
    }
    args.extend(["--chdir".into(), cwd.as_os_str().to_owned(), "--".into()]);
    args
}

/// Where the host's loader, libraries and the spawner binary appear inside an environment.
pub(crate) const HOST_DIR: &str = "/.toold";
/// The host's dynamic loader and its libraries (Debian's multiarch layout): the spawner is
/// the daemon's own binary, linked against the host's libc, while the image may have none.
pub(super) const HOST_LOADER: &str = "/lib64/ld-linux-x86-64.so.2";
pub(super) const HOST_LIBRARIES: &str = "/lib/x86_64-linux-gnu";

/// Arguments for `bwrap` in an environment (DESIGN §12): its copy-on-write `root` as `/`
/// (writable: what the session may write is the permission check's and `danger_full_access`'s
/// business, and the root is the session's own), fresh `/dev`, `/proc` and `/tmp`, the
/// spawner and what it needs to run bound read-only under [`HOST_DIR`], started in `workdir`.
/// Ends with the spawner's command line (the host's loader running the bound binary).
pub(crate) fn environment_arguments(
    root: &Path,
    workdir: &Path,
    writable_root: bool,
    network: bool,
    program: &Path,
) -> Vec<OsString> {
    let mut args: Vec<OsString> = ["--die-with-parent", "--unshare-all", "--cap-drop", "ALL"]
        .iter()
        .map(OsString::from)
        .collect();
    if network {
        args.push("--share-net".into());
    }
    let host = Path::new(HOST_DIR);
    let bind = if writable_root { "--bind" } else { "--ro-bind" };
    args.extend([bind.into(), root.as_os_str().to_owned(), "/".into()]);
    if !writable_root {
        // Only the workspace takes writes (and /tmp, a tmpfs of the sandbox's own).
        let inside = workdir.strip_prefix("/").unwrap_or(workdir);
        args.extend([
            "--bind".into(),
            root.join(inside).into_os_string(),
            workdir.as_os_str().to_owned(),
        ]);
    }
    args.extend([
        "--dev".into(),
        "/dev".into(),
        "--proc".into(),
        "/proc".into(),
        "--tmpfs".into(),
        "/tmp".into(),
        "--ro-bind".into(),
        HOST_LIBRARIES.into(),
        host.join("lib").into(),
        "--ro-bind".into(),
        HOST_LOADER.into(),
        host.join("ld.so").into(),
        "--ro-bind".into(),
        program.as_os_str().to_owned(),
        host.join("toold").into(),
        "--chdir".into(),
        workdir.as_os_str().to_owned(),
        "--".into(),
        host.join("ld.so").into(),
        "--library-path".into(),
        host.join("lib").into(),
        host.join("toold").into(),
    ]);
    args
}

#[cfg(test)]
mod tests {
    use super::*;

    fn text(args: &[OsString]) -> String {
        args.iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect::<Vec<_>>()
            .join(" ")
    }

    #[test]
    fn the_workspace_is_bound_after_the_data_directory_is_hidden() {
        let args = text(&arguments(
            Path::new("/data/workspaces/ws"),
            Path::new("/data/workspaces/ws/sub"),
            Some(Path::new("/data")),
            false,
            None,
        ));
        let hidden = args.find("--tmpfs /data").unwrap();
        let bound = args
            .find("--bind /data/workspaces/ws /data/workspaces/ws")
            .unwrap();
        assert!(hidden < bound, "{args}");
        assert!(args.contains("--chdir /data/workspaces/ws/sub"));
        assert!(!args.contains("--share-net"));
        assert!(args.ends_with("--"));
    }

    #[test]
    fn a_data_directory_inside_the_workspace_is_not_hidden_and_network_is_shared_when_allowed() {
        let args = text(&arguments(
            Path::new("/srv"),
            Path::new("/srv"),
            Some(Path::new("/srv/toold-data")),
            true,
            None,
        ));
        assert!(!args.contains("--tmpfs /srv"), "{args}");
        assert!(args.contains("--share-net"));
    }

    #[test]
    fn the_spawner_binary_is_bound_after_the_tmpfs_that_would_hide_it() {
        let args = text(&arguments(
            Path::new("/data/workspaces/ws"),
            Path::new("/data/workspaces/ws"),
            Some(Path::new("/data")),
            false,
            Some(Path::new("/tmp/build/toold")),
        ));
        let tmp = args.find("--tmpfs /tmp").unwrap();
        let bound = args
            .find("--ro-bind /tmp/build/toold /tmp/build/toold")
            .unwrap();
        let read_only = args.find("--remount-ro /data").unwrap();
        assert!(tmp < bound && bound < read_only, "{args}");
        let inside = text(&arguments(
            Path::new("/srv/ws"),
            Path::new("/srv/ws"),
            None,
            false,
            Some(Path::new("/srv/ws/bin/toold")),
        ));
        assert!(!inside.contains("/srv/ws/bin/toold"), "{inside}");
    }
}
