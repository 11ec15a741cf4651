//! Unit tests of the notebook splicing on small, unusual notebooks (the nbformat-style golden
//! files are exercised through the tool in `tests/it/files/notebook.rs`).

use std::path::Path;

use super::*;

fn cells(text: &str) -> Vec<Value> {
    let value: Value = serde_json::from_str(text).unwrap();
    value["cells"].as_array().unwrap().clone()
}

#[test]
fn a_one_line_notebook_stays_on_one_line() {
    let text = r#"{"cells":[{"cell_type":"code","execution_count":1,"metadata":{},"outputs":[{"x":1}],"source":"a = 1"}],"nbformat":4,"nbformat_minor":4}"#;
    let notebook = Notebook::parse(text).unwrap();
    assert!(!notebook.with_ids);
    let replaced = notebook.replace(0, "b = 2\n", None).unwrap();
    assert_eq!(
        replaced,
        r#"{"cells":[{"cell_type":"code","execution_count":null,"metadata":{},"outputs":[],"source":"b = 2\n"}],"nbformat":4,"nbformat_minor":4}"#
    );
    let (inserted, id) = notebook.insert(1, "markdown", "# t");
    assert_eq!(id, "cell-1");
    assert!(!inserted.contains('\n'));
    let after = cells(&inserted);
    assert_eq!(after.len(), 2);
    assert_eq!(
        after[1],
        json!({"cell_type": "markdown", "metadata": {}, "source": ["# t"]})
    );
    assert_eq!(
        notebook.delete(0).unwrap(),
        r#"{"cells":[],"nbformat":4,"nbformat_minor":4}"#
    );
}

#[test]
fn an_empty_cell_list_gets_its_first_cell_in_the_file_style() {
    let text =
        "{\n \"cells\": [],\n \"metadata\": {},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}\n";
    let notebook = Notebook::parse(text).unwrap();
    let (inserted, id) = notebook.insert(0, "code", "x");
    assert_eq!(id.len(), 8);
    let expected = format!(
        "{{\n \"cells\": [\n  {{\n   \"cell_type\": \"code\",\n   \"execution_count\": null,\n   \"id\": \"{id}\",\n   \"metadata\": {{}},\n   \"outputs\": [],\n   \"source\": [\n    \"x\"\n   ]\n  }}\n ],\n \"metadata\": {{}},\n \"nbformat\": 4,\n \"nbformat_minor\": 5\n}}\n"
    );
    assert_eq!(inserted, expected);
    let back = Notebook::parse(&inserted).unwrap();
    assert_eq!(back.delete(0).unwrap(), text);
}

#[test]
fn cells_are_found_by_id_or_position() {
    let text = r#"{"cells":[{"cell_type":"code","id":"a","source":[]},{"cell_type":"code","source":[]}],"nbformat":4,"nbformat_minor":5}"#;
    let notebook = Notebook::parse(text).unwrap();
    let path = Path::new("/n.ipynb");
    assert_eq!(notebook.find("a", path).unwrap(), 0);
    assert_eq!(notebook.find("cell-1", path).unwrap(), 1);
    let err = notebook.find("cell-2", path).unwrap_err().to_string();
    assert!(
        err.contains("no cell \"cell-2\"") && err.contains("a, cell-1"),
        "{err}"
    );
}

#[test]
fn not_notebooks_are_refused() {
    for (text, problem) in [
        ("[]", "no \"cells\" array"),
        ("{\"cells\": {}}", "no \"cells\" array"),
        ("{\"cells\": [", "EOF"),
    ] {
        let err = Notebook::parse(text).err().unwrap();
        assert!(err.contains(problem), "{text}: {err}");
    }
    let no_source = r#"{"cells":[{"cell_type":"code"}]}"#;
    let err = Notebook::parse(no_source)
        .unwrap()
        .replace(0, "x", None)
        .unwrap_err();
    assert!(err.contains("no source"), "{err}");
}

#[test]
fn sources_split_like_nbformat() {
    assert_eq!(source_value("a\nb\n", false), json!(["a\n", "b\n"]));
    assert_eq!(source_value("a\nb", false), json!(["a\n", "b"]));
    assert_eq!(source_value("", false), json!([]));
    assert_eq!(source_value("a\nb", true), json!("a\nb"));
    assert_eq!(indent_unit("{\n  \"a\": 1\n}"), Some("  ".to_owned()));
    assert_eq!(indent_unit("{\"a\": 1}"), None);
}
