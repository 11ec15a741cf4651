//! The data directory as a process finds it: created (with its workspaces), held
//! (`daemon.lock`: a daemon alone, `toold mcp` processes side by side, a refusal naming the
//! holder) and the daemon's node id read or made (`node_id`).

use std::path::{Path, PathBuf};

use super::ServerError;

/// Who runs on a [`Core`]: the daemon owns the data directory's node id (its sessions, its
/// interrupted calls), numbers its events in its own bus and holds the directory alone; a
/// stdio MCP process is one of many clients of the directory (two editor windows), runs under
/// a node id of its own and has the store number its events.
#[derive(Clone, Copy, PartialEq, Eq)]
pub enum Occupant {
    Daemon,
    Stdio,
}

/// Creates the data directory (and its workspaces) and returns it absolute.
pub(super) fn create_dir(dir: &Path) -> Result<PathBuf, ServerError> {
    let fail = |source| ServerError::DataDir {
        path: dir.to_owned(),
        source,
    };
    std::fs::create_dir_all(dir.join("workspaces")).map_err(fail)?;
    dir.canonicalize().map_err(fail)
}

/// Holds `<data_dir>/daemon.lock` (an `flock`, freed by the kernel when the process dies,
/// however it dies): a daemon exclusively, with its pid written inside; a stdio MCP process
/// shared, beside any number of others. A daemon restores the sessions its node owns, marks
/// their running calls interrupted and numbers events in its own bus, so it must be the
/// directory's only process: a second daemon, or a daemon beside `toold mcp` processes (or
/// one of those beside a daemon), is refused, naming the holder.
pub(super) fn hold_directory(
    data_dir: &Path,
    occupant: Occupant,
) -> Result<std::fs::File, ServerError> {
    use std::fs::TryLockError;
    use std::io::{Read, Seek, Write};
    let path = data_dir.join("daemon.lock");
    let fail = |source| ServerError::DataDir {
        path: path.clone(),
        source,
    };
    let mut file = std::fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .map_err(fail)?;
    let taken = match occupant {
        Occupant::Daemon => file.try_lock(),
        Occupant::Stdio => file.try_lock_shared(),
    };
    match taken {
        Ok(()) => {}
        Err(TryLockError::WouldBlock) => {
            // Shared holders only (a shared lock can still be had): `toold mcp` processes.
            let holder = if file.try_lock_shared().is_ok() {
                let _ = file.unlock();
                "toold mcp processes".to_owned()
            } else {
                let mut pid = String::new();
                let _ = file.read_to_string(&mut pid);
                match pid.trim() {
                    "" => "a toold serve starting".to_owned(),
                    pid => format!("a toold serve, pid {pid}"),
                }
            };
            return Err(ServerError::DataDirInUse {
                path: data_dir.to_owned(),
                holder,
            });
        }
        Err(TryLockError::Error(err)) => return Err(fail(err)),
    }
    if occupant == Occupant::Daemon {
        file.set_len(0).map_err(fail)?;
        file.rewind().map_err(fail)?;
        writeln!(file, "{}", std::process::id()).map_err(fail)?;
    }
    Ok(file)
}

/// This daemon's id, kept in `<data_dir>/node_id` so a restart owns the same sessions.
pub(super) fn node_id(data_dir: &Path) -> Result<String, ServerError> {
    let path = data_dir.join("node_id");
    let fail = |source| ServerError::DataDir {
        path: path.clone(),
        source,
    };
    match std::fs::read_to_string(&path) {
        Ok(id) if !id.trim().is_empty() => Ok(id.trim().to_owned()),
        Ok(_) => write_node_id(&path).map_err(fail),
        Err(err) if err.kind() == std::io::ErrorKind::NotFound => {
            write_node_id(&path).map_err(fail)
        }
        Err(err) => Err(fail(err)),
    }
}

fn write_node_id(path: &Path) -> std::io::Result<String> {
    let id = format!("node-{}", uuid::Uuid::now_v7().simple());
    std::fs::write(path, format!("{id}\n"))?;
    Ok(id)
}
