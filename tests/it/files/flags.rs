//! What the file tools declare: names and aliases, and the input-dependent flags
//! (read-only, concurrency-safe, destructive, required permission) evaluated on real paths.
//! Also what those flags do in a batch: reads share a parallel group, changes run in order
//! and see each other's cache updates.

use std::path::PathBuf;

use serde_json::{Value, json};
use toold::permission::PermissionLevel::{self, DangerFullAccess, ReadOnly, WorkspaceWrite};
use toold::registry::ToolFormat;
use toold::session::{SessionConfig, SessionState};

use crate::files::harness::{Env, ok, registry};

#[test]
fn names_aliases_and_fixed_metadata() {
    let registry = registry();
    for (name, alias) in [
        ("read_file", Some("Read")),
        ("write_file", Some("Write")),
        ("edit_file", Some("Edit")),
        ("notebook_edit", Some("NotebookEdit")),
        ("str_replace_based_edit_tool", None),
    ] {
        let tool = registry
            .get(name)
            .unwrap_or_else(|| panic!("{name} is registered"));
        let spec = tool.spec();
        assert_eq!(
            spec.aliases,
            alias.into_iter().map(String::from).collect::<Vec<_>>()
        );
        if let Some(alias) = alias {
            assert_eq!(registry.canonical_name(alias), Some(name));
        }
        assert_eq!(
            spec.input_schema["additionalProperties"],
            json!(false),
            "{name}"
        );
        assert!(spec.description.len() > 200, "{name} describes itself");
        assert!(!spec.open_world, "{name}");
        let definition = toold::registry::definition(tool, ToolFormat::Anthropic);
        assert_eq!(definition["name"], json!(name));
    }
    let read = registry.get("read_file").unwrap().spec();
    assert_eq!(read.max_result_size_chars, None);
    assert!(read.idempotent);
}

struct Flags {
    read_only: bool,
    concurrency_safe: bool,
    destructive: bool,
    permission: PermissionLevel,
}

const fn flags(
    read_only: bool,
    concurrency_safe: bool,
    destructive: bool,
    permission: PermissionLevel,
) -> Flags {
    Flags {
        read_only,
        concurrency_safe,
        destructive,
        permission,
    }
}

#[test]
fn input_dependent_flags() {
    let dir = tempfile::tempdir().unwrap();
    let ws: PathBuf = dir.path().canonicalize().unwrap().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    std::fs::write(ws.join("exists.txt"), "x").unwrap();
    std::os::unix::fs::symlink(ws.join("loop"), ws.join("loop")).unwrap();
    let session = std::sync::Arc::new(SessionState::new(SessionConfig::new("s", &ws)));
    // The permission an input needs is judged in its call's context.
    let ctx = toold::tool::ToolContext::detached(session.clone());
    let editor = |command: &str, path: &str| json!({"command": command, "path": path});
    let cases: Vec<(&str, Value, Flags)> = vec![
        (
            "read_file",
            json!({"file_path": "exists.txt"}),
            flags(true, true, false, ReadOnly),
        ),
        (
            "read_file",
            json!({"file_path": "/etc/passwd"}),
            flags(true, true, false, DangerFullAccess),
        ),
        (
            "read_file",
            json!({"file_path": "loop/x"}),
            flags(true, true, false, DangerFullAccess),
        ),
        (
            "write_file",
            json!({"file_path": "new.txt", "content": ""}),
            flags(false, false, false, WorkspaceWrite),
        ),
        (
            "write_file",
            json!({"file_path": "exists.txt", "content": ""}),
            flags(false, false, true, WorkspaceWrite),
        ),
        (
            "write_file",
            json!({"file_path": "../x", "content": ""}),
            flags(false, false, false, DangerFullAccess),
        ),
        (
            "write_file",
            json!({"file_path": "loop/x", "content": ""}),
            flags(false, false, true, DangerFullAccess),
        ),
        (
            "edit_file",
            json!({"file_path": "exists.txt", "old_string": "x", "new_string": "y"}),
            flags(false, false, false, WorkspaceWrite),
        ),
        (
            "notebook_edit",
            json!({"notebook_path": "n.ipynb", "cell_id": "a", "new_source": ""}),
            flags(false, false, false, WorkspaceWrite),
        ),
        (
            "notebook_edit",
            json!({"notebook_path": "n.ipynb", "cell_id": "a", "new_source": "", "edit_mode": "delete"}),
            flags(false, false, true, WorkspaceWrite),
        ),
        (
            "str_replace_based_edit_tool",
            editor("view", "exists.txt"),
            flags(true, true, false, ReadOnly),
        ),
        (
            "str_replace_based_edit_tool",
            editor("view", "/etc"),
            flags(true, true, false, DangerFullAccess),
        ),
        (
            "str_replace_based_edit_tool",
            editor("create", "new.txt"),
            flags(false, false, false, WorkspaceWrite),
        ),
        (
            "str_replace_based_edit_tool",
            editor("create", "exists.txt"),
            flags(false, false, true, WorkspaceWrite),
        ),
        (
            "str_replace_based_edit_tool",
            editor("str_replace", "exists.txt"),
            flags(false, false, false, WorkspaceWrite),
        ),
        (
            "str_replace_based_edit_tool",
            editor("insert", "/tmp/x"),
            flags(false, false, false, DangerFullAccess),
        ),
        // Unclassifiable input fails closed.
        (
            "str_replace_based_edit_tool",
            json!({"path": "exists.txt"}),
            flags(false, false, true, DangerFullAccess),
        ),
    ];
    let registry = registry();
    for (name, input, expected) in cases {
        let spec = registry.get(name).unwrap().spec();
        let actual = (
            spec.is_read_only(&input, &session),
            spec.is_concurrency_safe(&input, &session),
            spec.is_destructive(&input, &session),
            spec.required_permission(&input, &ctx),
        );
        let wanted = (
            expected.read_only,
            expected.concurrency_safe,
            expected.destructive,
            expected.permission,
        );
        assert_eq!(actual, wanted, "{name} {input}");
    }
}

#[tokio::test]
async fn a_batch_reads_together_and_changes_in_order() {
    let env = Env::new();
    env.put("a.txt", "1\n");
    env.put("b.txt", "2\n");
    let results = env
        .batch(vec![
            ("read_file", json!({"file_path": "a.txt"})),
            ("read_file", json!({"file_path": "b.txt"})),
            (
                "edit_file",
                json!({"file_path": "a.txt", "old_string": "1", "new_string": "one"}),
            ),
            (
                "edit_file",
                json!({"file_path": "a.txt", "old_string": "one", "new_string": "uno"}),
            ),
            ("Write", json!({"file_path": "b.txt", "content": "dos\n"})),
            ("Read", json!({"file_path": "a.txt"})),
        ])
        .await;
    for result in &results {
        ok(result);
    }
    assert_eq!(results[5].output, "     1\tuno\n");
    assert_eq!(env.text("b.txt"), "dos\n");
}
