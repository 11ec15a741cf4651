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
//! (which would make the sparse file dense). `mkfs` runs once per size: a formatted empty
//! image is kept in `<data_dir>/environments/.disk-templates/ext4-<mb>mb.img`, and a session's
//! image is a sparse copy of it (its data extents only, a few MiB for 8 GiB; about 5 ms
//! against 12 ms for `mkfs`, on the session's creation path). Every copy has the template's
//! filesystem UUID, which ext4 does not mind. Both are made under a temporary name and renamed
//! once complete, so a crash mid-way leaves nothing that is taken for a disk. It is
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
        let templates = private_dir
            .parent()
            .and_then(Path::parent)
            .map_or_else(|| private_dir.join(TEMPLATES), |dir| dir.join(TEMPLATES));
        copy_sparse(&template(&templates, mb)?, &fresh).inspect_err(|_| {
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

/// Where formatted empty images are kept, one per size, beside the sessions' directories.
const TEMPLATES: &str = ".disk-templates";

/// The formatted empty image of `mb` MiB under `templates`, made the first time a size is
/// asked for (under a unique name, renamed into place: racing makers both succeed).
fn template(templates: &Path, mb: u64) -> io::Result<PathBuf> {
    let template = templates.join(format!("ext4-{mb}mb.img"));
    if template.exists() {
        return Ok(template);
    }
    std::fs::create_dir_all(templates)?;
    let fresh = templates.join(format!(".{}.tmp", uuid::Uuid::now_v7().simple()));
    let file = std::fs::File::create(&fresh)?;
    file.set_len(mb << 20)?;
    drop(file);
    run(Command::new("mkfs.ext4")
        .args(["-q", "-F", "-m", "0", "-O", "^has_journal"])
        .args(["-E", "lazy_itable_init=1,nodiscard"])
        .arg(&fresh))
    .and_then(|()| std::fs::rename(&fresh, &template))
    .inspect_err(|_| {
        let _ = std::fs::remove_file(&fresh);
    })?;
    Ok(template)
}

/// Copies `from` to `to` as sparse as it is: only its data extents (`SEEK_DATA`/`SEEK_HOLE`),
/// the holes left holes. A formatted empty image of 8 GiB holds a few MiB of data.
fn copy_sparse(from: &Path, to: &Path) -> io::Result<()> {
    use std::io::{Read, Seek, SeekFrom};
    use std::os::fd::AsRawFd;
    let mut source = std::fs::File::open(from)?;
    let mut target = std::fs::File::create(to)?;
    let size = source.metadata()?.len();
    target.set_len(size)?;
    let mut offset: u64 = 0;
    while offset < size {
        // SAFETY: lseek on a descriptor this function owns.
        let data = unsafe { libc::lseek(source.as_raw_fd(), offset as i64, libc::SEEK_DATA) };
        if data < 0 {
            let err = io::Error::last_os_error();
            // ENXIO: no data past `offset`.
            if err.raw_os_error() == Some(libc::ENXIO) {
                break;
            }
            return Err(err);
        }
        // SAFETY: as above.
        let hole = unsafe { libc::lseek(source.as_raw_fd(), data, libc::SEEK_HOLE) };
        if hole < 0 {
            return Err(io::Error::last_os_error());
        }
        let (data, hole) = (data as u64, hole as u64);
        source.seek(SeekFrom::Start(data))?;
        target.seek(SeekFrom::Start(data))?;
        io::copy(&mut (&mut source).take(hole - data), &mut target)?;
        offset = hole;
    }
    Ok(())
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

#[cfg(test)]
mod tests {
    use std::io::{Seek, SeekFrom, Write};
    use std::os::unix::fs::MetadataExt;

    #[test]
    fn a_sparse_copy_has_the_same_bytes_and_keeps_the_holes() {
        let dir = tempfile::tempdir().unwrap();
        let from = dir.path().join("from.img");
        let to = dir.path().join("to.img");
        let mut file = std::fs::File::create(&from).unwrap();
        file.set_len(64 << 20).unwrap();
        file.write_all(&[7; 4096]).unwrap();
        file.seek(SeekFrom::Start(32 << 20)).unwrap();
        file.write_all(&[9; 8192]).unwrap();
        drop(file);
        super::copy_sparse(&from, &to).unwrap();
        assert_eq!(std::fs::read(&from).unwrap(), std::fs::read(&to).unwrap());
        // 12 KiB of data, not 64 MiB (512-byte blocks; a filesystem may round up a little).
        let blocks = std::fs::metadata(&to).unwrap().blocks();
        assert!(blocks * 512 < 1 << 20, "{blocks} blocks");
    }
}
