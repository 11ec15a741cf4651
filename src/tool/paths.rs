//! Path resolution shared by every tool that takes a path and by the permission rules that
//! match one: what a path written in a call means, and whether it stays in the workspace.
//!
//! A relative path resolves against a base directory (the session's working directory).
//! Resolution follows symlinks the way the kernel does (a `..` after a symlink leaves the
//! link's target, not the link's directory) and tolerates a missing tail, so a file about to
//! be created resolves too. It lives in the contract, not with the tools, because the
//! permission matcher resolves the same paths the same way and must not depend on the tools
//! (`tools::paths` adds what needs a call: the session and the per-call check memo).

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use super::ToolError;

/// Symlinks followed before a path is declared a loop (Linux's own limit).
const MAX_SYMLINKS: usize = 40;

/// A path resolved for a session.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ResolvedPath {
    /// Absolute, with `.`/`..` applied and symlinks in the existing part resolved.
    pub path: PathBuf,
    /// Whether `path` lies inside the session's workspace.
    pub inside_workspace: bool,
}

/// Why a path is refused before anything touches it.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PathError {
    #[error("{field} is empty; give a file path")]
    Empty { field: String },
    #[error("{field} contains a NUL byte")]
    Nul { field: String },
    #[error("{field} must be a string")]
    NotString { field: String },
    #[error("{field} resolves to a path that is not valid UTF-8: {lossy}")]
    NotUtf8 { field: String, lossy: String },
    #[error("{field} \"{path}\" has a symlink loop")]
    SymlinkLoop { field: String, path: String },
    #[error("{field} \"{path}\" leaves the session's environment")]
    OutsideEnvironment { field: String, path: String },
}

impl From<PathError> for ToolError {
    fn from(err: PathError) -> ToolError {
        ToolError::Validation(err.to_string())
    }
}

/// The string at `input[field]`, checked for emptiness and NUL bytes.
pub fn input_path<'a>(input: &'a Value, field: &str) -> Result<&'a str, PathError> {
    let raw = input
        .get(field)
        .and_then(Value::as_str)
        .ok_or_else(|| PathError::NotString {
            field: field.to_owned(),
        })?;
    if raw.is_empty() {
        return Err(PathError::Empty {
            field: field.to_owned(),
        });
    }
    if raw.contains('\0') {
        return Err(PathError::Nul {
            field: field.to_owned(),
        });
    }
    Ok(raw)
}

/// Resolves `raw` against `base` and judges it against `workspace`, which must be a real path
/// (symlinks resolved: [`super::SessionView::real_working_directory`]); below it only the rest of
/// the path is walked.
pub fn resolve(
    raw: &str,
    field: &str,
    base: &Path,
    workspace: &Path,
) -> Result<ResolvedPath, PathError> {
    if raw.is_empty() {
        return Err(PathError::Empty {
            field: field.to_owned(),
        });
    }
    if raw.contains('\0') {
        return Err(PathError::Nul {
            field: field.to_owned(),
        });
    }
    let joined = base.join(raw);
    let path = resolve_lenient_from(workspace, &joined).map_err(|_| PathError::SymlinkLoop {
        field: field.to_owned(),
        path: raw.to_owned(),
    })?;
    if path.to_str().is_none() {
        return Err(PathError::NotUtf8 {
            field: field.to_owned(),
            lossy: path.to_string_lossy().into_owned(),
        });
    }
    Ok(ResolvedPath {
        inside_workspace: path.starts_with(workspace),
        path,
    })
}

/// `path` made absolute-and-real like `realpath -m`: symlinks in the part that exists are
/// followed, `.` and `..` applied in order, a missing tail kept as written. Fails only on a
/// symlink loop.
pub fn resolve_lenient(path: &Path) -> io::Result<PathBuf> {
    walk(PathBuf::from("/"), components(path))
}

/// [`resolve_lenient`], trusting `real` (a path without symlinks, such as a session's real
/// working directory): when `path` starts with it, only the rest is walked, which saves a
/// `stat` per component of the workspace on every path a call names.
pub fn resolve_lenient_from(real: &Path, path: &Path) -> io::Result<PathBuf> {
    match path.strip_prefix(real) {
        Ok(rest) if real.is_absolute() => walk(real.to_path_buf(), components(rest)),
        _ => resolve_lenient(path),
    }
}

/// Applies `pending` to `resolved` (a real path), following symlinks as they are met.
fn walk(mut resolved: PathBuf, mut pending: VecDeque<OsString>) -> io::Result<PathBuf> {
    let mut links_followed = 0;
    while let Some(part) = pending.pop_front() {
        if part == ".." {
            resolved.pop();
            continue;
        }
        let candidate = resolved.join(&part);
        match std::fs::symlink_metadata(&candidate) {
            Ok(meta) if meta.file_type().is_symlink() => {
                links_followed += 1;
                if links_followed > MAX_SYMLINKS {
                    return Err(io::Error::other("too many levels of symbolic links"));
                }
                let target = std::fs::read_link(&candidate)?;
                if target.is_absolute() {
                    resolved = PathBuf::from("/");
                }
                for component in components(&target).into_iter().rev() {
                    pending.push_front(component);
                }
            }
            // Missing, not a directory, or unreadable: nothing below can be a symlink we could
            // follow, so the rest is applied as written.
            _ => resolved = candidate,
        }
    }
    Ok(resolved)
}

/// The normal and `..` components of `path` (roots and `.` dropped).
fn components(path: &Path) -> VecDeque<OsString> {
    path.components()
        .filter_map(|component| match component {
            Component::Normal(part) => Some(part.to_os_string()),
            Component::ParentDir => Some(OsString::from("..")),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => None,
        })
        .collect()
}
#[cfg(test)]
mod tests {
    use std::os::unix::fs::symlink;

    use super::*;

    #[test]
    fn relative_and_dotted_paths_resolve_inside() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("src")).unwrap();
        for (raw, expected) in [
            ("a.txt", ws.join("a.txt")),
            ("./src/../b.txt", ws.join("b.txt")),
            ("src/new/deeper/c.txt", ws.join("src/new/deeper/c.txt")),
            ("missing/../d.txt", ws.join("d.txt")),
        ] {
            let resolved = resolve(raw, "file_path", &ws, &ws).unwrap();
            assert_eq!(resolved.path, expected, "{raw}");
            assert!(resolved.inside_workspace, "{raw}");
        }
    }

    #[test]
    fn escapes_are_detected() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().join("ws");
        std::fs::create_dir(&ws).unwrap();
        symlink("/etc", ws.join("etc_link")).unwrap();
        symlink(&ws, ws.join("self_link")).unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        symlink(dir.path(), ws.join("sub/up")).unwrap();
        for raw in [
            "../outside.txt",
            "/etc/passwd",
            "etc_link/hosts",
            "sub/up/x",
            "self_link/../../x",
        ] {
            let resolved = resolve(raw, "file_path", &ws, &ws).unwrap();
            assert!(
                !resolved.inside_workspace,
                "{raw} -> {}",
                resolved.path.display()
            );
        }
        let inside = resolve("self_link/a", "file_path", &ws, &ws).unwrap();
        assert!(inside.inside_workspace);
        // `..` after a symlink leaves the link's target, as the kernel does.
        let after_link = resolve("etc_link/../tmp", "file_path", &ws, &ws).unwrap();
        assert_eq!(after_link.path, PathBuf::from("/tmp"));
    }

    #[test]
    fn loops_and_bad_strings_are_clear_errors() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_path_buf();
        symlink(ws.join("b"), ws.join("a")).unwrap();
        symlink(ws.join("a"), ws.join("b")).unwrap();
        let err = resolve("a/file", "file_path", &ws, &ws).unwrap_err();
        assert!(matches!(err, PathError::SymlinkLoop { .. }), "{err}");
        assert!(err.to_string().contains("symlink loop"));
        assert_eq!(
            resolve("", "file_path", &ws, &ws).unwrap_err(),
            PathError::Empty {
                field: "file_path".into()
            }
        );
        assert!(matches!(
            resolve("a\0b", "file_path", &ws, &ws),
            Err(PathError::Nul { .. })
        ));
        let input = serde_json::json!({"file_path": 7});
        assert!(matches!(
            input_path(&input, "file_path"),
            Err(PathError::NotString { .. })
        ));
    }

    #[test]
    fn a_non_utf8_symlink_target_is_refused() {
        use std::os::unix::ffi::OsStrExt;
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().to_path_buf();
        let target = ws.join(std::ffi::OsStr::from_bytes(b"bad\xffname"));
        symlink(&target, ws.join("link")).unwrap();
        let err = resolve("link", "file_path", &ws, &ws).unwrap_err();
        assert!(matches!(err, PathError::NotUtf8 { .. }), "{err}");
    }
}
