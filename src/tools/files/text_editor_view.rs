//! The text editor's `view`: a file numbered like `cat -n` (whole, or a `view_range`), or a
//! directory's non-hidden entries two levels deep.
//!
//! A file view is a read like `read_file`'s, with the same caps and notes, and it is recorded
//! in the file-state cache. A directory is listed through the descriptor that was opened
//! (via `/proc/self/fd`), and subdirectories are opened without following symlinks, so the
//! listing cannot wander outside what was authorised; it needs `/proc` mounted.

use std::ffi::OsString;
use std::os::fd::OwnedFd;
use std::path::Path;

use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::access::{self, Location, list_directory, open_child_directory};
use super::read::{WindowRequest, append_notes, number_file, open_for_reading};
use super::state::file_state;
use super::text::Window;
use crate::tool::{ToolError, ToolOutput};

/// Entries listed before the listing is cut.
const MAX_LISTED: usize = 1_000;

/// `view_range`: 1-based, inclusive; `end` `None` means the last line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct ViewRange {
    pub start: usize,
    pub end: Option<usize>,
}

/// Views the file or directory at `location`.
pub fn view(
    location: &Location,
    range: Option<ViewRange>,
    cancel: &CancellationToken,
) -> Result<ToolOutput, ToolError> {
    let path = &location.path;
    let (file, metadata) = open_for_reading(location)?;
    if metadata.is_dir() {
        if range.is_some() {
            return Err(ToolError::Validation(format!(
                "view_range applies to files, and \"{}\" is a directory",
                path.display()
            )));
        }
        return list(path, OwnedFd::from(file));
    }
    let window = match range {
        None => Window {
            first: 1,
            max_lines: None,
        },
        Some(range) => Window {
            first: range.start,
            max_lines: range.end.map(|end| end + 1 - range.start),
        },
    };
    let request = WindowRequest {
        window,
        ranged: range.is_some(),
        range_hint: "give view_range to view it in parts, or search it with grep_search",
    };
    let numbered = number_file(file, metadata.len(), path, request, cancel)?;
    if let Some(range) = range
        && range.start > numbered.total_lines.max(1)
    {
        return Err(ToolError::Validation(format!(
            "view_range starts at line {}, past the end of \"{}\", which has {} lines",
            range.start,
            path.display(),
            numbered.total_lines
        )));
    }
    let mut text = format!(
        "Here's the result of running `cat -n` on {}:\n",
        path.display()
    );
    if numbered.total_lines == 0 {
        text.push_str("[the file is empty]");
    } else {
        text.push_str(&numbered.text);
    }
    append_notes(&mut text, &numbered, "view with view_range starting at ");
    let update = file_state(
        path.clone(),
        numbered.size,
        metadata.modified().ok(),
        numbered.content_hash.clone(),
        numbered.partial(),
    );
    Ok(ToolOutput::text(text)
        .with_metadata("path", json!(path))
        .with_metadata("total_lines", json!(numbered.total_lines))
        .with_update(update))
}

/// Non-hidden entries of `dir` and of its subdirectories, sorted, directories marked `/`.
fn list(path: &Path, dir: OwnedFd) -> Result<ToolOutput, ToolError> {
    let describe = |err: std::io::Error| access::describe(&err, path, "list");
    let mut lines = vec![format!(
        "{}/",
        path.display().to_string().trim_end_matches('/')
    )];
    let mut cut = false;
    for (name, is_dir) in visible(&dir).map_err(describe)? {
        let child = path.join(&name);
        lines.push(entry_line(&child, is_dir));
        if is_dir && let Ok(sub) = open_child_directory(&dir, &name) {
            // An unreadable subdirectory is listed without its entries.
            for (grandchild, is_dir) in visible(&sub).unwrap_or_default() {
                lines.push(entry_line(&child.join(grandchild), is_dir));
            }
        }
        if lines.len() > MAX_LISTED {
            cut = true;
            lines.truncate(MAX_LISTED + 1);
            break;
        }
    }
    let mut text = format!(
        "Here's the files and directories up to 2 levels deep in {}, excluding hidden items:\n{}\n",
        path.display(),
        lines.join("\n")
    );
    if cut {
        text.push_str(&format!(
            "\n[listing cut at {MAX_LISTED} entries; view a subdirectory to see more]"
        ));
    }
    Ok(ToolOutput::text(text)
        .with_metadata("path", json!(path))
        .with_metadata("entries", json!(lines.len() - 1)))
}

fn entry_line(path: &Path, is_dir: bool) -> String {
    if is_dir {
        format!("{}/", path.display())
    } else {
        path.display().to_string()
    }
}

/// Sorted non-hidden entries: (name, is a real directory). Symlinks count as files.
fn visible(dir: &OwnedFd) -> std::io::Result<Vec<(OsString, bool)>> {
    let mut entries: Vec<(OsString, bool)> = list_directory(dir)?
        .into_iter()
        .filter(|(name, ..)| !name.as_encoded_bytes().starts_with(b"."))
        .map(|(name, is_dir, is_symlink)| (name, is_dir && !is_symlink))
        .collect();
    entries.sort();
    Ok(entries)
}
