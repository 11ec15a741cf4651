//! Path escapes through a real dispatcher: in `workspace_write` mode a `path` that leaves the
//! workspace is `permission_denied` or a clear validation error, never silently searched;
//! symlinks met during the walk are not followed; a symlink swapped between the permission
//! check and execution is caught when the tool resolves the path again.

use std::os::unix::fs::symlink;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};

use async_trait::async_trait;
use serde_json::json;
use toold::hooks::{HookEvent, PreToolUseOutcome, ToolHook};
use toold::permission::PermissionLevel;
use toold::tool::ErrorKind;

use crate::search::harness::Workspace;

const SECRET: &str = "top-secret-token";

/// A workspace next to an `outside` directory holding a secret, with escape routes.
fn escape_workspace(mode: PermissionLevel) -> Workspace {
    let ws = Workspace::new(mode);
    prepare(&ws);
    ws
}

fn prepare(ws: &Workspace) {
    std::fs::write(ws.outside.join("secret.txt"), format!("{SECRET}\n")).unwrap();
    ws.write("inner/visible.txt", "harmless\n");
    symlink("/etc", ws.root.join("etc_link")).unwrap();
    symlink(&ws.outside, ws.root.join("outside_link")).unwrap();
    symlink(
        ws.outside.join("secret.txt"),
        ws.root.join("secret_link.txt"),
    )
    .unwrap();
    symlink(ws.root.join("loop_b"), ws.root.join("loop_a")).unwrap();
    symlink(ws.root.join("loop_a"), ws.root.join("loop_b")).unwrap();
}

/// Each route out of the workspace, as a `path` value.
fn escapes(ws: &Workspace) -> Vec<(String, Option<ErrorKind>)> {
    vec![
        ("..".into(), None),
        ("../outside".into(), None),
        ("inner/../../outside".into(), None),
        (ws.outside.display().to_string(), None),
        ("/etc".into(), None),
        ("etc_link".into(), None),
        ("outside_link".into(), None),
        ("secret_link.txt".into(), None),
        // A loop cannot be resolved at all: a validation error before permission.
        ("loop_a".into(), Some(ErrorKind::Validation)),
        ("loop_a/deeper".into(), Some(ErrorKind::Validation)),
    ]
}

#[tokio::test]
async fn escapes_are_refused_in_workspace_write_mode() {
    let ws = escape_workspace(PermissionLevel::WorkspaceWrite);
    for (path, special) in escapes(&ws) {
        let expected = special.unwrap_or(ErrorKind::PermissionDenied);
        for (tool, input) in [
            (
                "grep_search",
                json!({"pattern": "secret|root", "path": path}),
            ),
            ("glob_search", json!({"pattern": "**/*", "path": path})),
        ] {
            let result = ws.call(tool, input.clone()).await;
            assert!(
                result.is_error,
                "{tool} {input} was allowed: {}",
                result.output
            );
            assert_eq!(
                result.error_kind,
                Some(expected),
                "{tool} {input}: {}",
                result.output
            );
            assert!(
                !result.output.contains(SECRET),
                "{tool} {input}: {}",
                result.output
            );
            if expected == ErrorKind::Validation {
                assert!(result.output.contains("symlink loop"), "{}", result.output);
            }
        }
    }
}

#[tokio::test]
async fn danger_full_access_may_search_outside() {
    let ws = escape_workspace(PermissionLevel::DangerFullAccess);
    let output = ws
        .ok(
            "grep_search",
            json!({"pattern": "secret", "path": "../outside", "output_mode": "content"}),
        )
        .await;
    assert_eq!(
        output,
        format!("{}/secret.txt:1:{SECRET}\n", ws.outside.display())
    );
}

#[tokio::test]
async fn symlinks_inside_the_tree_are_not_followed() {
    let ws = escape_workspace(PermissionLevel::WorkspaceWrite);
    let grep = ws
        .ok("grep_search", json!({"pattern": "top-secret|root:"}))
        .await;
    assert_eq!(grep, "No matches found");
    let glob = ws.ok("glob_search", json!({"pattern": "**/*"})).await;
    assert_eq!(glob, format!("{}/inner/visible.txt", ws.root.display()));
}

/// Swaps a link to point outside the workspace after the permission phase allowed the call
/// (pre-tool hooks run after it). Aimed once the workspace exists.
#[derive(Default)]
struct SwapAfterPermission {
    /// `(link, new target)`.
    aim: Mutex<Option<(PathBuf, PathBuf)>>,
}

#[async_trait]
impl ToolHook for SwapAfterPermission {
    fn name(&self) -> &str {
        "swap"
    }

    fn matches(&self, _tool_name: &str) -> bool {
        true
    }

    async fn pre_tool_use(&self, _event: &HookEvent) -> PreToolUseOutcome {
        if let Some((link, target)) = self.aim.lock().unwrap().clone() {
            std::fs::remove_file(&link).unwrap();
            symlink(&target, &link).unwrap();
        }
        PreToolUseOutcome::default()
    }
}

#[tokio::test]
async fn a_symlink_swapped_after_the_check_is_caught() {
    let hook = Arc::new(SwapAfterPermission::default());
    let ws = Workspace::with_hooks(PermissionLevel::WorkspaceWrite, vec![hook.clone()]);
    prepare(&ws);
    let link = ws.root.join("swap");
    *hook.aim.lock().unwrap() = Some((link.clone(), ws.outside.clone()));
    for (tool, input) in [
        ("grep_search", json!({"pattern": "secret", "path": "swap"})),
        ("glob_search", json!({"pattern": "*", "path": "swap"})),
    ] {
        // Inside when the permission phase looks: a link to a directory in the workspace.
        let _ = std::fs::remove_file(&link);
        symlink(ws.root.join("inner"), &link).unwrap();
        let result = ws.call(tool, input.clone()).await;
        assert!(
            result.is_error,
            "{tool} searched the swapped link: {}",
            result.output
        );
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::Validation),
            "{}",
            result.output
        );
        assert!(
            result.output.contains("now resolves outside the workspace"),
            "{}",
            result.output
        );
        assert!(!result.output.contains(SECRET));
    }
}
