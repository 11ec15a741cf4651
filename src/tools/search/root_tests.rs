//! Unit tests of the search root: the window between resolving the root and walking it, the
//! paths results show, and globs relative to the working directory through the alias.

use std::os::unix::fs::symlink;
use std::sync::Arc;

use grep_regex::RegexMatcher;
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::TypesBuilder;
use serde_json::json;
use tokio_util::sync::CancellationToken;

use super::*;
use crate::session::{SessionConfig, SessionState};
use crate::tools::search::glob::{GlobQuery, find};
use crate::tools::search::grep_engine::{self, OutputMode, SearchPlan};

struct Fixture {
    _dir: TempDir,
    workspace: PathBuf,
    outside: PathBuf,
}

/// `ws/sub/file.txt` and `ws/top.txt` inside; `outside/file.txt` and `outside/secret.txt` next
/// to the workspace.
fn fixture() -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let base = dir.path().canonicalize().unwrap();
    let workspace = base.join("ws");
    let outside = base.join("outside");
    std::fs::create_dir_all(workspace.join("sub")).unwrap();
    std::fs::create_dir_all(&outside).unwrap();
    std::fs::write(workspace.join("sub/file.txt"), "inside needle\n").unwrap();
    std::fs::write(workspace.join("top.txt"), "top needle\n").unwrap();
    std::fs::write(outside.join("file.txt"), "outside needle\n").unwrap();
    std::fs::write(outside.join("secret.txt"), "secret\n").unwrap();
    Fixture {
        _dir: dir,
        workspace,
        outside,
    }
}

fn context(fx: &Fixture, mode: PermissionLevel) -> ToolContext {
    let config = SessionConfig::new("s", &fx.workspace).permission_mode(mode);
    ToolContext::detached(Arc::new(SessionState::new(config)))
}

/// Replaces `ws/<name>` by a symlink to the outside directory (the original is kept aside).
fn swap_for_link(fx: &Fixture, name: &str) {
    let path = fx.workspace.join(name);
    std::fs::rename(&path, fx.workspace.join(format!("{name}.old"))).unwrap();
    symlink(&fx.outside, &path).unwrap();
}

/// Every file glob_search lists under `root`, sorted.
fn glob_all(root: &SearchRoot) -> Vec<PathBuf> {
    let query = GlobQuery::parse(&json!({"pattern": "**/*"})).unwrap();
    let mut files = find(&query, root, &CancellationToken::new()).files;
    files.sort();
    files
}

/// grep_search's content output for `needle` under `root`, with `globs` relative to the
/// working directory as the walk sees it.
fn grep_needle(root: &SearchRoot, globs: &[&str]) -> String {
    let mut overrides = OverrideBuilder::new(root.working_directory());
    for glob in globs {
        overrides.add(glob).unwrap();
    }
    let plan = SearchPlan {
        matcher: RegexMatcher::new("needle").unwrap(),
        types: TypesBuilder::new().build().unwrap(),
        overrides: if globs.is_empty() {
            Override::empty()
        } else {
            overrides.build().unwrap()
        },
        mode: OutputMode::Content,
        before_context: 0,
        after_context: 0,
        line_numbers: true,
        multiline: false,
    };
    let result = grep_engine::run(&plan, root, &CancellationToken::new());
    String::from_utf8(result.output).unwrap()
}

#[test]
fn a_root_swapped_for_a_symlink_after_resolution_is_still_the_one_resolved() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::WorkspaceWrite);
    let root = search_root(&json!({"path": "sub"}), &ctx).unwrap();
    let file_root = search_root(&json!({"path": "sub/file.txt"}), &ctx).unwrap();
    // The swap happens after the root was resolved, judged inside and opened.
    swap_for_link(&fx, "sub");
    let inside = fx.workspace.join("sub/file.txt");
    assert_eq!(glob_all(&root), vec![inside.clone()]);
    let expected = format!("{}:1:inside needle\n", inside.display());
    assert_eq!(grep_needle(&root, &[]), expected);
    assert_eq!(grep_needle(&file_root, &[]), expected);
}

#[test]
fn a_root_swapped_before_it_is_opened_is_refused() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::WorkspaceWrite);
    let location = Location::resolve(&json!({"path": "sub"}), PATH_FIELD, &ctx).unwrap();
    swap_for_link(&fx, "sub");
    let err = match SearchRoot::pin(&location, "sub".into(), &fx.workspace) {
        Ok(_) => panic!("a swapped root was opened"),
        Err(err) => err,
    };
    assert!(matches!(err, ToolError::Validation(_)), "{err:?}");
    assert!(err.to_string().contains("outside the workspace"), "{err}");
}

#[test]
fn pinned_roots_show_the_paths_as_resolved() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::ReadOnly);
    let whole = search_root(&json!({}), &ctx).unwrap();
    assert!(whole.walk_path().starts_with("/proc/self/fd"));
    assert_eq!(
        glob_all(&whole),
        vec![
            fx.workspace.join("sub/file.txt"),
            fx.workspace.join("top.txt")
        ]
    );
    let missing = search_root(&json!({"path": "nope"}), &ctx).err().unwrap();
    assert_eq!(missing.to_string(), "path \"nope\" does not exist");
}

#[test]
fn globs_with_a_slash_stay_relative_to_the_working_directory() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::WorkspaceWrite);
    let inside = format!(
        "{}:1:inside needle\n",
        fx.workspace.join("sub/file.txt").display()
    );
    for input in [json!({}), json!({"path": "sub"})] {
        let root = search_root(&input, &ctx).unwrap();
        assert_eq!(grep_needle(&root, &["sub/*.txt"]), inside, "{input}");
        assert_eq!(grep_needle(&root, &["sub/nothing*"]), "", "{input}");
    }
}

#[test]
fn the_alias_goes_with_the_root() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::WorkspaceWrite);
    let root = search_root(&json!({"path": "sub"}), &ctx).unwrap();
    let alias = root.working_directory().to_path_buf();
    assert!(!alias.starts_with(&fx.workspace));
    assert!(alias.join("sub").is_dir());
    drop(root);
    assert!(!alias.exists(), "{}", alias.display());
}

#[test]
fn danger_full_access_walks_by_name() {
    let fx = fixture();
    let ctx = context(&fx, PermissionLevel::DangerFullAccess);
    let root = search_root(&json!({"path": "sub"}), &ctx).unwrap();
    assert_eq!(root.walk_path(), fx.workspace.join("sub"));
    assert_eq!(root.working_directory(), fx.workspace);
}
