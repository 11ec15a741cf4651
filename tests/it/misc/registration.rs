//! Every tool of the family is registered with full metadata and valid provider definitions.

use serde_json::{Value, json};
use toold::permission::PermissionLevel;
use toold::registry::{ToolFormat, definitions};
use toold::tool::{ConcurrencyClass, InterruptBehavior};

use crate::misc::harness::Env;

const TOOLS: [&str; 9] = [
    "web_fetch",
    "todo_write",
    "tool_search",
    "sleep",
    "read_result",
    "send_user_message",
    "structured_output",
    "skill",
    "config",
];

#[test]
fn the_family_is_registered_with_its_aliases() {
    let env = Env::new();
    for name in TOOLS {
        assert!(env.registry.get(name).is_some(), "{name}");
    }
    assert_eq!(env.registry.canonical_name("WebFetch"), Some("web_fetch"));
    assert_eq!(env.registry.canonical_name("TodoWrite"), Some("todo_write"));
}

#[test]
fn metadata_is_declared() {
    let env = Env::new();
    let session = &env.session;
    let ctx = toold::tool::ToolContext::detached(env.session.clone());
    for name in TOOLS {
        let spec = env.tool(name).spec().clone();
        assert!(
            spec.description.len() > 80,
            "{name}: describe it for a model"
        );
        let schema = &spec.input_schema;
        assert_eq!(schema["type"], json!("object"), "{name}");
        let closed = schema["additionalProperties"] == json!(false);
        assert_eq!(
            closed,
            name != "structured_output",
            "{name}: additionalProperties"
        );
        if let Some(properties) = schema["properties"].as_object() {
            for (field, property) in properties {
                assert!(
                    property["description"].is_string(),
                    "{name}.{field} has no description"
                );
            }
        }
        let example = json!({});
        assert!(!spec.is_destructive(&example, session), "{name}");
        assert_eq!(
            spec.required_permission(&example, &ctx),
            PermissionLevel::ReadOnly,
            "{name}"
        );
        assert_eq!(spec.interrupt_behavior, InterruptBehavior::Cancel, "{name}");
        assert_eq!(spec.open_world, name == "web_fetch", "{name}");
        assert!(!spec.should_defer, "{name}");
    }
    let spec = |name: &str| env.tool(name).spec().clone();
    assert!(spec("send_user_message").requires_user_interaction);
    assert_eq!(spec("read_result").max_result_size_chars, None);
    assert_eq!(spec("web_fetch").max_result_size_chars, Some(100_000));
    assert_eq!(
        spec("todo_write").concurrency_class,
        ConcurrencyClass::WriteExclusive
    );
    for name in [
        "web_fetch",
        "sleep",
        "read_result",
        "structured_output",
        "tool_search",
    ] {
        assert!(
            spec(name).is_concurrency_safe(&json!({}), session),
            "{name}"
        );
    }
    for name in ["todo_write", "send_user_message"] {
        assert!(
            !spec(name).is_concurrency_safe(&json!({}), session),
            "{name}"
        );
    }
    let search = spec("tool_search");
    assert!(search.is_read_only(&json!({"query": "slack"}), session));
    assert!(!search.is_read_only(&json!({"query": "select:a"}), session));
}

#[test]
fn provider_definitions_are_generated() {
    let env = Env::new();
    let pool = env.pool();
    for format in [
        ToolFormat::Anthropic,
        ToolFormat::OpenAi,
        ToolFormat::OpenAiChat,
        ToolFormat::Mcp,
    ] {
        let defs: Vec<Value> = definitions(&pool, format);
        let text = serde_json::to_string(&defs).unwrap();
        for name in TOOLS.iter().filter(|n| **n != "skill") {
            assert!(text.contains(&format!("\"{name}\"")), "{format:?}: {name}");
        }
    }
}
