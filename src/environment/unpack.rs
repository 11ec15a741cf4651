//! One image's layers merged into one directory: the image's root filesystem, as the OCI
//! image spec's "applying changesets" says.
//!
//! Each layer is a tar (gzip-compressed or not) applied in order over what the layers below
//! it left. A *whiteout* `.wh.NAME` deletes `NAME` below; an *opaque* marker `.wh..wh..opq`
//! in a directory hides everything the lower layers put in that directory. Both apply to the
//! lower layers only, so a layer is read twice: first its whiteouts are applied, then its
//! other entries are unpacked (by the `tar` crate, whose `unpack_in` refuses entries that
//! climb out with `..` or through a symlink). Owners and permission bits are kept (the daemon
//! unpacks as root here; otherwise its own owner); extended attributes are not.
//!
//! Deliberately absent: fetching (`images`), and keeping layers apart (the merged root is the
//! one read-only lower a session's view is built on).

use std::fs;
use std::io::{self, BufReader, Read};
use std::path::{Component, Path, PathBuf};

use flate2::read::GzDecoder;

const WHITEOUT: &str = ".wh.";
const OPAQUE: &str = ".wh..wh..opq";

/// Applies the layer tar at `blob` over `root`.
pub fn apply_layer(blob: &Path, root: &Path) -> io::Result<()> {
    let (deleted, opaque) = whiteouts(open_layer(blob)?)?;
    for dir in opaque {
        let dir = inside(root, &dir)?;
        if let Ok(entries) = fs::read_dir(&dir) {
            for entry in entries {
                remove_any(&entry?.path())?;
            }
        }
    }
    for path in deleted {
        remove_any(&inside(root, &path)?)?;
    }
    let mut archive = tar::Archive::new(open_layer(blob)?);
    archive.set_preserve_permissions(true);
    archive.set_preserve_ownerships(true);
    archive.set_preserve_mtime(true);
    archive.set_overwrite(true);
    for entry in archive.entries()? {
        let mut entry = entry?;
        let path = entry.path()?.into_owned();
        let name = path.file_name().and_then(|n| n.to_str()).unwrap_or("");
        if name.starts_with(WHITEOUT) {
            continue;
        }
        // A file replacing a directory (or the other way round) from a lower layer.
        let target = inside(root, &path)?;
        if let Ok(meta) = fs::symlink_metadata(&target)
            && (meta.is_dir() != entry.header().entry_type().is_dir())
        {
            remove_any(&target)?;
        }
        entry.unpack_in(root)?;
    }
    Ok(())
}

/// The layer's deletions (`.wh.NAME` → the path of `NAME`) and opaque directories.
fn whiteouts(reader: Box<dyn Read>) -> io::Result<(Vec<PathBuf>, Vec<PathBuf>)> {
    let mut archive = tar::Archive::new(reader);
    let (mut deleted, mut opaque) = (Vec::new(), Vec::new());
    for entry in archive.entries()? {
        let path = entry?.path()?.into_owned();
        let Some(name) = path.file_name().and_then(|n| n.to_str()) else {
            continue;
        };
        let parent = path.parent().unwrap_or(Path::new("")).to_path_buf();
        if name == OPAQUE {
            opaque.push(parent);
        } else if let Some(hidden) = name.strip_prefix(WHITEOUT) {
            deleted.push(parent.join(hidden));
        }
    }
    Ok((deleted, opaque))
}

/// A layer blob as a tar stream: gzip when it starts with gzip's magic, plain otherwise.
fn open_layer(blob: &Path) -> io::Result<Box<dyn Read>> {
    let mut file = BufReader::new(fs::File::open(blob)?);
    let mut magic = [0u8; 2];
    let n = file.read(&mut magic)?;
    let head = io::Cursor::new(magic[..n].to_vec());
    let whole = head.chain(file);
    if n == 2 && magic == [0x1f, 0x8b] {
        Ok(Box::new(GzDecoder::new(whole)))
    } else {
        Ok(Box::new(whole))
    }
}

/// `path` (from a tar) under `root`, refused when it climbs out or names a symlinked parent.
fn inside(root: &Path, path: &Path) -> io::Result<PathBuf> {
    let mut out = root.to_path_buf();
    for part in path.components() {
        match part {
            Component::Normal(p) => {
                if fs::symlink_metadata(&out).is_ok_and(|m| m.file_type().is_symlink()) {
                    return Err(refused(path));
                }
                out.push(p);
            }
            Component::CurDir | Component::RootDir => {}
            Component::ParentDir | Component::Prefix(_) => return Err(refused(path)),
        }
    }
    Ok(out)
}

fn refused(path: &Path) -> io::Error {
    io::Error::new(
        io::ErrorKind::InvalidData,
        format!(
            "layer entry \"{}\" points outside the image",
            path.display()
        ),
    )
}

fn remove_any(path: &Path) -> io::Result<()> {
    match fs::symlink_metadata(path) {
        Ok(meta) if meta.is_dir() => fs::remove_dir_all(path),
        Ok(_) => fs::remove_file(path),
        Err(err) if err.kind() == io::ErrorKind::NotFound => Ok(()),
        Err(err) => Err(err),
    }
}

/// Bytes under `dir` (regular files' lengths; links and directories count nothing).
pub fn tree_bytes(dir: &Path) -> u64 {
    let Ok(entries) = fs::read_dir(dir) else {
        return 0;
    };
    entries
        .flatten()
        .map(|entry| match entry.file_type() {
            Ok(kind) if kind.is_dir() => tree_bytes(&entry.path()),
            Ok(kind) if kind.is_file() => entry.metadata().map_or(0, |m| m.len()),
            _ => 0,
        })
        .sum()
}

#[cfg(test)]
#[path = "unpack_tests.rs"]
mod tests;
