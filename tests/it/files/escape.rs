//! The path-escape suite, for every path-taking file tool (and every command of the text
//! editor), through a real dispatcher so the permission phase runs: `..`, absolute paths
//! outside, a symlink to `/etc`, symlinks to an outside directory or file, a symlink loop, bad
//! strings, and a symlink swapped after the permission check (by a pre-tool hook, which runs
//! between permission and execution). In `workspace_write` an escape is `permission_denied`
//! (or a `validation` error for loops, NUL and empty paths) and nothing outside changes; in
//! `danger_full_access` the same outside paths work.

use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, OnceLock};

use async_trait::async_trait;
use serde_json::{Value, json};
use toold::hooks::{HookEvent, PreToolUseOutcome, ToolHook};
use toold::permission::PermissionLevel;
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok, snapshot};

const NOTEBOOK: &str = "{\n \"cells\": [\n  {\n   \"cell_type\": \"code\",\n   \"id\": \"a\",\n   \"metadata\": {},\n   \"outputs\": [],\n   \"source\": [\"secret\"]\n  }\n ],\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";

/// One path-taking call shape: its tool, and its input for a path.
struct Shape {
    label: &'static str,
    tool: &'static str,
    /// The file name it targets (notebooks must end in `.ipynb`).
    name: &'static str,
    input: fn(&str) -> Value,
}

fn shapes() -> Vec<Shape> {
    vec![
        Shape {
            label: "read_file",
            tool: "read_file",
            name: "secret.txt",
            input: |p| json!({"file_path": p}),
        },
        Shape {
            label: "write_file",
            tool: "write_file",
            name: "secret.txt",
            input: |p| json!({"file_path": p, "content": "pwned\n"}),
        },
        Shape {
            label: "edit_file",
            tool: "edit_file",
            name: "secret.txt",
            input: |p| json!({"file_path": p, "old_string": "secret", "new_string": "pwned"}),
        },
        Shape {
            label: "notebook_edit",
            tool: "notebook_edit",
            name: "secret.ipynb",
            input: |p| json!({"notebook_path": p, "cell_id": "a", "new_source": "pwned"}),
        },
        Shape {
            label: "editor view",
            tool: "str_replace_based_edit_tool",
            name: "secret.txt",
            input: |p| json!({"command": "view", "path": p}),
        },
        Shape {
            label: "editor create",
            tool: "str_replace_based_edit_tool",
            name: "secret.txt",
            input: |p| json!({"command": "create", "path": p, "file_text": "pwned\n"}),
        },
        Shape {
            label: "editor str_replace",
            tool: "str_replace_based_edit_tool",
            name: "secret.txt",
            input: |p| json!({"command": "str_replace", "path": p, "old_str": "secret", "new_str": "pwned"}),
        },
        Shape {
            label: "editor insert",
            tool: "str_replace_based_edit_tool",
            name: "secret.txt",
            input: |p| json!({"command": "insert", "path": p, "insert_line": 0, "new_str": "pwned"}),
        },
    ]
}

/// Outside: `secret.txt` and `secret.ipynb`. Inside: links to `/etc`, to the outside
/// directory and its files, a loop, and `sub/` for `..` walks.
fn furnish(env: &Env) {
    std::fs::write(env.outside.join("secret.txt"), "secret\n").unwrap();
    std::fs::write(env.outside.join("secret.ipynb"), NOTEBOOK).unwrap();
    std::fs::create_dir_all(env.path("sub")).unwrap();
    let link =
        |target: &Path, name: &str| std::os::unix::fs::symlink(target, env.path(name)).unwrap();
    link(Path::new("/etc"), "etc_link");
    link(&env.outside, "out_link");
    link(&env.outside.join("secret.txt"), "file_link.txt");
    link(&env.outside.join("secret.ipynb"), "file_link.ipynb");
    link(&env.path("loop_b"), "loop_a");
    link(&env.path("loop_a"), "loop_b");
    link(&env.path("loop_self.txt"), "loop_self.txt");
    link(&env.path("loop_self.ipynb"), "loop_self.ipynb");
}

fn escapes(env: &Env, name: &str) -> Vec<String> {
    let extension = Path::new(name).extension().unwrap().to_str().unwrap();
    let mut paths = vec![
        format!("../outside/{name}"),
        format!("sub/../../outside/{name}"),
        env.outside.join(name).display().to_string(),
        format!("out_link/{name}"),
        format!("file_link.{extension}"),
        format!("etc_link/passwd.{extension}"),
        format!("etc_link/toold-escape-test.{extension}"),
        format!("/etc/toold-escape-test.{extension}"),
    ];
    if extension == "txt" {
        paths.push("etc_link/passwd".into());
        paths.push("/etc/passwd".into());
    }
    paths
}

#[tokio::test]
async fn escapes_are_denied_in_workspace_write() {
    let env = Env::with_mode(PermissionLevel::WorkspaceWrite);
    furnish(&env);
    let before = snapshot(&env.outside);
    for shape in shapes() {
        for path in escapes(&env, shape.name) {
            let result = env.call(shape.tool, (shape.input)(&path)).await;
            let message = failed(&result, ErrorKind::PermissionDenied);
            assert!(
                message.contains("danger_full_access"),
                "{} {path}: {message}",
                shape.label
            );
        }
    }
    assert_eq!(snapshot(&env.outside), before, "nothing outside changed");
    assert!(!Path::new("/etc/toold-escape-test.txt").exists());
    assert!(!Path::new("/etc/toold-escape-test.ipynb").exists());
}

#[tokio::test]
async fn loops_and_bad_strings_are_validation_errors() {
    let env = Env::new();
    furnish(&env);
    for shape in shapes() {
        let extension = Path::new(shape.name).extension().unwrap().to_str().unwrap();
        for (path, needle) in [
            (format!("loop_a/x.{extension}"), "symlink loop"),
            (format!("loop_self.{extension}"), "symlink loop"),
            (format!("nul\u{0}.{extension}"), "NUL"),
            (String::new(), "is empty"),
        ] {
            let result = env.call(shape.tool, (shape.input)(&path)).await;
            let message = failed(&result, ErrorKind::Validation);
            assert!(
                message.contains(needle),
                "{} {path:?}: {message}",
                shape.label
            );
        }
    }
}

/// A hook that, before the first call runs, replaces the directory `from` with a symlink to
/// `to`: the path was inside when authorised and leads outside when executed. The paths are
/// set once the environment (and so the workspace) exists.
#[derive(Default)]
struct SwapHook {
    paths: OnceLock<(PathBuf, PathBuf)>,
    done: AtomicBool,
}

#[async_trait]
impl ToolHook for SwapHook {
    fn name(&self) -> &str {
        "swap"
    }

    fn matches(&self, _tool: &str) -> bool {
        true
    }

    async fn pre_tool_use(&self, _event: &HookEvent) -> PreToolUseOutcome {
        if let Some((from, to)) = self.paths.get()
            && !self.done.swap(true, Ordering::SeqCst)
        {
            std::fs::rename(from, from.with_extension("old")).unwrap();
            std::os::unix::fs::symlink(to, from).unwrap();
        }
        PreToolUseOutcome::default()
    }
}

#[tokio::test]
async fn a_symlink_swapped_after_the_check_is_refused() {
    for shape in shapes() {
        let hook = Arc::new(SwapHook::default());
        let env = Env::build(PermissionLevel::WorkspaceWrite, vec![hook.clone()]);
        let swap = env.path("swap");
        std::fs::create_dir_all(&swap).unwrap();
        for dir in [&swap, &env.outside] {
            std::fs::write(dir.join("secret.txt"), "secret\n").unwrap();
            std::fs::write(dir.join("secret.ipynb"), NOTEBOOK).unwrap();
        }
        hook.paths.set((swap.clone(), env.outside.clone())).unwrap();
        let before = snapshot(&env.outside);
        let path = format!("swap/{}", shape.name);
        let result = env.call(shape.tool, (shape.input)(&path)).await;
        assert!(
            hook.done.load(Ordering::SeqCst),
            "{}: the hook ran",
            shape.label
        );
        let message = failed(&result, ErrorKind::Validation);
        assert!(
            message.contains("outside the workspace"),
            "{}: {message}",
            shape.label
        );
        assert!(
            !message.contains("secret\n"),
            "{}: nothing read",
            shape.label
        );
        assert_eq!(
            snapshot(&env.outside),
            before,
            "{}: nothing outside changed",
            shape.label
        );
    }
}

#[tokio::test]
async fn danger_full_access_reaches_outside() {
    let env = Env::with_mode(PermissionLevel::DangerFullAccess);
    furnish(&env);
    let outside = env.outside.join("secret.txt");
    let read = env
        .call("read_file", json!({"file_path": "../outside/secret.txt"}))
        .await;
    assert_eq!(ok(&read), "     1\tsecret\n");
    assert!(env.session.file_state(&outside).is_some());
    let etc = env
        .call("read_file", json!({"file_path": "etc_link/passwd"}))
        .await;
    assert!(ok(&etc).contains("root:"));
    let view = env
        .call(
            "str_replace_based_edit_tool",
            json!({"command": "view", "path": outside}),
        )
        .await;
    assert!(ok(&view).ends_with("     1\tsecret\n"));
    let edit = env
        .call("edit_file", json!({"file_path": "out_link/secret.txt", "old_string": "secret", "new_string": "shared"}))
        .await;
    ok(&edit);
    assert_eq!(std::fs::read_to_string(&outside).unwrap(), "shared\n");
    let created = env.outside.join("made/here.txt");
    ok(&env
        .call("write_file", json!({"file_path": created, "content": "x"}))
        .await);
    assert_eq!(std::fs::read_to_string(created).unwrap(), "x");
}

#[tokio::test]
async fn read_only_mode_reads_inside_only_and_offers_no_writers() {
    let env = Env::with_mode(PermissionLevel::ReadOnly);
    furnish(&env);
    env.put("inside.txt", "in\n");
    ok(&env
        .call("read_file", json!({"file_path": "inside.txt"}))
        .await);
    let outside = env
        .call("read_file", json!({"file_path": "../outside/secret.txt"}))
        .await;
    failed(&outside, ErrorKind::PermissionDenied);
    let editor_write = env
        .call(
            "str_replace_based_edit_tool",
            json!({"command": "create", "path": "new.txt", "file_text": "x"}),
        )
        .await;
    failed(&editor_write, ErrorKind::PermissionDenied);
    // Not offered (the mode keeps them out of the pool), and a call says why (issue 16).
    for tool in ["write_file", "edit_file", "notebook_edit"] {
        let result = env.call(tool, json!({})).await;
        failed(&result, ErrorKind::PermissionDenied);
        assert!(result.output.contains("read_only"), "{}", result.output);
    }
    assert!(!env.path("new.txt").exists());
}
