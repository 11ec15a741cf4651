//! The search tools: `glob_search` (files by name) and `grep_search` (files by content).
//!
//! Both walk the tree with the `ignore` crate configured the way ripgrep configures it
//! (`.gitignore` inside a git repository, `.ignore` and `.rgignore` everywhere, the global
//! git excludes, hidden entries skipped, symlinks not followed), so "what is searched" is the
//! same for both tools and the same as `rg`. This module owns that shared configuration, the
//! optional `path` parameter's permission and the paging of output lines; resolving and
//! pinning the root at execution is [`root`]'s. It does not own matching: globs are in
//! [`glob`], regex search and rg's output format in [`grep`] and [`grep_engine`].
//!
//! Paths in results are absolute (what Claude Code shows), so a model can pass them straight to
//! `read_file` whatever the shell's working directory is.

mod glob;
mod grep;
mod grep_engine;
mod root;

use std::path::Path;
use std::sync::Arc;

use ignore::WalkBuilder;
use serde_json::Value;

pub use glob::GlobSearch;
pub use grep::GrepSearch;
use root::{SearchRoot, search_root};

use crate::registry::{RegistryError, ToolRegistry};
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, ToolContext, ToolError, ToolSpec,
    ToolSpecBuilder,
};
use crate::tools::paths;

/// The input field both tools take for the directory (or, for grep, the file) to search.
const PATH_FIELD: &str = "path";

/// Registers `glob_search` and `grep_search` (they need nothing from [`ToolDeps`]).
pub fn register(registry: &mut ToolRegistry) -> Result<(), RegistryError> {
    registry.register(Arc::new(GlobSearch::new()?))?;
    registry.register(Arc::new(GrepSearch::new()?))?;
    Ok(())
}

/// Builds a spec, reporting a missing piece of metadata as a registration error naming the
/// tool.
fn build_spec(builder: ToolSpecBuilder) -> Result<ToolSpec, RegistryError> {
    Ok(builder.build()?)
}

/// The flags both searches share: read-only walks of the workspace, safe in parallel,
/// cancellable, `read_only` inside the workspace and `danger_full_access` outside it.
fn search_flags(builder: ToolSpecBuilder) -> ToolSpecBuilder {
    builder
        .read_only(true)
        .concurrency_safe(true)
        .destructive(false)
        .idempotent(true)
        .open_world(false)
        .permission_for(PermissionLevel::ReadOnly, root_permission)
        .concurrency_class(ConcurrencyClass::ReadOnly)
        .interrupt_behavior(InterruptBehavior::Cancel)
}

/// Whether the call names a path (absent and `null` both mean the working directory).
fn has_path(input: &Value) -> bool {
    input.get(PATH_FIELD).is_some_and(|value| !value.is_null())
}

/// The permission a search needs: `read_only` in the workspace, `danger_full_access` for a
/// `path` that leaves it (by `..`, an absolute path or a symlink).
fn root_permission(input: &Value, ctx: &ToolContext) -> Result<PermissionLevel, String> {
    if has_path(input) {
        paths::path_permission(input, PATH_FIELD, ctx, PermissionLevel::ReadOnly)
    } else {
        Ok(PermissionLevel::ReadOnly)
    }
}

/// Refuses a `path` that cannot be resolved at all (empty, NUL, a symlink loop, not UTF-8),
/// before the permission phase, so the model learns what is wrong with it.
fn check_path_syntax(input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
    if has_path(input) {
        paths::check_input(input, PATH_FIELD, ctx)?;
    }
    Ok(())
}

/// A walker over `root` with ripgrep's defaults (rg 14's `walk_builder` without flags):
/// hidden entries skipped, ignore files of the root's parents read, `.gitignore` only inside
/// a git repository, `.rgignore` as an extra ignore file, symlinks not followed. Globs and
/// global excludes resolve against the session's working directory, as when rg runs there.
fn ripgrep_walker(root: &Path, working_directory: &Path) -> WalkBuilder {
    let mut builder = WalkBuilder::new(root);
    builder
        .current_dir(working_directory)
        .follow_links(false)
        .hidden(true)
        .parents(true)
        .ignore(true)
        .git_global(true)
        .git_ignore(true)
        .git_exclude(true)
        .require_git(true)
        .add_custom_ignore_filename(".rgignore");
    builder
}

/// Threads for a parallel walk: what rg picks (the available cores, at most 12).
fn walk_threads() -> usize {
    std::thread::available_parallelism()
        .map_or(1, |n| n.get())
        .min(12)
}

/// A non-negative integer input; `None` when absent. Values beyond `usize` (a float like
/// `1e30` passes an integer schema) saturate, since they mean "no limit" in every field that
/// takes one.
fn input_count(input: &Value, field: &str) -> Result<Option<usize>, ToolError> {
    let Some(value) = input.get(field).filter(|value| !value.is_null()) else {
        return Ok(None);
    };
    if let Some(n) = value.as_u64() {
        return Ok(Some(usize::try_from(n).unwrap_or(usize::MAX)));
    }
    match value.as_f64() {
        Some(f) if f >= 0.0 && f.fract() == 0.0 => Ok(Some(usize::MAX)),
        _ => Err(ToolError::Validation(format!(
            "{field} must be a non-negative integer, got {value}"
        ))),
    }
}

/// One page of output lines.
#[derive(Debug, PartialEq, Eq)]
struct Page<'a> {
    lines: &'a [&'a str],
    /// Lines in the whole output.
    total: usize,
    /// Index of the first line shown.
    offset: usize,
}

impl Page<'_> {
    /// Lines left after this page.
    fn remaining(&self) -> usize {
        self.total.saturating_sub(self.offset + self.lines.len())
    }
}

/// The lines from `offset`, at most `limit` of them (`None`: all), like
/// `tail -n +offset+1 | head -n limit`.
fn page<'a>(lines: &'a [&'a str], offset: usize, limit: Option<usize>) -> Page<'a> {
    let start = offset.min(lines.len());
    let end = match limit {
        Some(limit) => start.saturating_add(limit).min(lines.len()),
        None => lines.len(),
    };
    Page {
        lines: &lines[start..end],
        total: lines.len(),
        offset,
    }
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn pages_cut_like_tail_and_head() {
        let lines = ["a", "b", "c", "d", "e"];
        for (offset, limit, shown, remaining) in [
            (0, None, vec!["a", "b", "c", "d", "e"], 0),
            (0, Some(2), vec!["a", "b"], 3),
            (2, Some(2), vec!["c", "d"], 1),
            (4, Some(9), vec!["e"], 0),
            (7, Some(1), vec![], 0),
            (1, Some(usize::MAX), vec!["b", "c", "d", "e"], 0),
        ] {
            let page = page(&lines, offset, limit);
            assert_eq!(page.lines, shown.as_slice(), "{offset} {limit:?}");
            assert_eq!(page.remaining(), remaining, "{offset} {limit:?}");
            assert_eq!(page.total, 5);
        }
    }

    #[test]
    fn an_incomplete_spec_is_a_registry_error() {
        let err = build_spec(ToolSpec::builder("half_built")).unwrap_err();
        assert!(
            matches!(&err, RegistryError::InvalidSchema { tool, .. } if tool == "half_built"),
            "{err:?}"
        );
        assert!(GlobSearch::new().is_ok() && GrepSearch::new().is_ok());
    }

    #[test]
    fn counts_saturate_and_refuse_negatives() {
        let input = json!({"a": 3, "b": 1e30, "c": -1, "d": 1.5, "e": null});
        assert_eq!(input_count(&input, "a").unwrap(), Some(3));
        assert_eq!(input_count(&input, "b").unwrap(), Some(usize::MAX));
        assert!(input_count(&input, "c").is_err());
        assert!(input_count(&input, "d").is_err());
        assert_eq!(input_count(&input, "e").unwrap(), None);
        assert_eq!(input_count(&input, "missing").unwrap(), None);
    }
}
