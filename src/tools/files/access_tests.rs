//! Unit tests of `access`: the kernel-enforced boundary (both `openat2` and the fallback walk),
//! the window between resolution and `open`, and atomic writes.

use std::os::unix::fs::{PermissionsExt, symlink};

use super::*;
use crate::session::{SessionConfig, SessionState};

struct Fixture {
    _dir: tempfile::TempDir,
    workspace: PathBuf,
    outside: PathBuf,
}

/// A workspace with `sub/file.txt`, and an outside directory with `file.txt` and `secret`.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let workspace = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(workspace.join("sub/file.txt"), "inside\n").unwrap();
    std::fs::write(outside.join("file.txt"), "outside\n").unwrap();
    std::fs::write(outside.join("secret"), "secret\n").unwrap();
    Fixture {
        _dir: dir,
        workspace,
        outside,
    }
}

fn read(location: &Location) -> io::Result<String> {
    let mut text = String::new();
    io::Read::read_to_string(&mut location.open_read()?, &mut text)?;
    Ok(text)
}

fn root_fd(path: &Path) -> OwnedFd {
    File::open(path).unwrap().into()
}

#[test]
fn both_ways_of_opening_beneath_refuse_an_escape() {
    let fx = fixture();
    symlink(&fx.outside, fx.workspace.join("escape")).unwrap();
    symlink("sub", fx.workspace.join("inner")).unwrap();
    let root = root_fd(&fx.workspace);
    let flags = libc::O_RDONLY | libc::O_CLOEXEC;
    for (name, open) in [
        (
            "openat2",
            openat2_beneath as fn(BorrowedFd<'_>, &Path, i32, u32) -> io::Result<OwnedFd>,
        ),
        ("walk", walk_beneath),
    ] {
        assert!(
            open(root.as_fd(), Path::new("sub/file.txt"), flags, 0).is_ok(),
            "{name}"
        );
        for escape in [
            "escape/secret",
            "../outside/secret",
            "sub/../../outside/secret",
        ] {
            let err = open(root.as_fd(), Path::new(escape), flags, 0).unwrap_err();
            assert!(
                matches!(
                    err.raw_os_error(),
                    Some(libc::EXDEV | libc::ELOOP | libc::ENOTDIR)
                ),
                "{name} {escape}: {err}"
            );
        }
    }
    // A symlink that stays inside is fine for openat2 and refused by the stricter walk.
    assert!(openat2_beneath(root.as_fd(), Path::new("inner/file.txt"), flags, 0).is_ok());
    assert!(walk_beneath(root.as_fd(), Path::new("inner/file.txt"), flags, 0).is_err());
}

#[test]
fn a_directory_swapped_for_a_symlink_after_resolution_is_refused() {
    let fx = fixture();
    let target = fx.workspace.join("sub/file.txt");
    let location = Location::beneath(target, fx.workspace.clone()).unwrap();
    assert_eq!(read(&location).unwrap(), "inside\n");
    // The swap happens after the path was resolved and judged inside.
    std::fs::rename(fx.workspace.join("sub"), fx.workspace.join("sub.old")).unwrap();
    symlink(&fx.outside, fx.workspace.join("sub")).unwrap();
    let err = read(&location).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EXDEV), "{err}");
    let err = location.write_atomic(b"pwned\n", None, true).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::EXDEV), "{err}");
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("file.txt")).unwrap(),
        "outside\n"
    );
    let leftovers: Vec<_> = std::fs::read_dir(&fx.outside).unwrap().collect();
    assert_eq!(leftovers.len(), 2, "no temporary file outside");
    // Authorised for anything, the same path follows the link.
    let anywhere = Location::anywhere(fx.workspace.join("sub/file.txt"));
    assert_eq!(read(&anywhere).unwrap(), "outside\n");
}

#[test]
fn only_a_path_written_as_it_is_opens_without_resolution() {
    let fx = fixture();
    symlink(&fx.outside, fx.workspace.join("escape")).unwrap();
    symlink("sub", fx.workspace.join("inner")).unwrap();
    symlink("file.txt", fx.workspace.join("sub/link.txt")).unwrap();
    let context = |workspace: &Path| {
        let session = SessionState::new(SessionConfig::new("s", workspace));
        ToolContext::detached(std::sync::Arc::new(session))
    };
    let ctx = context(&fx.workspace);
    let open = |ctx: &ToolContext, raw: &str| {
        Location::open_read_as_written(&serde_json::json!({ "file_path": raw }), "file_path", ctx)
    };
    let file = fx.workspace.join("sub/file.txt");
    for raw in ["sub/file.txt", "./sub//file.txt", file.to_str().unwrap()] {
        let (location, mut opened) = open(&ctx, raw).expect(raw);
        assert_eq!(location.path, file, "{raw}");
        let mut text = String::new();
        io::Read::read_to_string(&mut opened, &mut text).unwrap();
        assert_eq!(text, "inside\n", "{raw}");
    }
    // Symlinks (inside or out), `..`, a missing file, the root, a path outside: the general way.
    let secret = fx.outside.join("secret");
    for raw in [
        "inner/file.txt",
        "sub/link.txt",
        "escape/secret",
        "../outside/secret",
        "sub/../sub/file.txt",
        "sub/missing.txt",
        ".",
        secret.to_str().unwrap(),
    ] {
        assert!(open(&ctx, raw).is_none(), "{raw}");
    }
    // So is a workspace configured through a symlink.
    let linked = fx.workspace.with_file_name("ws_link");
    symlink(&fx.workspace, &linked).unwrap();
    assert!(open(&context(&linked), "sub/file.txt").is_none());
}

#[test]
fn atomic_writes_keep_permissions_create_parents_and_leave_nothing_behind() {
    let fx = fixture();
    let path = fx.workspace.join("sub/file.txt");
    std::fs::set_permissions(&path, Permissions::from_mode(0o640)).unwrap();
    let keep = Keep::of(&std::fs::metadata(&path).unwrap());
    let location = Location::beneath(path.clone(), fx.workspace.clone()).unwrap();
    let metadata = location.write_atomic(b"new\n", Some(keep), false).unwrap();
    assert_eq!(metadata.len(), 4);
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "new\n");
    assert_eq!(std::fs::metadata(&path).unwrap().mode() & 0o7777, 0o640);

    let deep = fx.workspace.join("a/b/c/new.txt");
    let location = Location::beneath(deep.clone(), fx.workspace.clone()).unwrap();
    let err = location.write_atomic(b"x", None, false).unwrap_err();
    assert_eq!(err.raw_os_error(), Some(libc::ENOENT));
    location.write_atomic(b"x", None, true).unwrap();
    assert_eq!(std::fs::read_to_string(&deep).unwrap(), "x");

    // The target name replaced by a directory: the rename fails and the temporary goes.
    std::fs::create_dir(fx.workspace.join("sub/dir")).unwrap();
    std::fs::write(fx.workspace.join("sub/dir/keep"), "").unwrap();
    let location = Location::beneath(fx.workspace.join("sub/dir"), fx.workspace.clone()).unwrap();
    assert!(location.write_atomic(b"x", None, false).is_err());
    let names: Vec<String> = std::fs::read_dir(fx.workspace.join("sub"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    assert!(names.iter().all(|n| !n.contains("toold")), "{names:?}");
}

#[test]
fn a_symlink_planted_at_the_target_is_replaced_not_followed() {
    let fx = fixture();
    let path = fx.workspace.join("planted");
    let location = Location::beneath(path.clone(), fx.workspace.clone()).unwrap();
    symlink(fx.outside.join("file.txt"), &path).unwrap();
    location.write_atomic(b"mine\n", None, false).unwrap();
    assert!(!std::fs::symlink_metadata(&path).unwrap().is_symlink());
    assert_eq!(
        std::fs::read_to_string(fx.outside.join("file.txt")).unwrap(),
        "outside\n"
    );
}

#[test]
fn errors_say_what_happened() {
    let path = Path::new("/ws/f");
    let cases = [
        (libc::ENOENT, "does not exist", ErrorKindIs::Validation),
        (
            libc::EXDEV,
            "outside the workspace",
            ErrorKindIs::Validation,
        ),
        (libc::ELOOP, "symlink that changed", ErrorKindIs::Validation),
        (libc::EISDIR, "is a directory", ErrorKindIs::Validation),
        (libc::EACCES, "permission denied", ErrorKindIs::Execution),
        (libc::EIO, "cannot read", ErrorKindIs::Execution),
    ];
    for (errno, text, kind) in cases {
        let err = describe(&io::Error::from_raw_os_error(errno), path, "read");
        let matches_kind = match kind {
            ErrorKindIs::Validation => matches!(err, ToolError::Validation(_)),
            ErrorKindIs::Execution => matches!(err, ToolError::Execution(_)),
        };
        assert!(
            matches_kind && err.to_string().contains(text),
            "{errno}: {err}"
        );
    }
}

enum ErrorKindIs {
    Validation,
    Execution,
}

#[test]
fn cached_reads_return_the_whole_file_or_nothing() {
    let fx = fixture();
    let path = fx.workspace.join("sub/file.txt");
    let file = File::open(&path).unwrap();
    // Just written, so in the page cache (on filesystems offering RWF_NOWAIT).
    if let Some(bytes) = read_cached(&file, 7) {
        assert_eq!(bytes, b"inside\n");
    }
    assert_eq!(read_cached(&file, 3), None, "a file longer than expected");
    assert_eq!(read_cached(&file, 9), None, "a file shorter than expected");
}
