//! Where a search starts: the optional `path` resolved at execution, checked to exist, and, for
//! a call authorised only for the workspace, pinned to the directory (or file) it named.
//!
//! Pinning closes the window between resolving the path and walking it. The root is opened
//! beneath the workspace with `openat2(RESOLVE_BENEATH)` (the file tools' [`Location`]), so a
//! directory swapped for a symlink before the open is refused by the kernel, and the walk then
//! goes through `/proc/self/fd/<fd>`, which the kernel resolves to the opened directory
//! whatever happens to its path afterwards. Results still show the path as it was resolved. A
//! call authorised for `danger_full_access` may search anywhere and walks its path by name.
//!
//! The walk's path keeps the root's place below the working directory, because a `glob` that
//! contains `/` (and an anchored global git exclude) is matched against the path relative to
//! it, as in rg. A root below the working directory is reached through an alias: a private
//! temporary directory standing for the working directory, in which the root's relative path
//! ends in a symlink to `/proc/self/fd/<fd>`. The root itself (the common case) needs none.
//!
//! Not this module's business: entries below the root are opened by name by the walker.

use std::borrow::Cow;
use std::fs::{File, Metadata};
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

use serde_json::Value;
use tempfile::TempDir;

use super::{PATH_FIELD, has_path};
use crate::tool::{PermissionLevel, ToolContext, ToolError};
use crate::tools::files::access::{self, Location};
use crate::tools::paths;

/// A resolved, existing search root.
pub(super) struct SearchRoot {
    /// Absolute, symlinks resolved when the call ran: what results show (in an environment,
    /// as the environment sees it).
    pub path: PathBuf,
    /// As the call gave it (for messages).
    pub shown: String,
    pub is_dir: bool,
    /// Where the walk starts: `path` itself, or a path the kernel resolves to the pinned root.
    walk: PathBuf,
    /// The working directory as seen from `walk`'s side: what globs containing `/` and global
    /// git excludes are relative to.
    working_directory: PathBuf,
    /// Keeps the pinned root open, and its alias in place, while the search runs.
    pin: Option<Pin>,
}

/// What a pinned root holds on to.
struct Pin {
    _root: File,
    /// The alias directory of a root below the working directory (removed when dropped).
    _alias: Option<TempDir>,
}

/// Resolves where the search starts, again at execution: a `path` swapped for a symlink to
/// the outside after the permission check is refused, and, unless the call may go anywhere,
/// the root is pinned ([`SearchRoot::pin`]).
pub(super) fn search_root(input: &Value, ctx: &ToolContext) -> Result<SearchRoot, ToolError> {
    let working_directory = ctx.session.working_directory();
    let workspace = ctx.session.real_working_directory().to_path_buf();
    let shown = if has_path(input) {
        paths::input_path(input, PATH_FIELD)?.to_owned()
    } else {
        working_directory.display().to_string()
    };
    if let Some(environment) = ctx.session.environment() {
        return in_environment(input, ctx, environment, shown, &workspace);
    }
    if ctx.authorized >= PermissionLevel::DangerFullAccess {
        let path = if has_path(input) {
            paths::resolve_for_execution(input, PATH_FIELD, ctx)?.path
        } else {
            workspace
        };
        return SearchRoot::by_name(path, shown, working_directory);
    }
    let location = if has_path(input) {
        Location::resolve(input, PATH_FIELD, ctx)?
    } else {
        Location::beneath(workspace.clone(), workspace.clone()).ok_or_else(|| outside(&shown))?
    };
    SearchRoot::pin(&location, shown, &workspace)
}

/// Where a search starts in an environment (DESIGN §12): anywhere inside it whatever the mode
/// (a read anywhere inside is a read; `Location::resolve` opens beneath the environment's
/// root, so nothing of the host is reached, not even by a link made inside), always pinned.
/// A root below the workspace keeps the workspace as what globs are relative to; a root
/// elsewhere (`/etc`) is its own. Results show the environment's paths (`/etc/os-release`).
fn in_environment(
    input: &Value,
    ctx: &ToolContext,
    environment: &crate::tool::EnvironmentView,
    shown: String,
    workspace: &Path,
) -> Result<SearchRoot, ToolError> {
    let location = if has_path(input) {
        Location::resolve(input, PATH_FIELD, ctx)?
    } else {
        Location::beneath(workspace.to_path_buf(), environment.root.clone())
            .ok_or_else(|| outside(&shown))?
    };
    let base = if location.path.starts_with(workspace) {
        workspace
    } else {
        &location.path
    };
    let mut root = SearchRoot::pin(&location, shown, base)?;
    if let Some(inside) = environment.to_inside(&root.path) {
        root.path = inside;
    }
    Ok(root)
}

fn outside(shown: &str) -> ToolError {
    ToolError::Validation(format!("path \"{shown}\" is outside the workspace"))
}

impl SearchRoot {
    /// A root walked by its path (the call may search anywhere).
    pub(super) fn by_name(
        path: PathBuf,
        shown: String,
        working_directory: &Path,
    ) -> Result<SearchRoot, ToolError> {
        let metadata = std::fs::metadata(&path).map_err(|err| {
            if err.kind() == std::io::ErrorKind::NotFound {
                ToolError::Validation(format!("path \"{shown}\" does not exist"))
            } else {
                ToolError::Execution(format!("path \"{shown}\" cannot be read: {err}"))
            }
        })?;
        Ok(SearchRoot {
            walk: path.clone(),
            path,
            shown,
            is_dir: metadata.is_dir(),
            working_directory: working_directory.to_path_buf(),
            pin: None,
        })
    }

    /// Opens `location` beneath the workspace (canonical `workspace`) and walks it through its
    /// descriptor from then on.
    fn pin(location: &Location, shown: String, workspace: &Path) -> Result<SearchRoot, ToolError> {
        let relative = location
            .path
            .strip_prefix(workspace)
            .map_err(|_| outside(&shown))?;
        let root = location.open_read().map_err(|err| {
            if err.kind() == std::io::ErrorKind::NotFound {
                ToolError::Validation(format!("path \"{shown}\" does not exist"))
            } else {
                access::describe(&err, &location.path, "search")
            }
        })?;
        let metadata = root
            .metadata()
            .map_err(|err| access::describe(&err, &location.path, "inspect"))?;
        let pinned = descriptor_path(&root, &metadata)?;
        let (walk, working_directory, alias) =
            if metadata.is_dir() && !relative.as_os_str().is_empty() {
                let alias = alias_for(&pinned, relative).map_err(|err| {
                    ToolError::Execution(format!("cannot prepare the search of \"{shown}\": {err}"))
                })?;
                (
                    alias.path().join(relative),
                    alias.path().to_path_buf(),
                    Some(alias),
                )
            } else {
                // The root is the working directory itself, or a file searched directly (globs
                // and ignore rules do not apply to it).
                (pinned.clone(), pinned, None)
            };
        Ok(SearchRoot {
            path: location.path.clone(),
            shown,
            is_dir: metadata.is_dir(),
            walk,
            working_directory,
            pin: Some(Pin {
                _root: root,
                _alias: alias,
            }),
        })
    }

    /// Where the walk starts.
    pub(super) fn walk_path(&self) -> &Path {
        &self.walk
    }

    /// What the walk's globs and global excludes are relative to.
    pub(super) fn working_directory(&self) -> &Path {
        &self.working_directory
    }

    /// A walked path relative to the root (empty for the root itself).
    pub(super) fn relative<'a>(&self, walked: &'a Path) -> &'a Path {
        walked.strip_prefix(&self.walk).unwrap_or(walked)
    }

    /// A walked path as results show it: under [`SearchRoot::path`].
    pub(super) fn shown_path<'a>(&self, walked: &'a Path) -> Cow<'a, Path> {
        if self.pin.is_none() {
            return Cow::Borrowed(walked);
        }
        let relative = self.relative(walked);
        if relative.as_os_str().is_empty() {
            Cow::Owned(self.path.clone())
        } else {
            Cow::Owned(self.path.join(relative))
        }
    }
}

/// `/proc/self/fd/<fd>` for the opened root, checked to lead to it: without /proc the walk
/// would silently find nothing, so that is refused instead.
fn descriptor_path(root: &File, metadata: &Metadata) -> Result<PathBuf, ToolError> {
    let pinned = PathBuf::from(format!("/proc/self/fd/{}", root.as_raw_fd()));
    let through_proc = std::fs::metadata(&pinned).map_err(|err| {
        ToolError::Execution(format!("cannot search through {}: {err}", pinned.display()))
    })?;
    if (through_proc.dev(), through_proc.ino()) != (metadata.dev(), metadata.ino()) {
        return Err(ToolError::Execution(format!(
            "{} does not lead to the opened search root; is /proc mounted?",
            pinned.display()
        )));
    }
    Ok(pinned)
}

/// A private directory standing for the working directory, in which `relative` (the root's
/// path below it, canonical: plain names only) is a symlink to `pinned`.
fn alias_for(pinned: &Path, relative: &Path) -> std::io::Result<TempDir> {
    let alias = tempfile::Builder::new().prefix("toold-search-").tempdir()?;
    let link = alias.path().join(relative);
    if let Some(parent) = link.parent() {
        std::fs::create_dir_all(parent)?;
    }
    std::os::unix::fs::symlink(pinned, &link)?;
    Ok(alias)
}

#[cfg(test)]
#[path = "root_tests.rs"]
mod tests;
