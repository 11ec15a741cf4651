//! JSON-schema preparation for providers: `$ref`/`$defs` inlining and the OpenAI strict-mode
//! check.
//!
//! Validation uses a tool's schema as written (the validator resolves references itself);
//! what is sent to a model provider is the flattened copy, because several providers reject
//! or ignore `$ref`. A recursive reference cannot be inlined; at the point of recursion it
//! becomes an unconstrained schema with a description saying so, and validation still
//! enforces the full schema.

use serde_json::{Map, Value, json};

/// Why a schema cannot be prepared.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum SchemaError {
    #[error("schema reference \"{0}\" is not local to the schema (only \"#/...\" is supported)")]
    ExternalRef(String),
    #[error("schema reference \"{0}\" points at nothing")]
    DanglingRef(String),
}

/// A copy of `schema` with every local `$ref` replaced by its target and every `$defs` /
/// `definitions` removed.
pub fn inline_refs(schema: &Value) -> Result<Value, SchemaError> {
    let mut stack = Vec::new();
    inline(schema, schema, &mut stack)
}

fn inline(node: &Value, root: &Value, stack: &mut Vec<String>) -> Result<Value, SchemaError> {
    match node {
        Value::Object(map) => {
            if let Some(Value::String(reference)) = map.get("$ref") {
                return inline_reference(reference, map, root, stack);
            }
            let mut out = Map::new();
            for (key, value) in map {
                if key == "$defs" || key == "definitions" {
                    continue;
                }
                out.insert(key.clone(), inline(value, root, stack)?);
            }
            Ok(Value::Object(out))
        }
        Value::Array(items) => items
            .iter()
            .map(|item| inline(item, root, stack))
            .collect::<Result<Vec<_>, _>>()
            .map(Value::Array),
        other => Ok(other.clone()),
    }
}

fn inline_reference(
    reference: &str,
    node: &Map<String, Value>,
    root: &Value,
    stack: &mut Vec<String>,
) -> Result<Value, SchemaError> {
    let Some(pointer) = reference.strip_prefix('#') else {
        return Err(SchemaError::ExternalRef(reference.to_owned()));
    };
    if stack.iter().any(|seen| seen == reference) {
        return Ok(json!({
            "description": format!("recursive reference {reference} (not expanded)")
        }));
    }
    let target = root
        .pointer(pointer)
        .ok_or_else(|| SchemaError::DanglingRef(reference.to_owned()))?;
    stack.push(reference.to_owned());
    let resolved = inline(target, root, stack);
    stack.pop();
    let mut resolved = resolved?;
    // Keywords beside a `$ref` (a description, say) refine the target; they win on conflict.
    if let Value::Object(resolved_map) = &mut resolved {
        for (key, value) in node {
            if key != "$ref" && key != "$defs" && key != "definitions" {
                resolved_map.insert(key.clone(), inline(value, root, stack)?);
            }
        }
    }
    Ok(resolved)
}

/// Keywords OpenAI's strict mode accepts; a schema using anything else is sent with
/// `strict: false`.
const STRICT_KEYWORDS: &[&str] = &[
    "type",
    "properties",
    "required",
    "additionalProperties",
    "items",
    "enum",
    "const",
    "anyOf",
    "description",
    "title",
    "pattern",
    "format",
    "minimum",
    "maximum",
    "exclusiveMinimum",
    "exclusiveMaximum",
    "multipleOf",
    "minItems",
    "maxItems",
];

/// Whether a flattened schema meets OpenAI strict mode's rules: every object lists all its
/// properties as required and forbids additional ones, and only supported keywords appear.
pub fn is_strict_compatible(schema: &Value) -> bool {
    let Value::Object(map) = schema else {
        return false;
    };
    if map
        .keys()
        .any(|key| !STRICT_KEYWORDS.contains(&key.as_str()))
    {
        return false;
    }
    if let Some(Value::Object(properties)) = map.get("properties") {
        let required: Vec<&str> = map
            .get("required")
            .and_then(Value::as_array)
            .map(|r| r.iter().filter_map(Value::as_str).collect())
            .unwrap_or_default();
        let all_required = properties
            .keys()
            .all(|key| required.contains(&key.as_str()));
        if !all_required || map.get("additionalProperties") != Some(&Value::Bool(false)) {
            return false;
        }
        if !properties.values().all(is_strict_compatible) {
            return false;
        }
    } else if map.get("type") == Some(&Value::String("object".into()))
        && map.get("additionalProperties") != Some(&Value::Bool(false))
    {
        return false;
    }
    let items_ok = map.get("items").is_none_or(is_strict_compatible);
    let any_of_ok = map
        .get("anyOf")
        .and_then(Value::as_array)
        .is_none_or(|branches| branches.iter().all(is_strict_compatible));
    items_ok && any_of_ok
}

/// Whether any `$ref` remains anywhere in `value`.
pub fn contains_ref(value: &Value) -> bool {
    match value {
        Value::Object(map) => map.contains_key("$ref") || map.values().any(contains_ref),
        Value::Array(items) => items.iter().any(contains_ref),
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn local_refs_are_inlined_and_defs_dropped() {
        let schema = json!({
            "type": "object",
            "$defs": {
                "pos": {"type": "integer", "minimum": 0},
                "range": {"type": "object", "properties": {
                    "start": {"$ref": "#/$defs/pos"}, "end": {"$ref": "#/$defs/pos"}}}
            },
            "properties": {
                "range": {"$ref": "#/$defs/range", "description": "which lines"},
                "legacy": {"$ref": "#/definitions/old"}
            },
            "definitions": {"old": {"type": "string"}}
        });
        let flat = inline_refs(&schema).unwrap();
        assert!(!contains_ref(&flat));
        assert!(flat.get("$defs").is_none() && flat.get("definitions").is_none());
        assert_eq!(flat["properties"]["range"]["description"], "which lines");
        assert_eq!(
            flat["properties"]["range"]["properties"]["end"]["minimum"],
            0
        );
        assert_eq!(flat["properties"]["legacy"], json!({"type": "string"}));
    }

    #[test]
    fn recursion_stops_with_an_unconstrained_schema() {
        let schema = json!({
            "type": "object",
            "properties": {"tree": {"$ref": "#/$defs/node"}},
            "$defs": {"node": {"type": "object", "properties": {
                "children": {"type": "array", "items": {"$ref": "#/$defs/node"}}}}}
        });
        let flat = inline_refs(&schema).unwrap();
        assert!(!contains_ref(&flat));
        let inner = &flat["properties"]["tree"]["properties"]["children"]["items"];
        assert!(inner["description"].as_str().unwrap().contains("recursive"));
    }

    #[test]
    fn external_and_dangling_refs_are_errors() {
        let external = json!({"properties": {"a": {"$ref": "https://x.org/s.json"}}});
        assert!(matches!(
            inline_refs(&external),
            Err(SchemaError::ExternalRef(_))
        ));
        let dangling = json!({"properties": {"a": {"$ref": "#/$defs/missing"}}});
        assert!(matches!(
            inline_refs(&dangling),
            Err(SchemaError::DanglingRef(_))
        ));
    }

    #[test]
    fn strict_mode_needs_closed_fully_required_objects() {
        let strict = json!({"type": "object", "additionalProperties": false,
            "required": ["a"], "properties": {"a": {"type": "string"}}});
        assert!(is_strict_compatible(&strict));
        let optional = json!({"type": "object", "additionalProperties": false,
            "required": [], "properties": {"a": {"type": "string"}}});
        assert!(!is_strict_compatible(&optional));
        let open = json!({"type": "object", "required": ["a"],
            "properties": {"a": {"type": "string"}}});
        assert!(!is_strict_compatible(&open));
        let unsupported = json!({"type": "object", "additionalProperties": false,
            "required": ["a"], "properties": {"a": {"type": "string", "oneOf": []}}});
        assert!(!is_strict_compatible(&unsupported));
    }
}
