//! `/openapi.json` as served: the document utoipa derives from the routes, made exact where
//! a derive cannot say what the handlers accept, so that the document is a contract a
//! property-based tester (Schemathesis, run by `.ci/run`) can hold the daemon to.
//!
//! Refinements, each mirroring the code that decides:
//! - **Names known only at start-up**: a session rule (`rules.allow|deny|ask`) is documented
//!   as one of this daemon's tool names and aliases, or `bash(words)` / `bash(words:*)` with
//!   plain words. The grammar accepts more (`mcp__…`, path, domain and glob specifiers,
//!   DESIGN §5), each checked against the workspace when the session is made; the document
//!   promises the part that is always valid. `mcp_servers` lists the configured servers,
//!   `providers` the names a provider may take.
//! - **Batch bodies** (`registry::calls`): four shapes told apart by `format`; a toold call
//!   needs a non-empty `id` and `name` and any `input` (a wrong input is the call's own
//!   error, data in a 200); Anthropic, OpenAI and Chat Completions items that are not tool
//!   calls are ignored, so only tool calls have required fields. Envelopes and toold calls
//!   have no members beyond those named (`additionalProperties: false`); provider items may.
//! - **SSE**: a `text/event-stream` response documents one frame (`event`, `id`, `data`, the
//!   data a JSON text), as OpenAPI 3.1 readers take an event stream's schema.
//! - **Observers**: every write under `/v1` may answer 403 (DESIGN §10).
//! - **Links** from a created session to its audit log, and from a batch to its status and
//!   audit rows, so a client (or a stateful tester) can follow the ids.
//! - **The audit log's parameters** (`GET /v1/calls`, `/v1/calls/export`): the words each
//!   takes, RFC 3339 times, `include`'s list.
//! - **`Last-Event-ID`**: a non-negative integer that fits a signed 64-bit seq; `type` of
//!   `/v1/events` one of the event types, or empty.

use serde_json::{Value, json};

use crate::event::EventType;
use crate::service::MAX_NAME_CHARS;

/// What the document names that only the running daemon knows.
pub struct DocumentFacts {
    /// Every tool name and alias.
    pub tool_names: Vec<String>,
    /// The configured MCP servers.
    pub mcp_servers: Vec<String>,
}

/// The document `api` refined with `facts`, as pretty JSON.
pub fn render(api: &utoipa::openapi::OpenApi, facts: &DocumentFacts) -> Result<String, String> {
    let mut document = serde_json::to_value(api).map_err(|err| err.to_string())?;
    refine(&mut document, facts);
    serde_json::to_string_pretty(&document).map_err(|err| err.to_string())
}

fn refine(document: &mut Value, facts: &DocumentFacts) {
    let schemas = &mut document["components"]["schemas"];
    schemas["Rule"] = json!({
        "type": "string",
        "description": "A permission rule (DESIGN §5). Documented: a tool name or alias of \
            this daemon, or bash with plain words (exact, or a prefix ending in :*); the \
            server also accepts mcp__ names and path, domain and glob specifiers.",
        "pattern": rule_pattern(&facts.tool_names),
    });
    // `provider::check_provider_name`: plain, without `__`, not `mcp`, at most 31 characters.
    let provider_name = json!({
        "type": "string",
        "pattern": "^(?!mcp$)(?!.*__)[A-Za-z0-9_-]+$",
        "maxLength": MAX_NAME_CHARS,
    });
    schemas["CreateSessionBody"]["properties"]["providers"]["items"] = provider_name.clone();
    schemas["ProviderRegistrationBody"] = registration_schema(provider_name);
    schemas["ProviderResultBody"] = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["output"],
        "properties": {"output": {"type": "string"}, "is_error": {"type": "boolean"}},
    });
    let mcp_servers = &mut schemas["CreateSessionBody"]["properties"]["mcp_servers"];
    if facts.mcp_servers.is_empty() {
        mcp_servers["maxItems"] = json!(0);
    } else {
        mcp_servers["items"] = json!({"type": "string", "enum": facts.mcp_servers});
    }
    schemas["BatchRequestBody"] = batch_request_schema();
    schemas["SseFrame"] = json!({
        "type": "object",
        "description": "One server-sent event: `event` its type, `id` the event's seq (absent \
            on frames that are not stored events), `data` a JSON text.",
        "required": ["data"],
        "properties": {
            "event": {"type": "string"},
            "id": {"type": "string"},
            "data": {"type": "string", "contentMediaType": "application/json"},
        },
    });
    let Some(paths) = document["paths"].as_object_mut() else {
        return;
    };
    for (path, operations) in paths.iter_mut() {
        let Some(operations) = operations.as_object_mut() else {
            continue;
        };
        for (method, operation) in operations.iter_mut() {
            refine_operation(operation);
            if path.starts_with("/v1/") && method != "get" {
                forbid_observers(operation);
            }
        }
    }
    audit_parameters(paths);
    workspace_media(paths);
    link(
        paths,
        "/v1/sessions",
        "post",
        "201",
        "AuditLog",
        "/v1/calls",
        "get",
        json!({"session": "$response.body#/id"}),
    );
    // Every shape's answer names its batch in a header (only the toold shape has it in the
    // body), so the links follow the header.
    let answered = paths
        .get_mut("/v1/sessions/{id}/batches")
        .and_then(|operations| operations.get_mut("post"))
        .and_then(|operation| operation.get_mut("responses"))
        .and_then(|responses| responses.get_mut("200"));
    if let Some(Value::Object(answered)) = answered {
        answered.insert(
            "headers".into(),
            json!({
                "x-toold-batch-id": {"description": "the batch's id (whole answers)",
                                     "schema": {"type": "string"}},
                "x-toold-replayed": {"description": "`true` when a retry with the batch's \
                                     idempotency key got the stored results",
                                     "schema": {"type": "string", "enum": ["true"]}},
            }),
        );
    }
    let batch_id = "$response.header.x-toold-batch-id";
    link(
        paths,
        "/v1/sessions/{id}/batches",
        "post",
        "200",
        "BatchStatus",
        "/v1/sessions/{id}/batches/{batch_id}",
        "get",
        json!({"id": "$request.path.id", "batch_id": batch_id}),
    );
    link(
        paths,
        "/v1/sessions/{id}/batches",
        "post",
        "200",
        "BatchAudit",
        "/v1/calls",
        "get",
        json!({"session": "$request.path.id", "batch_id": batch_id}),
    );
}

/// The audit log's query parameters as `api::http::audit` parses them: a decision, an error
/// kind, an order, a format are one of their words; `since`/`until` RFC 3339 times;
/// `include` a comma-separated list of `input` and `output`.
fn audit_parameters(paths: &mut serde_json::Map<String, Value>) {
    let kinds: Vec<&str> = crate::tool::ErrorKind::ALL
        .iter()
        .map(|kind| kind.as_str())
        .collect();
    let schemas = [
        (
            "decision",
            json!({"type": "string", "enum": ["allow", "deny"]}),
        ),
        ("error_kind", json!({"type": "string", "enum": kinds})),
        ("since", json!({"type": "string", "format": "date-time"})),
        ("until", json!({"type": "string", "format": "date-time"})),
        ("order", json!({"type": "string", "enum": ["asc", "desc"]})),
        (
            "format",
            json!({"type": "string", "enum": ["ndjson", "csv"]}),
        ),
        (
            "include",
            json!({"type": "string", "pattern": "^(input|output)?(,(input|output))*$"}),
        ),
    ];
    // The export answers NDJSON or, with `format=csv`, CSV: both are documented.
    if let Some(ok) = paths
        .get_mut("/v1/calls/export")
        .and_then(|operations| operations.get_mut("get"))
        .and_then(|operation| operation.get_mut("responses"))
        .and_then(|responses| responses.get_mut("200"))
    {
        ok["content"] = json!({
            "application/x-ndjson": {"schema": {"type": "string"}},
            "text/csv": {"schema": {"type": "string"}},
        });
    }
    for path in ["/v1/calls", "/v1/calls/export"] {
        let parameters = paths
            .get_mut(path)
            .and_then(|operations| operations.get_mut("get"))
            .and_then(|operation| operation.get_mut("parameters"))
            .and_then(Value::as_array_mut);
        for parameter in parameters.into_iter().flatten() {
            if let Some((_, schema)) = schemas.iter().find(|(name, _)| parameter["name"] == *name) {
                parameter["schema"] = schema.clone();
            }
        }
    }
}

/// The workspace endpoints' media: an archive comes as tar or (with `format=tar.gz`) gzip,
/// and an upload's body may be empty (an empty file), which utoipa cannot say.
fn workspace_media(paths: &mut serde_json::Map<String, Value>) {
    let operation = |paths: &mut serde_json::Map<String, Value>, path: &str, method: &str| {
        paths
            .get_mut(path)
            .and_then(|operations| operations.get_mut(method))
            .map(Value::take)
    };
    if let Some(mut get) = operation(paths, "/v1/sessions/{id}/archive", "get") {
        get["responses"]["200"]["content"] = json!({
            "application/x-tar": {"schema": {"type": "string", "format": "binary"}},
            "application/gzip": {"schema": {"type": "string", "format": "binary"}},
        });
        paths["/v1/sessions/{id}/archive"]["get"] = get;
    }
    if let Some(mut put) = operation(paths, "/v1/sessions/{id}/files/{path}", "put") {
        put["requestBody"]["required"] = json!(false);
        paths["/v1/sessions/{id}/files/{path}"]["put"] = put;
    }
}

/// Every write answers an observer 403 (DESIGN §10).
fn forbid_observers(operation: &mut Value) {
    if let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_object_mut)
    {
        responses.entry("403").or_insert_with(|| {
            json!({
                "description": "the caller is an observer: it may read, not change anything",
                "content": {"application/json": {"schema": {"$ref": "#/components/schemas/ErrorBody"}}},
            })
        });
    }
}

/// An OpenAPI link from a response to the operation its ids lead to (what a client, or a
/// stateful tester, does next).
#[allow(clippy::too_many_arguments)]
fn link(
    paths: &mut serde_json::Map<String, Value>,
    path: &str,
    method: &str,
    status: &str,
    name: &str,
    target_path: &str,
    target_method: &str,
    parameters: Value,
) {
    let pointer = target_path.replace('~', "~0").replace('/', "~1");
    let response = paths
        .get_mut(path)
        .and_then(|operations| operations.get_mut(method))
        .and_then(|operation| operation.get_mut("responses"))
        .and_then(|responses| responses.get_mut(status));
    if let Some(Value::Object(response)) = response {
        let links = response.entry("links").or_insert_with(|| json!({}));
        links[name] = json!({
            "operationRef": format!("#/paths/{pointer}/{target_method}"),
            "parameters": parameters,
        });
    }
}

fn refine_operation(operation: &mut Value) {
    // `get_mut`, not indexing: indexing a missing key would insert a null.
    if let Some(responses) = operation
        .get_mut("responses")
        .and_then(Value::as_object_mut)
    {
        for response in responses.values_mut() {
            let stream = response
                .get_mut("content")
                .and_then(|content| content.get_mut("text/event-stream"));
            if let Some(stream) = stream {
                stream["schema"] = json!({"$ref": "#/components/schemas/SseFrame"});
            }
        }
    }
    if let Some(parameters) = operation
        .get_mut("parameters")
        .and_then(Value::as_array_mut)
    {
        for parameter in parameters {
            match (parameter["name"].as_str(), parameter["in"].as_str()) {
                (Some("Last-Event-ID"), Some("header")) => {
                    parameter["schema"] =
                        json!({"type": "integer", "minimum": 0, "maximum": i64::MAX});
                }
                (Some("type"), Some("query")) => {
                    let mut types = vec![""];
                    types.extend(EventType::ALL.iter().map(|t| t.as_str()));
                    parameter["schema"] = json!({"type": "string", "enum": types});
                }
                _ => {}
            }
        }
    }
}

/// A tool name or alias alone, or `bash(words)` / `bash(words:*)` with plain words.
fn rule_pattern(tool_names: &[String]) -> String {
    let names: Vec<String> = tool_names.iter().map(|n| regex_escape(n)).collect();
    let word = r"[A-Za-z0-9._/=-]+";
    format!(
        r"^(?:{names}|bash\({word}(?: {word})*(?::\*)?\))$",
        names = names.join("|")
    )
}

fn regex_escape(text: &str) -> String {
    text.chars()
        .flat_map(|c| {
            let special = r"\.^$|?*+()[]{}".contains(c);
            special
                .then_some('\\')
                .into_iter()
                .chain(std::iter::once(c))
        })
        .collect()
}

/// `POST /v1/sessions/{id}/batches`: exactly what `registry::calls` accepts.
fn batch_request_schema() -> Value {
    let non_empty = json!({"type": "string", "minLength": 1});
    // A tool call of `kind` needs `required` as non-empty strings; other items are ignored.
    let call_item = |kind: &str, required: &[&str]| {
        let properties: serde_json::Map<String, Value> = required
            .iter()
            .map(|key| (key.to_string(), non_empty.clone()))
            .collect();
        json!({
            "if": {"type": "object", "required": ["type"],
                   "properties": {"type": {"const": kind}}},
            "then": {"required": required, "properties": properties},
        })
    };
    json!({
        "description": "One of four shapes, told apart by `format` (absent or null: toold). \
            The answer mirrors the shape. `idempotency_key` (any shape): a retry with the same \
            key and body gets the stored results.",
        "type": "object",
        "properties": {"idempotency_key": {"type": ["string", "null"]}},
        "oneOf": [
            {
                "title": "toold",
                "required": ["calls"],
                "additionalProperties": false,
                "properties": {
                    "format": {"enum": ["toold", null]},
                    "idempotency_key": {},
                    "calls": {"type": "array", "items": {
                        "type": "object",
                        "required": ["id", "name"],
                        "additionalProperties": false,
                        "properties": {"id": non_empty, "name": non_empty, "input": {}},
                    }},
                },
            },
            {
                "title": "anthropic",
                "additionalProperties": false,
                "required": ["format", "content"],
                "properties": {
                    "format": {"const": "anthropic"},
                    "idempotency_key": {},
                    "content": {"type": "array", "items": call_item("tool_use", &["id", "name"])},
                },
            },
            {
                "title": "openai",
                "additionalProperties": false,
                "required": ["format", "output"],
                "properties": {
                    "format": {"const": "openai"},
                    "idempotency_key": {},
                    "output": {"type": "array",
                               "items": call_item("function_call", &["call_id", "name"])},
                },
            },
            {
                "title": "openai_chat",
                "additionalProperties": false,
                "required": ["format", "message"],
                "properties": {
                    "format": {"const": "openai_chat"},
                    "idempotency_key": {},
                    "message": {"type": "object", "properties": {"tool_calls": {
                        "type": ["array", "null"],
                        "items": {
                            "type": "object",
                            // An item of another type is ignored; one typed "function" (or
                            // untyped) is a call.
                            "if": {"required": ["type"], "properties": {"type": {
                                "type": "string", "not": {"const": "function"}}}},
                            "else": {
                                "required": ["id", "function"],
                                "properties": {
                                    "id": non_empty,
                                    "function": {"type": "object", "required": ["name"],
                                                 "properties": {"name": non_empty}},
                                },
                            },
                        },
                    }}},
                },
            },
        ],
    })
}

/// `POST /v1/providers`: exactly what `provider::declare` reads (unset flags take their
/// fail-closed values; a name is at most 31 characters so that `{provider}__{tool}` fits 64).
fn registration_schema(provider_name: Value) -> Value {
    let positive = json!({"type": ["integer", "null"], "minimum": 1,
                          "maximum": u64::MAX});
    let tool = json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["name"],
        "properties": {
            "name": {"type": "string", "pattern": "^[A-Za-z0-9_-]+$",
                     "maxLength": MAX_NAME_CHARS},
            "description": {"type": "string"},
            "input_schema": {"type": ["object", "null"], "required": ["type"],
                             "properties": {"type": {"const": "object"}},
                             "description": "a JSON Schema with \"type\": \"object\" \
                                             (default {\"type\": \"object\"})"},
            "read_only": {"type": "boolean"},
            "concurrency_safe": {"type": "boolean"},
            "destructive": {"type": ["boolean", "null"], "description": "default true"},
            "required_permission": {"enum": ["read_only", "workspace_write",
                                             "danger_full_access", null],
                                    "description": "default danger_full_access"},
            "interrupt_behavior": {"enum": ["cancel", "block", null],
                                   "description": "default block"},
            "max_result_size_chars": positive.clone(),
            "timeout_ms": positive,
        },
    });
    json!({
        "type": "object",
        "additionalProperties": false,
        "required": ["provider", "tools"],
        "properties": {
            "provider": provider_name,
            "tools": {"type": "array", "items": tool, "minItems": 1, "maxItems": 256},
            "global": {"type": "boolean", "description": "in every session's pool (admins only)"},
        },
    })
}
