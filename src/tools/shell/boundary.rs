//! The workspace boundary for `bash`: whether a command line stays inside the session's
//! workspace, judged from the words the classifier reports ([`PathWord`]).
//!
//! Relative words resolve against the directory the command starts in, absolute ones as they
//! are, both with [`paths::resolve`] (so symlinks count as the kernel follows them); `~` and
//! the other run-time paths count as outside (HOME is not expanded). A shell directory outside
//! the workspace (a `cd` out that persisted) puts every command outside.
//!
//! It does not confine anything: what a command computes at run time is not seen (see
//! [`crate::shell_syntax`]), and the filesystem may change between the check and the run. It
//! sets the permission a call needs, as `read_file`'s path check does; the sandbox confines.

use std::path::{Path, PathBuf};

use crate::shell_syntax::PathWord;
use crate::tool::SessionView;
use crate::tools::paths;

/// Where a call of `session` starts: the shell's directory, or the workspace when that
/// directory is gone (what `bash` does, with a note).
pub(crate) fn starting_directory(session: &dyn SessionView) -> PathBuf {
    let stored = session.shell_cwd();
    if stored.is_dir() {
        stored
    } else {
        session.working_directory().to_path_buf()
    }
}

/// `Ok` when `cwd` and every reported path lie inside the session's workspace; otherwise the
/// first that does not, for a message.
pub(crate) fn check(
    paths: &[PathWord],
    session: &dyn SessionView,
    cwd: &Path,
) -> Result<(), String> {
    let workspace = session.real_working_directory();
    let Some(cwd_text) = cwd.to_str() else {
        return Err(format!(
            "the shell's directory \"{}\" is not valid UTF-8",
            cwd.display()
        ));
    };
    if !inside(cwd_text, workspace, workspace) {
        return Err(format!(
            "the shell's directory \"{cwd_text}\" is outside the workspace"
        ));
    }
    for path in paths {
        match path {
            PathWord::Anywhere(word) => {
                return Err(format!(
                    "\"{word}\" may lead outside the workspace (its value is only known when the shell runs)"
                ));
            }
            PathWord::Literal(word) if !inside(word, cwd, workspace) => {
                return Err(format!("\"{word}\" is outside the workspace"));
            }
            PathWord::Literal(_) => {}
        }
    }
    Ok(())
}

/// Whether `raw` resolves inside `workspace`; a path that cannot be resolved (a symlink
/// loop) counts as outside.
fn inside(raw: &str, base: &Path, workspace: &Path) -> bool {
    paths::resolve(raw, "command", base, workspace).is_ok_and(|resolved| resolved.inside_workspace)
}
