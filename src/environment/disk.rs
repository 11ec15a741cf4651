//! `disk_mb` (DESIGN §12): a bound on what a session may write that really bounds.
//!
//! The session's writable layer (the upper and work directories of its copy-on-write view,
//! `workspace::view`) lives on a filesystem of its own: a sparse file of `disk_mb` MiB beside
//! it (`<data_dir>/environments/<id>/disk.img`), formatted ext4 once and loop-mounted on the
//! view's private directory before the view is mounted (in the daemon's mount namespace, like
//! the view). A write past it fails inside with ENOSPC, from the kernel, whatever writes it
//! (bash, the file tools, an upload); the host's free space drops by what was written, at
//! most `disk_mb` and the filesystem's own metadata. Why not a quota or a watcher: project
//! quotas need the data directory's filesystem to have them enabled (ext4 `prjquota`, XFS),
//! and a watcher that sums sizes and kills after the fact lets a write overshoot; a loop
//! device needs only root and `mkfs.ext4`, which environments need anyway (the view's
//! overlay is mounted by the same privilege).
//!
//! Formatted with no reserved blocks and no journal (scratch space: a daemon restart keeps
//! the file, a host crash may lose a session's last writes, as the `volatile` overlay above it
//! may), mounted `noinit_itable` so the kernel does not zero the inode tables in the background
//! (which would make the sparse file dense). The image is made under a temporary name and
//! renamed once formatted, so a crash mid-`mkfs` leaves nothing that is taken for a disk. It is
//! mounted again on restore (the session's writes are kept) and detached and removed when the
//! session closes. Where it cannot be made (no loop device, not root, no `mkfs.ext4`), the
//! caller decides; see `service::environments`.

use std::io;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The disk image of the view whose private directory is `private_dir`.
pub fn image_path(private_dir: &Path) -> PathBuf {
    private_dir.with_file_name("disk.img")
}

/// Mounts a filesystem of `mb` MiB on `private_dir` (made if missing), formatting its image
/// first when there is none.
pub fn attach(private_dir: &Path, mb: u64) -> io::Result<()> {
    let image = image_path(private_dir);
    std::fs::create_dir_all(private_dir)?;
    if !image.exists() {
        let fresh = image.with_extension("img.tmp");
        let file = std::fs::File::create(&fresh)?;
        file.set_len(mb << 20)?;
        drop(file);
        run(Command::new("mkfs.ext4")
            .args(["-q", "-F", "-m", "0", "-O", "^has_journal"])
            .args(["-E", "lazy_itable_init=1,nodiscard"])
            .arg(&fresh))
        .inspect_err(|_| {
            let _ = std::fs::remove_file(&fresh);
        })?;
        std::fs::rename(&fresh, &image)?;
    }
    detach_mount(private_dir);
    run(Command::new("mount")
        .args(["-t", "ext4", "-o", "loop,noinit_itable,nosuid,nodev"])
        .arg(&image)
        .arg(private_dir))
}

/// Detaches the filesystem from `private_dir` (lazily: whoever is still inside keeps it until
/// they leave; the loop device goes with the last user) and removes its image.
pub fn remove(private_dir: &Path) {
    detach_mount(private_dir);
    let _ = std::fs::remove_file(image_path(private_dir));
}

fn detach_mount(dir: &Path) {
    use std::os::unix::ffi::OsStrExt;
    let Ok(path) = std::ffi::CString::new(dir.as_os_str().as_bytes()) else {
        return;
    };
    // SAFETY: a NUL-terminated path that outlives the call.
    while unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } == 0 {}
}

fn run(command: &mut Command) -> io::Result<()> {
    let output = command.output()?;
    if output.status.success() {
        return Ok(());
    }
    Err(io::Error::other(format!(
        "{:?} failed ({}): {}",
        command.get_program(),
        output.status,
        String::from_utf8_lossy(&output.stderr).trim()
    )))
}
