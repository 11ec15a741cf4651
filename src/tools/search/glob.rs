//! `glob_search` (alias `Glob`): files whose path matches a glob, newest first.
//!
//! The pattern is matched against each file's path relative to the search root with
//! `globset`, `*` staying inside one directory and `**` crossing them. The walk is the shared
//! ripgrep-style walk ([`super::ripgrep_walker`]), so ignored files are never listed; hidden
//! entries are listed only when the pattern itself names one (a component starting with `.`),
//! as a shell's globbing does. The newest [`MAX_RESULTS`] matches by modification time are kept
//! in a bounded heap while the walk counts the rest, so memory follows the cut, not the tree.
//! This file does not read file contents.

use std::cmp::Ordering;
use std::collections::BinaryHeap;
use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{SearchRoot, build_spec, check_path_syntax, ripgrep_walker, search_flags, search_root};
use crate::registry::RegistryError;
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Most paths returned; the rest are counted in the truncation note.
pub const MAX_RESULTS: usize = 100;

const DESCRIPTION: &str = "\
Finds files by name with a glob pattern, in any size of codebase, and returns their absolute \
paths, most recently modified first.

- `path` is the directory to search: absolute, or relative to the session's workspace root \
(not the shell's directory: a `cd` in bash does not change it). Omit it to search the \
workspace root.
- The pattern is matched against each file's path relative to `path`: `*` matches within one \
directory, `**` across any number of directories, `?` one character, `[abc]` a class, `{a,b}` \
alternatives. So `*.rs` finds files directly in `path`, `**/*.rs` finds them at any depth, \
`src/**/*.{ts,tsx}` under src.
- Files ignored by .gitignore (inside a git repository), .ignore or .rgignore are skipped, as \
ripgrep skips them; so are hidden files and directories unless the pattern names one \
(`.github/**/*.yml`, `**/.env*`). Symlinks are not followed.
- At most 100 paths are returned, the newest 100 of all matches; a note says how many there \
were. Narrow the pattern or path when it is truncated.
- Use this tool to find files by name; use grep_search to find files by content.";

/// The `glob_search` tool.
pub struct GlobSearch {
    spec: ToolSpec,
}

impl GlobSearch {
    pub fn new() -> Result<GlobSearch, RegistryError> {
        Ok(GlobSearch { spec: spec()? })
    }
}

fn spec() -> Result<ToolSpec, RegistryError> {
    let builder = ToolSpec::builder("glob_search")
        .alias("Glob")
        .description(DESCRIPTION)
        .input_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {
                    "type": "string",
                    "minLength": 1,
                    "description": "The glob to match file paths against, relative to path (e.g. \"**/*.rs\", \"src/*.{ts,tsx}\")."
                },
                "path": {
                    "type": "string",
                    "description": "The directory to search in, absolute or relative to the session's workspace root (a cd in bash does not change it). Omit it to search the workspace root."
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        }));
    let builder = search_flags(builder)
        // 100 paths: bounded, but a deep tree's absolute paths can still be long.
        .max_result_size_chars(Some(30_000));
    build_spec(builder)
}

#[async_trait]
impl Tool for GlobSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        GlobQuery::parse(input)?;
        check_path_syntax(input, ctx)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = GlobQuery::parse(&input)?;
        let root = search_root(&input, ctx)?;
        if !root.is_dir {
            return Err(ToolError::Validation(format!(
                "path \"{}\" is not a directory; glob_search searches directories",
                root.shown
            )));
        }
        let cancel = ctx.cancellation.clone();
        let found = tokio::task::spawn_blocking(move || find(&query, &root, &cancel))
            .await
            .map_err(|err| ToolError::Execution(format!("the file walk failed: {err}")))?;
        Ok(render(found))
    }
}

/// A parsed, compiled pattern.
pub(super) struct GlobQuery {
    matcher: GlobMatcher,
    /// The pattern names a hidden component, so hidden entries are walked.
    names_hidden: bool,
    /// The pattern names `.git` itself, so even the repository's metadata is walked.
    names_git_dir: bool,
}

impl GlobQuery {
    pub(super) fn parse(input: &Value) -> Result<GlobQuery, ToolError> {
        let pattern = input
            .get("pattern")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::Validation("pattern must be a string".into()))?;
        if pattern.is_empty() {
            return Err(ToolError::Validation("pattern is empty".into()));
        }
        if pattern.contains('\0') {
            return Err(ToolError::Validation("pattern contains a NUL byte".into()));
        }
        let as_path = Path::new(pattern);
        if as_path.is_absolute() {
            return Err(ToolError::Validation(format!(
                "pattern \"{pattern}\" is absolute; give the directory as path and a pattern relative to it"
            )));
        }
        if as_path.components().any(|c| c == Component::ParentDir) {
            return Err(ToolError::Validation(format!(
                "pattern \"{pattern}\" contains \"..\"; give the directory to search as path instead"
            )));
        }
        let glob = GlobBuilder::new(pattern)
            .literal_separator(true)
            .backslash_escape(true)
            .build()
            .map_err(|err| {
                ToolError::Validation(format!(
                    "invalid glob pattern \"{pattern}\": {}",
                    err.kind()
                ))
            })?;
        let dotted: Vec<&str> = pattern
            .split('/')
            .filter(|part| part.starts_with('.') && *part != ".")
            .collect();
        Ok(GlobQuery {
            matcher: glob.compile_matcher(),
            names_hidden: !dotted.is_empty(),
            names_git_dir: dotted.contains(&".git"),
        })
    }
}

/// What the walk found.
pub(super) struct Found {
    /// The newest [`MAX_RESULTS`] matches, newest first (ties by path).
    pub(super) files: Vec<PathBuf>,
    /// Matches in all.
    pub(super) total: usize,
    pub(super) cancelled: bool,
}

/// Walks `root` and keeps the newest [`MAX_RESULTS`] matching files.
pub(super) fn find(query: &GlobQuery, root: &SearchRoot, cancel: &CancellationToken) -> Found {
    let mut builder = ripgrep_walker(root.walk_path(), root.working_directory());
    builder.threads(super::walk_threads());
    if query.names_hidden {
        builder.hidden(false);
        if !query.names_git_dir {
            builder.filter_entry(|entry| {
                !(entry.file_name() == ".git" && entry.file_type().is_some_and(|t| t.is_dir()))
            });
        }
    }
    let newest = Mutex::new(Newest::new(MAX_RESULTS));
    builder.build_parallel().run(|| {
        let newest = &newest;
        Box::new(move |entry| {
            if cancel.is_cancelled() {
                return WalkState::Quit;
            }
            let Ok(entry) = entry else {
                return WalkState::Continue;
            };
            // Regular files only: symlinks are not followed, as in `rg --files`.
            if !entry.file_type().is_some_and(|t| t.is_file()) {
                return WalkState::Continue;
            }
            if query.matcher.is_match(root.relative(entry.path())) {
                let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
                let path = root.shown_path(entry.path()).into_owned();
                newest
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .offer(Candidate { modified, path });
            }
            WalkState::Continue
        })
    });
    let newest = newest
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    Found {
        total: newest.total,
        files: newest.into_sorted().into_iter().map(|c| c.path).collect(),
        cancelled: cancel.is_cancelled(),
    }
}

/// A matching file and its modification time.
#[derive(Debug, PartialEq, Eq)]
struct Candidate {
    /// `None` when the time cannot be read: such a file sorts after every dated one.
    modified: Option<SystemTime>,
    path: PathBuf,
}

/// Result order: newest first, ties by path. `Less` comes first in the output.
impl Ord for Candidate {
    fn cmp(&self, other: &Candidate) -> Ordering {
        other
            .modified
            .cmp(&self.modified)
            .then_with(|| self.path.cmp(&other.path))
    }
}

impl PartialOrd for Candidate {
    fn partial_cmp(&self, other: &Candidate) -> Option<Ordering> {
        Some(self.cmp(other))
    }
}

/// The first `keep` candidates in result order, and how many were offered. The heap's top is
/// the last one kept, so a better candidate replaces it in `O(log keep)`.
struct Newest {
    heap: BinaryHeap<Candidate>,
    keep: usize,
    total: usize,
}

impl Newest {
    fn new(keep: usize) -> Newest {
        Newest {
            heap: BinaryHeap::with_capacity(keep),
            keep,
            total: 0,
        }
    }

    fn offer(&mut self, candidate: Candidate) {
        self.total += 1;
        if self.heap.len() < self.keep {
            self.heap.push(candidate);
        } else if let Some(mut last) = self.heap.peek_mut()
            && candidate < *last
        {
            // Replacing the top through `PeekMut` sifts it down when `last` is dropped.
            *last = candidate;
        }
    }

    /// The kept candidates in result order.
    fn into_sorted(self) -> Vec<Candidate> {
        self.heap.into_sorted_vec()
    }
}

/// One absolute path per line, then a note when the list was cut.
fn render(found: Found) -> ToolOutput {
    let total = found.total;
    let shown = found.files.len();
    let mut text = if shown == 0 {
        String::from("No files found")
    } else {
        found
            .files
            .iter()
            .map(|path| path.to_string_lossy())
            .collect::<Vec<_>>()
            .join("\n")
    };
    if total > shown {
        text.push_str(&format!(
            "\n(Results are truncated: showing the {shown} most recently modified of {total} files. Use a more specific path or pattern.)"
        ));
    }
    if found.cancelled {
        text.push_str("\n(The search was cancelled; the list is incomplete.)");
    }
    ToolOutput::text(text)
        .with_metadata("num_files", json!(total))
        .with_metadata("truncated", json!(total > shown || found.cancelled))
}

#[cfg(test)]
#[path = "glob_tests.rs"]
mod tests;
