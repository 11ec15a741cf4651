//! `glob_search` (alias `Glob`): files whose path matches a glob, newest first.
//!
//! The pattern is matched against each file's path relative to the search root with
//! `globset`, `*` staying inside one directory and `**` crossing them. The walk is the shared
//! ripgrep-style walk ([`super::ripgrep_walker`]), so ignored files are never listed; hidden
//! entries are listed only when the pattern itself names one (a component starting with `.`),
//! as a shell's globbing does. All matches are sorted by modification time, newest first,
//! before the first [`MAX_RESULTS`] are kept. This file does not read file contents.

use std::path::{Component, Path, PathBuf};
use std::sync::Mutex;
use std::time::SystemTime;

use async_trait::async_trait;
use globset::{GlobBuilder, GlobMatcher};
use ignore::WalkState;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::{SearchRoot, check_path_syntax, ripgrep_walker, root_permission, search_root};
use crate::permission::PermissionLevel;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, Tool, ToolContext, ToolError, ToolOutput, ToolSpec,
};

/// Most paths returned; the rest are counted in the truncation note.
pub const MAX_RESULTS: usize = 100;

const DESCRIPTION: &str = "\
Finds files by name with a glob pattern, in any size of codebase, and returns their absolute \
paths, most recently modified first.

- The pattern is matched against each file's path relative to `path` (default: the session's \
working directory): `*` matches within one directory, `**` across any number of directories, \
`?` one character, `[abc]` a class, `{a,b}` alternatives. So `*.rs` finds files directly in \
`path`, `**/*.rs` finds them at any depth, `src/**/*.{ts,tsx}` under src.
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
    pub fn new() -> GlobSearch {
        GlobSearch { spec: spec() }
    }
}

impl Default for GlobSearch {
    fn default() -> Self {
        GlobSearch::new()
    }
}

fn spec() -> ToolSpec {
    ToolSpec::builder("glob_search")
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
                    "description": "The directory to search in; relative paths resolve against the session's working directory. Omit it to search the working directory."
                }
            },
            "required": ["pattern"],
            "additionalProperties": false
        }))
        .read_only(true)
        .concurrency_safe(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
        .permission_for(PermissionLevel::ReadOnly, root_permission)
        .concurrency_class(ConcurrencyClass::ReadOnly)
        .interrupt_behavior(InterruptBehavior::Cancel)
        // 100 paths: bounded, but a deep tree's absolute paths can still be long.
        .max_result_size_chars(Some(30_000))
        .build()
        // Invariant: the description and max_result_size_chars are set just above.
        .expect("the glob_search spec is complete")
}

#[async_trait]
impl Tool for GlobSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        GlobQuery::parse(input)?;
        check_path_syntax(input, &ctx.session)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let query = GlobQuery::parse(&input)?;
        let root = search_root(&input, ctx).await?;
        if !root.is_dir {
            return Err(ToolError::Validation(format!(
                "path \"{}\" is not a directory; glob_search searches directories",
                root.shown
            )));
        }
        let working_directory = ctx.session.working_directory().to_path_buf();
        let cancel = ctx.cancellation.clone();
        let found =
            tokio::task::spawn_blocking(move || find(&query, &root, &working_directory, &cancel))
                .await
                .map_err(|err| ToolError::Execution(format!("the file walk failed: {err}")))?;
        Ok(render(found))
    }
}

/// A parsed, compiled pattern.
struct GlobQuery {
    matcher: GlobMatcher,
    /// The pattern names a hidden component, so hidden entries are walked.
    names_hidden: bool,
    /// The pattern names `.git` itself, so even the repository's metadata is walked.
    names_git_dir: bool,
}

impl GlobQuery {
    fn parse(input: &Value) -> Result<GlobQuery, ToolError> {
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
struct Found {
    /// Newest first; all matches.
    files: Vec<PathBuf>,
    cancelled: bool,
}

/// Walks `root` and returns every matching file, newest first (ties by path).
fn find(
    query: &GlobQuery,
    root: &SearchRoot,
    working_directory: &Path,
    cancel: &CancellationToken,
) -> Found {
    let mut builder = ripgrep_walker(&root.path, working_directory);
    builder.threads(super::walk_threads());
    if query.names_hidden {
        builder.hidden(false);
        if !query.names_git_dir {
            builder.filter_entry(|entry| {
                !(entry.file_name() == ".git" && entry.file_type().is_some_and(|t| t.is_dir()))
            });
        }
    }
    let matches: Mutex<Vec<(Option<SystemTime>, PathBuf)>> = Mutex::new(Vec::new());
    builder.build_parallel().run(|| {
        let matches = &matches;
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
            let relative = entry
                .path()
                .strip_prefix(&root.path)
                .unwrap_or(entry.path());
            if query.matcher.is_match(relative) {
                let modified = entry.metadata().ok().and_then(|m| m.modified().ok());
                matches
                    .lock()
                    .unwrap_or_else(|poisoned| poisoned.into_inner())
                    .push((modified, entry.into_path()));
            }
            WalkState::Continue
        })
    });
    let mut matches = matches
        .into_inner()
        .unwrap_or_else(|poisoned| poisoned.into_inner());
    // Newest first; a file whose time cannot be read goes last; ties by path for stable output.
    matches.sort_by(|(t1, p1), (t2, p2)| t2.cmp(t1).then_with(|| p1.cmp(p2)));
    Found {
        files: matches.into_iter().map(|(_, path)| path).collect(),
        cancelled: cancel.is_cancelled(),
    }
}

/// One absolute path per line, then a note when the list was cut.
fn render(found: Found) -> ToolOutput {
    let total = found.files.len();
    let shown = total.min(MAX_RESULTS);
    let mut text = if total == 0 {
        String::from("No files found")
    } else {
        found.files[..shown]
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
mod tests {
    use super::*;

    fn parse(pattern: &str) -> Result<GlobQuery, ToolError> {
        GlobQuery::parse(&json!({ "pattern": pattern }))
    }

    #[test]
    fn glob_rules() {
        for (pattern, path, expected) in [
            ("*.rs", "main.rs", true),
            ("*.rs", "src/main.rs", false),
            ("**/*.rs", "main.rs", true),
            ("**/*.rs", "src/a/b/main.rs", true),
            ("src/*.rs", "src/main.rs", true),
            ("src/*.rs", "src/a/main.rs", false),
            ("src/**/*.rs", "src/a/main.rs", true),
            ("*.{ts,tsx}", "a.tsx", true),
            ("*.{ts,tsx}", "a.js", false),
            ("?.md", "a.md", true),
            ("?.md", "ab.md", false),
            ("[ab].txt", "b.txt", true),
            ("[!ab].txt", "b.txt", false),
            ("\\*.txt", "*.txt", true),
            ("\\*.txt", "a.txt", false),
        ] {
            let query = parse(pattern).unwrap();
            assert_eq!(
                query.matcher.is_match(path),
                expected,
                "{pattern} vs {path}"
            );
        }
    }

    #[test]
    fn hidden_components_are_noticed() {
        for (pattern, hidden, git) in [
            ("**/*.rs", false, false),
            ("./*.rs", false, false),
            (".github/**/*.yml", true, false),
            ("**/.env*", true, false),
            (".git/config", true, true),
            ("**/.gitignore", true, false),
            (".github/**", true, false),
        ] {
            let query = parse(pattern).unwrap();
            assert_eq!(
                (query.names_hidden, query.names_git_dir),
                (hidden, git),
                "{pattern}"
            );
        }
    }

    #[test]
    fn bad_patterns_are_named() {
        for (pattern, needle) in [
            ("", "empty"),
            ("/etc/*", "is absolute"),
            ("../*.rs", "contains \"..\""),
            ("src/../../x", "contains \"..\""),
            ("a[", "invalid glob pattern \"a[\""),
            ("{a,b", "invalid glob pattern \"{a,b\""),
            ("a\0b", "NUL"),
        ] {
            let err = match parse(pattern) {
                Err(err) => err,
                Ok(_) => panic!("{pattern:?} parsed"),
            };
            assert!(matches!(err, ToolError::Validation(_)), "{pattern:?}");
            assert!(err.message().contains(needle), "{pattern:?}: {err}");
        }
    }
}
