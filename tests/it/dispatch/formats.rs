//! Provider formats against golden files: definitions out, calls in, results out.
//!
//! Comparisons are byte-for-byte on pretty-printed JSON, because byte stability is the point
//! (prompt caching). To regenerate after an intended change: `TOOLD_BLESS=1 cargo test
//! --test it dispatch::formats`, then review the diff.

use std::path::PathBuf;

use serde_json::{Value, json};
use toold::permission::PermissionLevel;
use toold::registry::calls::{BatchRequest, format_results};
use toold::registry::schema::contains_ref;
use toold::registry::{ToolFormat, definitions};
use toold::tool::{ToolError, ToolOutput};

use crate::dispatch::harness::*;

fn golden_path(relative: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/golden")
        .join(relative)
}

/// Compares `actual` with the golden file, or writes it when blessing.
fn check_golden(relative: &str, actual: &Value) {
    let path = golden_path(relative);
    let rendered = serde_json::to_string_pretty(actual).unwrap() + "\n";
    if std::env::var_os("TOOLD_BLESS").is_some() {
        std::fs::write(&path, &rendered).unwrap();
        return;
    }
    let expected =
        std::fs::read_to_string(&path).unwrap_or_else(|err| panic!("{}: {err}", path.display()));
    assert_eq!(
        rendered,
        expected,
        "{} differs from its golden file",
        path.display()
    );
}

fn read_golden(relative: &str) -> Value {
    let text = std::fs::read_to_string(golden_path(relative)).unwrap();
    serde_json::from_str(&text).unwrap()
}

/// Three tools that cover the metadata: fixed and input-dependent flags, a `$ref` schema, a
/// strict-compatible schema, an output schema and an alias.
fn golden_harness() -> Harness {
    let lookup = safe_spec("lookup")
        .description("Looks up a record by key.")
        .alias("Lookup")
        .input_schema(json!({
            "type": "object",
            "$defs": {"key": {"type": "string", "description": "record key", "minLength": 1}},
            "properties": {"key": {"$ref": "#/$defs/key"}, "fields": {
                "type": "array", "items": {"$ref": "#/$defs/key"}}},
            "required": ["key"]
        }))
        .output_schema(
            json!({"type": "object", "properties": {"value": {"$ref": "#/$defs/v"}},
            "$defs": {"v": {"type": "string"}}}),
        )
        .idempotent(true)
        .open_world(false);
    let note = unsafe_spec("note")
        .description("Appends a note to the session's notebook.")
        .input_schema(json!({
            "type": "object", "additionalProperties": false,
            "properties": {"text": {"type": "string"}}, "required": ["text"]
        }))
        .permission(PermissionLevel::WorkspaceWrite)
        .destructive(false)
        .max_result_size_chars(None);
    let shout = unsafe_spec("shout")
        .description("Repeats text loudly.")
        .input_schema(json!({"type": "object", "properties": {"text": {"type": "string"}}}))
        .read_only_if(|input, _| Ok(input["text"] != "rm"))
        .concurrency_safe_if(|_, _| Ok(true));
    Harness::builder()
        .tool(tool(lookup, |input, _| async move {
            match input["key"].as_str() {
                Some("missing") => Err(ToolError::Execution("no record \"missing\"".into())),
                Some(key) => Ok(ToolOutput::text(format!("value of {key}"))),
                None => unreachable!("the schema requires a key"),
            }
        }))
        .tool(tool(note, |input, _| async move {
            Ok(ToolOutput::text(format!(
                "noted: {}",
                input["text"].as_str().unwrap_or_default()
            )))
        }))
        .tool(tool(shout, |input, _| async move {
            Ok(ToolOutput::text(
                input["text"].as_str().unwrap_or_default().to_uppercase(),
            ))
        }))
        .build()
}

#[test]
fn definitions_match_their_golden_files_and_contain_no_ref() {
    let h = golden_harness();
    let pool = h.pool();
    for format in ToolFormat::ALL {
        let defs = Value::Array(definitions(&pool, format));
        assert!(!contains_ref(&defs), "{format} definitions contain a $ref");
        check_golden(&format!("definitions/{format}.json"), &defs);
        // Byte-stable: generating twice gives the same bytes.
        let again = Value::Array(definitions(&h.pool(), format));
        assert_eq!(defs.to_string(), again.to_string());
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn each_provider_format_round_trips() {
    for format in ["toold", "anthropic", "openai", "openai_chat"] {
        let h = golden_harness();
        let body = read_golden(&format!("batches/{format}.request.json"));
        let request = BatchRequest::from_json(&body).unwrap_or_else(|e| panic!("{format}: {e}"));
        let mut outcome = h.run(request.calls).await;
        for result in &mut outcome.results {
            result.duration_ms = 0.0; // the only value that differs between runs
        }
        let response = format_results(request.format, "batch_golden", &outcome.results);
        check_golden(&format!("batches/{format}.response.json"), &response);
    }
}
