//! Paths for every tool that takes one: validation, resolution against the session, and the
//! workspace boundary.
//!
//! A relative path resolves against the session's working directory. Resolution follows
//! symlinks the way the kernel does (a `..` after a symlink leaves the link's target, not the
//! link's directory) and tolerates a missing tail, so a file about to be created resolves too.
//! A path that leaves the workspace, by `..`, an absolute path or a symlink, is never silently
//! allowed or rewritten: it needs `danger_full_access`. Because the filesystem can change
//! between authorisation and execution, tools resolve again when they run
//! ([`resolve_for_execution`], or the kernel as it opens the path) and refuse a path that has
//! moved outside what was authorised.
//!
//! Before a call runs, its path is resolved once: by its validation ([`check_input`]), whose
//! answer the permission check that follows ([`path_permission`]) takes from the session. That
//! answer may be a moment old; it is only ever a pre-check, since the run resolves again.

use std::collections::VecDeque;
use std::ffi::OsString;
use std::io;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;

use crate::permission::PermissionLevel;
use crate::session::SessionState;
use crate::tool::{ToolContext, ToolError};

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
/// (symlinks resolved: [`SessionState::real_working_directory`]); below it only the rest of
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

/// Resolves `input[field]` for a session (relative to its working directory).
pub fn resolve_input(
    input: &Value,
    field: &str,
    session: &SessionState,
) -> Result<ResolvedPath, PathError> {
    let raw = input_path(input, field)?;
    resolve(
        raw,
        field,
        session.working_directory(),
        session.real_working_directory(),
    )
}

/// Resolves `input[field]` for a call's validation and keeps whether it lies in the workspace
/// for the call's permission check ([`path_permission`]), which follows validation in the
/// pipeline.
pub fn check_input(
    input: &Value,
    field: &str,
    session: &SessionState,
) -> Result<ResolvedPath, PathError> {
    let resolved = resolve_input(input, field, session)?;
    session.keep_path_check(input_path(input, field)?, resolved.inside_workspace);
    Ok(resolved)
}

/// The permission `input[field]` needs: `inside` for a path in the workspace, else
/// `danger_full_access`. For `ToolSpecBuilder::permission_for`; an error fails closed.
///
/// The answer of the call's validation ([`check_input`]) is used when there is one. A moment
/// old at most in a pipeline, it errs safely either way: a path judged outside asks for more
/// than it needs, and one judged inside that has since left is refused when the call runs.
pub fn path_permission(
    input: &Value,
    field: &str,
    session: &SessionState,
    inside: PermissionLevel,
) -> Result<PermissionLevel, String> {
    let raw = input_path(input, field).map_err(|err| err.to_string())?;
    let inside_workspace = match session.take_path_check(raw) {
        Some(inside_workspace) => inside_workspace,
        None => {
            resolve_input(input, field, session)
                .map_err(|err| err.to_string())?
                .inside_workspace
        }
    };
    Ok(if inside_workspace {
        inside
    } else {
        PermissionLevel::DangerFullAccess
    })
}

/// Resolves `input[field]` again when the tool runs, and refuses it if it now leaves the
/// workspace although the call was authorised only for the inside (a symlink swapped after
/// the check).
pub fn resolve_for_execution(
    input: &Value,
    field: &str,
    ctx: &ToolContext,
) -> Result<ResolvedPath, ToolError> {
    let resolved = resolve_input(input, field, &ctx.session)?;
    if !resolved.inside_workspace && ctx.authorized < PermissionLevel::DangerFullAccess {
        return Err(ToolError::Validation(format!(
            "{field} \"{}\" now resolves outside the workspace (to {}); it changed after the call was authorised",
            input_path(input, field)?,
            resolved.path.display()
        )));
    }
    Ok(resolved)
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
    fn the_permission_check_takes_what_validation_found() {
        let dir = tempfile::tempdir().unwrap();
        let ws = dir.path().canonicalize().unwrap();
        std::fs::create_dir(ws.join("sub")).unwrap();
        symlink(ws.join("sub"), ws.join("link")).unwrap();
        let session = SessionState::new(crate::session::SessionConfig::new("s", &ws));
        let input = serde_json::json!({"file_path": "link/x"});
        let permission =
            || path_permission(&input, "file_path", &session, PermissionLevel::ReadOnly);
        assert!(
            check_input(&input, "file_path", &session)
                .unwrap()
                .inside_workspace
        );
        // The link now leads outside: the call's permission check still goes by its
        // validation (the run resolves again), and the next check without one resolves.
        std::fs::remove_file(ws.join("link")).unwrap();
        symlink("/etc", ws.join("link")).unwrap();
        assert_eq!(permission(), Ok(PermissionLevel::ReadOnly));
        assert_eq!(permission(), Ok(PermissionLevel::DangerFullAccess));
        assert!(
            !check_input(&input, "file_path", &session)
                .unwrap()
                .inside_workspace
        );
        assert_eq!(permission(), Ok(PermissionLevel::DangerFullAccess));
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
