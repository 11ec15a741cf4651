//! `str_replace_based_edit_tool`: each command's behaviour, its bad input, and the file-state
//! cache it shares with the other file tools.

use serde_json::{Value, json};
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok};

const TOOL: &str = "str_replace_based_edit_tool";

#[tokio::test]
async fn view_files_and_directories() {
    let env = Env::new();
    let file = env.put("src/main.py", "import os\n\nprint(os.getcwd())\n");
    env.put("src/pkg/mod.py", "");
    env.put("src/pkg/deeper/hidden_by_depth.py", "");
    env.put("src/.secret", "");
    env.put(".git/HEAD", "");
    env.put("README.md", "# r\n");
    std::os::unix::fs::symlink(&env.outside, env.path("src/link")).unwrap();
    let header = format!(
        "Here's the result of running `cat -n` on {}:\n",
        file.display()
    );
    let cases: Vec<(Value, String)> = vec![
        (
            json!({"command": "view", "path": "src/main.py"}),
            format!("{header}     1\timport os\n     2\t\n     3\tprint(os.getcwd())\n"),
        ),
        (
            json!({"command": "view", "path": "src/main.py", "view_range": [2, 3]}),
            format!("{header}     2\t\n     3\tprint(os.getcwd())\n\n[showing lines 2-3 of 3]"),
        ),
        (
            json!({"command": "view", "path": "src/main.py", "view_range": [1, 1]}),
            format!(
                "{header}     1\timport os\n\n[showing lines 1-1 of 3; 2 more lines remain: view with view_range starting at 2 to read on]"
            ),
        ),
        (
            json!({"command": "view", "path": "src/main.py", "view_range": [3, -1]}),
            format!("{header}     3\tprint(os.getcwd())\n\n[showing lines 3-3 of 3]"),
        ),
        (
            json!({"command": "view", "path": "src/main.py", "view_range": [2, 99]}),
            format!("{header}     2\t\n     3\tprint(os.getcwd())\n\n[showing lines 2-3 of 3]"),
        ),
    ];
    for (input, expected) in cases {
        let result = env.call(TOOL, input.clone()).await;
        assert_eq!(ok(&result), expected, "{input}");
    }
    let ws = env.workspace.display();
    let listing = env
        .call(TOOL, json!({"command": "view", "path": "."}))
        .await;
    assert_eq!(
        ok(&listing),
        format!(
            "Here's the files and directories up to 2 levels deep in {ws}, excluding hidden items:\n\
             {ws}/\n{ws}/README.md\n{ws}/src/\n{ws}/src/link\n{ws}/src/main.py\n{ws}/src/pkg/\n"
        )
    );
    let empty = env.put("empty.txt", "");
    let viewed = env
        .call(TOOL, json!({"command": "view", "path": "empty.txt"}))
        .await;
    assert_eq!(
        ok(&viewed),
        format!(
            "Here's the result of running `cat -n` on {}:\n[the file is empty]",
            empty.display()
        )
    );
}

#[tokio::test]
async fn create_insert_and_str_replace() {
    let env = Env::new();
    let created = env
        .call(
            TOOL,
            json!({"command": "create", "path": "notes/todo.md", "file_text": "- a\n- c\n"}),
        )
        .await;
    assert!(ok(&created).starts_with("Created"), "{}", created.output);
    assert_eq!(env.text("notes/todo.md"), "- a\n- c\n");

    // The session created it, so it may change it without viewing it.
    let inserted = env
        .call(TOOL, json!({"command": "insert", "path": "notes/todo.md", "insert_line": 1, "new_str": "- b"}))
        .await;
    let path = env.path("notes/todo.md");
    assert_eq!(
        ok(&inserted),
        format!(
            "The file {} has been edited. Here's the result of running `cat -n` on a snippet of the edited file:\n     1\t- a\n     2\t- b\n     3\t- c\nReview the changes and make sure they are as expected. Edit the file again if necessary.",
            path.display()
        )
    );
    let top = env
        .call(TOOL, json!({"command": "insert", "path": "notes/todo.md", "insert_line": 0, "insert_text": "# Todo\n"}))
        .await;
    ok(&top);
    let end = env
        .call(TOOL, json!({"command": "insert", "path": "notes/todo.md", "insert_line": 4, "new_str": "- d", "insert_text": "- d"}))
        .await;
    ok(&end);
    assert_eq!(env.text("notes/todo.md"), "# Todo\n- a\n- b\n- c\n- d\n");

    let replaced = env
        .call(TOOL, json!({"command": "str_replace", "path": "notes/todo.md", "old_str": "- b\n", "new_str": "- B\n- B2\n"}))
        .await;
    let text = ok(&replaced);
    assert!(text.contains("     3\t- B\n     4\t- B2\n"), "{text}");
    assert_eq!(replaced.metadata["first_line"], json!(3));
    let deleted = env
        .call(
            TOOL,
            json!({"command": "str_replace", "path": "notes/todo.md", "old_str": "- B2\n"}),
        )
        .await;
    ok(&deleted);
    assert_eq!(env.text("notes/todo.md"), "# Todo\n- a\n- B\n- c\n- d\n");

    // create over an existing file follows write_file's rule.
    env.put("exists.txt", "old\n");
    let refused = env
        .call(
            TOOL,
            json!({"command": "create", "path": "exists.txt", "file_text": "new\n"}),
        )
        .await;
    assert!(failed(&refused, ErrorKind::Validation).contains("the view command"));
    ok(&env
        .call(TOOL, json!({"command": "view", "path": "exists.txt"}))
        .await);
    ok(&env
        .call(
            TOOL,
            json!({"command": "create", "path": "exists.txt", "file_text": "new\n"}),
        )
        .await);
    assert_eq!(env.text("exists.txt"), "new\n");
}

#[tokio::test]
async fn the_cache_is_shared_with_the_other_file_tools() {
    let env = Env::new();
    env.put("a.txt", "alpha\n");
    env.put("b.txt", "beta\n");
    ok(&env.call("read_file", json!({"file_path": "a.txt"})).await);
    ok(&env
        .call(TOOL, json!({"command": "str_replace", "path": "a.txt", "old_str": "alpha", "new_str": "ALPHA"}))
        .await);
    ok(&env
        .call(TOOL, json!({"command": "view", "path": "b.txt"}))
        .await);
    ok(&env
        .call(
            "edit_file",
            json!({"file_path": "b.txt", "old_string": "beta", "new_string": "BETA"}),
        )
        .await);
    // Each tool's write keeps the other's view current.
    ok(&env
        .call(
            "edit_file",
            json!({"file_path": "a.txt", "old_string": "ALPHA", "new_string": "A"}),
        )
        .await);
    ok(&env
        .call(
            TOOL,
            json!({"command": "insert", "path": "b.txt", "insert_line": 1, "new_str": "more"}),
        )
        .await);
    assert_eq!(env.text("a.txt"), "A\n");
    assert_eq!(env.text("b.txt"), "BETA\nmore\n");
}

#[tokio::test]
async fn bad_input() {
    let env = Env::new();
    env.put("f.txt", "one\ntwo\n");
    std::fs::create_dir_all(env.path("dir")).unwrap();
    ok(&env
        .call(TOOL, json!({"command": "view", "path": "f.txt"}))
        .await);
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        (
            "unknown command",
            json!({"command": "undo_edit", "path": "f.txt"}),
            ErrorKind::InputValidation,
            "undo_edit",
        ),
        (
            "missing command",
            json!({"path": "f.txt"}),
            ErrorKind::InputValidation,
            "command",
        ),
        (
            "missing path",
            json!({"command": "view"}),
            ErrorKind::InputValidation,
            "path",
        ),
        (
            "unknown field",
            json!({"command": "view", "path": "f.txt", "max": 1}),
            ErrorKind::InputValidation,
            "max",
        ),
        (
            "view_range of one number",
            json!({"command": "view", "path": "f.txt", "view_range": [1]}),
            ErrorKind::InputValidation,
            "view_range",
        ),
        (
            "view_range of text",
            json!({"command": "view", "path": "f.txt", "view_range": ["1", "2"]}),
            ErrorKind::InputValidation,
            "integer",
        ),
        (
            "view_range from 0",
            json!({"command": "view", "path": "f.txt", "view_range": [0, 2]}),
            ErrorKind::Validation,
            "view_range must be",
        ),
        (
            "view_range backwards",
            json!({"command": "view", "path": "f.txt", "view_range": [2, 1]}),
            ErrorKind::Validation,
            "view_range must be",
        ),
        (
            "view_range past the end",
            json!({"command": "view", "path": "f.txt", "view_range": [5, -1]}),
            ErrorKind::Validation,
            "past the end",
        ),
        (
            "view_range on a directory",
            json!({"command": "view", "path": "dir", "view_range": [1, 2]}),
            ErrorKind::Validation,
            "is a directory",
        ),
        (
            "view of a missing file",
            json!({"command": "view", "path": "nope"}),
            ErrorKind::Validation,
            "does not exist",
        ),
        (
            "create without file_text",
            json!({"command": "create", "path": "n.txt"}),
            ErrorKind::Validation,
            "file_text is required",
        ),
        (
            "str_replace without old_str",
            json!({"command": "str_replace", "path": "f.txt"}),
            ErrorKind::Validation,
            "old_str is required",
        ),
        (
            "insert without insert_line",
            json!({"command": "insert", "path": "f.txt", "new_str": "x"}),
            ErrorKind::Validation,
            "insert_line is required",
        ),
        (
            "insert without text",
            json!({"command": "insert", "path": "f.txt", "insert_line": 0}),
            ErrorKind::Validation,
            "new_str (or insert_text)",
        ),
        (
            "insert with two texts",
            json!({"command": "insert", "path": "f.txt", "insert_line": 0, "new_str": "a", "insert_text": "b"}),
            ErrorKind::Validation,
            "differ",
        ),
        (
            "negative insert_line",
            json!({"command": "insert", "path": "f.txt", "insert_line": -1, "new_str": "a"}),
            ErrorKind::InputValidation,
            "minimum",
        ),
        (
            "insert_line past the end",
            json!({"command": "insert", "path": "f.txt", "insert_line": 3, "new_str": "a"}),
            ErrorKind::Validation,
            "which has 2 lines",
        ),
        (
            "insert into a missing file",
            json!({"command": "insert", "path": "nope", "insert_line": 0, "new_str": "a"}),
            ErrorKind::Validation,
            "does not exist",
        ),
        (
            "empty path",
            json!({"command": "view", "path": ""}),
            ErrorKind::Validation,
            "path is empty",
        ),
    ];
    for (name, input, kind, needle) in cases {
        let result = env.call(TOOL, input).await;
        let message = failed(&result, kind);
        assert!(message.contains(needle), "{name}: {message}");
    }
    assert_eq!(env.text("f.txt"), "one\ntwo\n");
}
