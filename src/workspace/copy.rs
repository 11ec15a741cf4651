//! Copying directory trees, for when copy-on-write is not to be had: a view materialised on a
//! daemon that cannot mount, a snapshot frozen across filesystems.
//!
//! Layers are applied bottom up, as overlayfs would merge them: a *whiteout* (a character
//! device 0:0, how overlayfs records a deletion in an upper) removes what lies below it;
//! regular files, directories and symlinks are copied with their permission bits, never
//! following a link. Owners are not kept (the daemon's own). Deliberately absent: opaque
//! directories' xattrs (a directory deleted and made again in an upper shows the lower's
//! entries too after a full copy).

use std::fs;
use std::io;
use std::os::unix::fs::{FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};

#[derive(Debug, thiserror::Error)]
#[error("cannot copy \"{path}\": {source}")]
pub struct CopyError {
    pub path: PathBuf,
    #[source]
    pub source: io::Error,
}

fn at(path: &Path) -> impl FnOnce(io::Error) -> CopyError + '_ {
    move |source| CopyError {
        path: path.to_path_buf(),
        source,
    }
}

/// Copies `layers` (topmost first) merged into `dest` (made if missing).
pub fn copy_layers(layers: &[PathBuf], dest: &Path) -> Result<(), CopyError> {
    fs::create_dir_all(dest).map_err(at(dest))?;
    for layer in layers.iter().rev() {
        copy_tree(layer, dest)?;
    }
    Ok(())
}

/// Copies the tree under `from` into `to` (an existing directory), replacing what is there.
pub fn copy_tree(from: &Path, to: &Path) -> Result<(), CopyError> {
    for entry in fs::read_dir(from).map_err(at(from))? {
        let entry = entry.map_err(at(from))?;
        let source = entry.path();
        let target = to.join(entry.file_name());
        let meta = fs::symlink_metadata(&source).map_err(at(&source))?;
        let kind = meta.file_type();
        if kind.is_char_device() && meta.rdev() == 0 {
            remove_any(&target)?;
        } else if kind.is_dir() {
            if !fs::symlink_metadata(&target).is_ok_and(|m| m.is_dir()) {
                remove_any(&target)?;
                fs::create_dir(&target).map_err(at(&target))?;
            }
            copy_tree(&source, &target)?;
            fs::set_permissions(&target, fs::Permissions::from_mode(meta.mode() & 0o7777))
                .map_err(at(&target))?;
        } else if kind.is_symlink() {
            remove_any(&target)?;
            let link = fs::read_link(&source).map_err(at(&source))?;
            std::os::unix::fs::symlink(link, &target).map_err(at(&target))?;
        } else if kind.is_file() {
            remove_any(&target)?;
            fs::copy(&source, &target).map_err(at(&target))?;
        }
        // Devices, FIFOs and sockets are not workspace content: left out.
    }
    Ok(())
}

fn remove_any(path: &Path) -> Result<(), CopyError> {
    let result = match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    };
    result.map_err(at(path))
}

/// Bytes of the regular files under `dir` (links not followed), for a snapshot's size.
pub fn tree_bytes(dir: &Path) -> u64 {
    let mut total = 0;
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            match entry.file_type() {
                Ok(kind) if kind.is_dir() => stack.push(entry.path()),
                Ok(kind) if kind.is_file() => {
                    total += entry.metadata().map_or(0, |m| m.len());
                }
                _ => {}
            }
        }
    }
    total
}
