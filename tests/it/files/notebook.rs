//! `notebook_edit` against golden notebooks written by Python's `json.dumps(nb,
//! sort_keys=True, indent=1, ensure_ascii=False)` (what Jupyter writes): the tool's splice must
//! give exactly the bytes Jupyter would have written for the same change.

use std::path::Path;

use serde_json::{Value, json};
use toold::tool::ErrorKind;

use crate::files::harness::{Env, failed, ok};

const NOTEBOOK: &str = "analysis.ipynb";

fn golden(name: &str) -> String {
    let path = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("tests/it/files/golden/notebook")
        .join(name);
    std::fs::read_to_string(path).unwrap()
}

/// A workspace holding the input notebook, already read by the session.
async fn prepared() -> Env {
    let env = Env::new();
    env.put(NOTEBOOK, golden("input.ipynb"));
    ok(&env.call("read_file", json!({"file_path": NOTEBOOK})).await);
    env
}

#[tokio::test]
async fn edits_match_what_jupyter_writes() {
    let cases: Vec<(&str, Value)> = vec![
        (
            "replace_load.ipynb",
            json!({"cell_id": "load", "new_source": "df = pd.read_parquet(\"data.parquet\")\ndf.head()"}),
        ),
        (
            "replace_intro.ipynb",
            json!({"cell_id": "intro", "new_source": "# Analysis\n\nTabs\tand \"quotes\" and \\\\ backslashes", "edit_mode": "replace"}),
        ),
        (
            "delete_load.ipynb",
            json!({"cell_id": "load", "new_source": "", "edit_mode": "delete"}),
        ),
        (
            "delete_plot.ipynb",
            json!({"cell_id": "plot", "new_source": "", "edit_mode": "delete"}),
        ),
        (
            "delete_intro.ipynb",
            json!({"cell_id": "cell-0", "new_source": "", "edit_mode": "delete"}),
        ),
        (
            "retype_plot.ipynb",
            json!({"cell_id": "plot", "new_source": "A plot goes here", "cell_type": "markdown"}),
        ),
        (
            "insert_after_load.ipynb",
            json!({"cell_id": "load", "new_source": "## Results\nBelow.", "cell_type": "markdown", "edit_mode": "insert"}),
        ),
        (
            "insert_top.ipynb",
            json!({"new_source": "%matplotlib inline", "cell_type": "code", "edit_mode": "insert"}),
        ),
    ];
    for (expected, mut input) in cases {
        let env = prepared().await;
        input["notebook_path"] = json!(NOTEBOOK);
        let result = env.call("notebook_edit", input).await;
        let text = ok(&result);
        let mut expected_text = golden(expected);
        if expected.starts_with("insert") {
            // The new cell's id is random: take it from the output.
            let id = text.split('"').nth(1).unwrap();
            assert_eq!(id.len(), 8, "{text}");
            expected_text = expected_text.replace("@@ID@@", id);
        }
        assert_eq!(env.text(NOTEBOOK), expected_text, "{expected}");
        // The session's own change keeps the cache current: a second edit needs no read.
        let again = env
            .call(
                "NotebookEdit",
                json!({"notebook_path": NOTEBOOK, "cell_id": "cell-0", "new_source": "again"}),
            )
            .await;
        ok(&again);
    }
}

#[tokio::test]
async fn refusals_and_bad_input() {
    let env = prepared().await;
    env.put("plain.json", "{}");
    env.put("broken.ipynb", "{\"cells\": [");
    let cases: Vec<(&str, Value, ErrorKind, &str)> = vec![
        (
            "missing new_source",
            json!({"notebook_path": NOTEBOOK, "cell_id": "load"}),
            ErrorKind::InputValidation,
            "new_source",
        ),
        (
            "bad edit_mode",
            json!({"notebook_path": NOTEBOOK, "cell_id": "load", "new_source": "", "edit_mode": "append"}),
            ErrorKind::InputValidation,
            "append",
        ),
        (
            "bad cell_type",
            json!({"notebook_path": NOTEBOOK, "cell_id": "load", "new_source": "", "cell_type": "raw"}),
            ErrorKind::InputValidation,
            "raw",
        ),
        (
            "cell_id not a string",
            json!({"notebook_path": NOTEBOOK, "cell_id": 1, "new_source": ""}),
            ErrorKind::InputValidation,
            "string",
        ),
        (
            "not a notebook",
            json!({"notebook_path": "plain.json", "cell_id": "a", "new_source": ""}),
            ErrorKind::Validation,
            "not a Jupyter notebook",
        ),
        (
            "replace without cell_id",
            json!({"notebook_path": NOTEBOOK, "new_source": "x"}),
            ErrorKind::Validation,
            "cell_id is required to replace",
        ),
        (
            "delete without cell_id",
            json!({"notebook_path": NOTEBOOK, "new_source": "", "edit_mode": "delete"}),
            ErrorKind::Validation,
            "cell_id is required to delete",
        ),
        (
            "insert without cell_type",
            json!({"notebook_path": NOTEBOOK, "new_source": "x", "edit_mode": "insert"}),
            ErrorKind::Validation,
            "cell_type",
        ),
        (
            "unknown cell",
            json!({"notebook_path": NOTEBOOK, "cell_id": "nope", "new_source": "x"}),
            ErrorKind::Validation,
            "its cells are: intro, load, plot",
        ),
        (
            "cell index out of range",
            json!({"notebook_path": NOTEBOOK, "cell_id": "cell-3", "new_source": "x"}),
            ErrorKind::Validation,
            "no cell \"cell-3\"",
        ),
        (
            "missing notebook",
            json!({"notebook_path": "nope.ipynb", "cell_id": "a", "new_source": ""}),
            ErrorKind::Validation,
            "does not exist",
        ),
        (
            "empty path",
            json!({"notebook_path": "", "cell_id": "a", "new_source": ""}),
            ErrorKind::Validation,
            "empty",
        ),
    ];
    for (name, input, kind, needle) in cases {
        let result = env.call("notebook_edit", input).await;
        let message = failed(&result, kind);
        assert!(message.contains(needle), "{name}: {message}");
    }
    assert_eq!(env.text(NOTEBOOK), golden("input.ipynb"));

    ok(&env
        .call("read_file", json!({"file_path": "broken.ipynb"}))
        .await);
    let broken = env
        .call(
            "notebook_edit",
            json!({"notebook_path": "broken.ipynb", "cell_id": "a", "new_source": ""}),
        )
        .await;
    assert!(failed(&broken, ErrorKind::Validation).contains("is not a notebook"));
}

#[tokio::test]
async fn the_read_rule_applies() {
    let env = Env::new();
    env.put(NOTEBOOK, golden("input.ipynb"));
    let input = json!({"notebook_path": NOTEBOOK, "cell_id": "plot", "new_source": "x"});
    let unread = env.call("notebook_edit", input.clone()).await;
    assert!(failed(&unread, ErrorKind::Validation).contains("has not been read"));
    ok(&env
        .call("read_file", json!({"file_path": NOTEBOOK, "limit": 5}))
        .await);
    env.put(NOTEBOOK, golden("delete_plot.ipynb"));
    let stale = env.call("notebook_edit", input).await;
    assert!(failed(&stale, ErrorKind::Validation).contains("has changed since"));
    assert_eq!(env.text(NOTEBOOK), golden("delete_plot.ipynb"));
}
