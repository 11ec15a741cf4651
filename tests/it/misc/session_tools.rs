//! Tools that change the session: `todo_write`, `config` and `tool_search`, run detached and
//! through a dispatcher that applies their updates.

use serde_json::{Value, json};
use toold::tool::{ContextUpdate, ErrorKind, ToolContext};
use toold::tools::{RUNTIME_SETTINGS, runtime_setting_u64};

use crate::misc::harness::{DeferredEcho, Env, EnvOptions, validation_message};

fn todo(content: &str, status: &str) -> Value {
    json!({"content": content, "status": status, "activeForm": format!("Doing {content}")})
}

#[tokio::test]
async fn todo_write_replaces_the_list_whole() {
    let env = Env::new();
    let first = json!([
        todo("a", "completed"),
        todo("b", "in_progress"),
        todo("c", "pending")
    ]);
    let result = env.call("TodoWrite", json!({"todos": first})).await;
    assert!(!result.is_error, "{}", result.output);
    assert!(
        result.output.starts_with(
            "Task list updated: 3 tasks (1 completed, 1 in progress, 1 pending). Now: Doing b."
        ),
        "{}",
        result.output
    );
    assert_eq!(env.session.todos(), first);

    let second = json!([todo("c", "pending")]);
    let result = env.call("todo_write", json!({"todos": second})).await;
    assert!(
        result.output.contains("mark the next one in_progress"),
        "{}",
        result.output
    );
    assert_eq!(env.session.todos(), second);

    let result = env.call("todo_write", json!({"todos": []})).await;
    assert!(
        result.output.starts_with("Task list updated: 0 tasks"),
        "{}",
        result.output
    );
    assert_eq!(env.session.todos(), json!([]));
}

#[tokio::test]
async fn todo_write_returns_its_update_when_detached() {
    let env = Env::new();
    let list = json!([todo("x", "pending")]);
    let output = env.run("todo_write", json!({"todos": list})).await.unwrap();
    assert_eq!(
        output.context_updates,
        vec![ContextUpdate::Todos {
            todos: list.clone()
        }]
    );
    assert_eq!(output.structured, Some(json!({"todos": list})));
    // Detached runs leave the session alone: applying is the dispatcher's job.
    assert_eq!(env.session.todos(), Value::Null);
}

#[tokio::test]
async fn todo_write_refuses_bad_lists() {
    let env = Env::new();
    let schema_errors = [
        json!({}),
        json!({"todos": "x"}),
        json!({"todos": [{"content": "a", "status": "pending"}]}),
        json!({"todos": [todo("a", "done")]}),
        json!({"todos": [{"content": "", "status": "pending", "activeForm": "A"}]}),
        json!({"todos": [{"content": "a", "status": "pending", "activeForm": "A", "id": 1}]}),
        json!({"todos": (0..201).map(|i| todo(&i.to_string(), "pending")).collect::<Vec<_>>()}),
        json!({"todos": [{"content": "a".repeat(2_001), "status": "pending", "activeForm": "A"}]}),
    ];
    for input in schema_errors {
        let result = env.call("todo_write", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}: {}",
            result.output
        );
    }
    let two = env
        .call(
            "todo_write",
            json!({"todos": [todo("a", "in_progress"), todo("b", "in_progress")]}),
        )
        .await;
    assert_eq!(two.error_kind, Some(ErrorKind::Validation));
    assert!(
        two.output
            .contains("at most one task may be in_progress, got 2: todos[0] \"a\", todos[1] \"b\""),
        "{}",
        two.output
    );
    assert_eq!(
        env.session.todos(),
        Value::Null,
        "a refused list changes nothing"
    );

    let semantic = [
        (
            json!({"todos": [{"content": "  ", "status": "pending", "activeForm": "A"}]}),
            "todos[0].content",
        ),
        (
            json!({"todos": [{"content": "a", "status": "pending", "activeForm": "\n"}]}),
            "todos[0].activeForm",
        ),
        (json!({"todos": [todo("a", "done")]}), "is not one of"),
        (json!({"todos": {"a": 1}}), "must be an array"),
    ];
    for (input, expected) in semantic {
        let message = validation_message(env.run("todo_write", input.clone()).await);
        assert!(message.contains(expected), "{input}: {message}");
    }
}

#[tokio::test]
async fn config_reads_defaults_and_sets_values() {
    let env = Env::new();
    let read = env
        .call("config", json!({"setting": "bash_default_timeout_ms"}))
        .await;
    assert!(
        read.output
            .starts_with("bash_default_timeout_ms = 120000 (default;"),
        "{}",
        read.output
    );
    assert_eq!(
        read.structured,
        Some(json!({"setting": "bash_default_timeout_ms", "value": 120000}))
    );

    let set = env
        .call(
            "config",
            json!({"setting": "bash_default_timeout_ms", "value": 60000}),
        )
        .await;
    assert_eq!(
        set.output,
        "bash_default_timeout_ms set to 60000 (was 120000)"
    );
    assert_eq!(
        env.session.runtime_setting("bash_default_timeout_ms"),
        Some(json!(60000))
    );
    assert_eq!(
        runtime_setting_u64(&env.session, "bash_default_timeout_ms"),
        Some(60000)
    );

    // A string holding an integer is accepted; a read in the same batch after a set sees it.
    let batch = env
        .batch(&[
            (
                "config",
                json!({"setting": "tool_search_max_results", "value": " 7 "}),
            ),
            ("config", json!({"setting": "tool_search_max_results"})),
        ])
        .await;
    assert_eq!(
        batch.results[0].output,
        "tool_search_max_results set to 7 (was 5)"
    );
    assert!(
        batch.results[1]
            .output
            .starts_with("tool_search_max_results = 7 (set in this session;"),
        "{}",
        batch.results[1].output
    );
}

#[tokio::test]
async fn config_refuses_unknown_settings_and_bad_values() {
    let env = Env::new();
    let unknown = env.call("config", json!({"setting": "colour"})).await;
    assert_eq!(unknown.error_kind, Some(ErrorKind::Validation));
    for spec in RUNTIME_SETTINGS {
        assert!(unknown.output.contains(spec.key), "{}", unknown.output);
    }
    let cases = [
        (
            json!({"setting": "bash_default_timeout_ms", "value": 0}),
            ErrorKind::Validation,
            "between 1 and 600000, got 0",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": 600_001}),
            ErrorKind::Validation,
            "got 600001",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": u64::MAX}),
            ErrorKind::Validation,
            "between",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": -5}),
            ErrorKind::Validation,
            "non-negative integer",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": "fast"}),
            ErrorKind::Validation,
            "non-negative integer",
        ),
        (
            json!({"setting": "read_result_page_chars", "value": 30_001}),
            ErrorKind::Validation,
            "between 1 and 30000",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": 1.5}),
            ErrorKind::InputValidation,
            "",
        ),
        (
            json!({"setting": "bash_default_timeout_ms", "value": true}),
            ErrorKind::InputValidation,
            "",
        ),
        (json!({"setting": 3}), ErrorKind::InputValidation, ""),
        (json!({}), ErrorKind::InputValidation, ""),
        (
            json!({"setting": "bash_default_timeout_ms", "other": 1}),
            ErrorKind::InputValidation,
            "",
        ),
    ];
    for (input, kind, expected) in cases {
        let result = env.call("config", input.clone()).await;
        assert_eq!(result.error_kind, Some(kind), "{input}: {}", result.output);
        assert!(
            result.output.contains(expected),
            "{input}: {}",
            result.output
        );
    }
    assert!(
        env.session.runtime_settings().is_empty(),
        "refusals change nothing"
    );
}

#[tokio::test]
async fn config_flags_depend_on_whether_it_sets() {
    let env = Env::new();
    let spec = env.tool("config").spec().clone();
    let read = json!({"setting": "bash_default_timeout_ms"});
    let write = json!({"setting": "bash_default_timeout_ms", "value": 5});
    assert!(
        spec.is_read_only(&read, &env.session) && spec.is_concurrency_safe(&read, &env.session)
    );
    assert!(
        !spec.is_read_only(&write, &env.session) && !spec.is_concurrency_safe(&write, &env.session)
    );
}

fn search_env() -> Env {
    Env::with(EnvOptions {
        extra: vec![
            DeferredEcho::tool("slack_send_message", "Sends a message to a Slack channel."),
            DeferredEcho::tool(
                "slack_list_channels",
                "Lists the channels of a Slack workspace.",
            ),
            DeferredEcho::tool(
                "github_create_issue",
                "Opens an issue in a GitHub repository.\nSecond line.",
            ),
        ],
        ..EnvOptions::default()
    })
}

/// A detached context that sees `env`'s pool (and so its deferred tools).
fn pool_context(env: &Env) -> ToolContext {
    let mut ctx = ToolContext::detached(env.session.clone());
    ctx.tools = env.pool();
    ctx
}

#[tokio::test]
async fn tool_search_finds_deferred_tools_by_keyword() {
    let env = search_env();
    let tool = env.tool("tool_search");
    let ctx = pool_context(&env);
    let cases: &[(Value, &[&str])] = &[
        (
            json!({"query": "slack"}),
            &["slack_list_channels", "slack_send_message"],
        ),
        (json!({"query": "message"}), &["slack_send_message"]),
        (
            json!({"query": "channel message"}),
            &["slack_send_message", "slack_list_channels"],
        ),
        (json!({"query": "+github issue"}), &["github_create_issue"]),
        (json!({"query": "+slack +issue"}), &[]),
        (
            json!({"query": "+slack issue"}),
            &["slack_list_channels", "slack_send_message"],
        ),
        (
            json!({"query": "SLACK_SEND_MESSAGE"}),
            &["slack_send_message"],
        ),
        (
            json!({"query": "slack", "max_results": 1}),
            &["slack_list_channels"],
        ),
        (json!({"query": "kubernetes"}), &[]),
    ];
    for (input, expected) in cases {
        let output = tool.execute(input.clone(), &ctx).await.unwrap();
        let matches = &output.structured.as_ref().unwrap()["matches"];
        assert_eq!(matches, &json!(expected), "{input}: {}", output.text);
        assert!(output.context_updates.is_empty(), "a search loads nothing");
    }
    let one = tool
        .execute(json!({"query": "slack", "max_results": 1}), &ctx)
        .await
        .unwrap();
    assert!(
        one.text
            .starts_with("2 deferred tool(s) match \"slack\" (showing 1):"),
        "{}",
        one.text
    );
    let github = tool
        .execute(json!({"query": "github"}), &ctx)
        .await
        .unwrap();
    assert!(
        github
            .text
            .contains("- github_create_issue: Opens an issue in a GitHub repository.\n"),
        "{}",
        github.text
    );
    assert!(
        github.text.contains("select:github_create_issue"),
        "{}",
        github.text
    );
    let none = tool
        .execute(json!({"query": "kubernetes"}), &ctx)
        .await
        .unwrap();
    assert!(
        none.text
            .contains("No deferred tool matches \"kubernetes\""),
        "{}",
        none.text
    );
    assert!(none.text.contains("slack_send_message"), "{}", none.text);
}

#[tokio::test]
async fn tool_search_select_returns_definitions_and_loads() {
    let env = search_env();
    let tool = env.tool("tool_search");
    let ctx = pool_context(&env);
    let output = tool
        .execute(
            json!({"query": "select: slack_send_message , nope,slack_send_message"}),
            &ctx,
        )
        .await
        .unwrap();
    assert_eq!(
        output.context_updates,
        vec![ContextUpdate::LoadTools {
            names: vec!["slack_send_message".into()]
        }]
    );
    let loaded = &output.structured.as_ref().unwrap()["loaded"][0];
    assert_eq!(loaded["name"], json!("slack_send_message"));
    assert_eq!(
        loaded["input_schema"]["properties"]["text"]["type"],
        json!("string")
    );
    assert!(output.text.contains("\"input_schema\""), "{}", output.text);
    assert!(
        output.text.contains(
            "Not loaded (no deferred tool has the name; it may already be loaded): \"nope\""
        ),
        "{}",
        output.text
    );

    let bad = [
        (
            json!({"query": "select:nope,other"}),
            "no deferred tool named \"nope\", \"other\"",
        ),
        (json!({"query": "select:"}), "needs at least one tool name"),
        (
            json!({"query": "select: , ,"}),
            "needs at least one tool name",
        ),
        (json!({"query": "   "}), "blank"),
    ];
    for (input, expected) in bad {
        let message = validation_message(tool.execute(input.clone(), &ctx).await);
        assert!(message.contains(expected), "{input}: {message}");
    }
    // Without deferred tools (a detached context), a select says so.
    let detached = ToolContext::detached(env.session.clone());
    let message = validation_message(tool.execute(json!({"query": "select:x"}), &detached).await);
    assert!(message.contains("there are no deferred tools"), "{message}");
}

#[tokio::test]
async fn tool_search_loads_from_the_next_batch() {
    let env = search_env();
    let first = env
        .batch(&[
            ("tool_search", json!({"query": "select:slack_send_message"})),
            ("slack_send_message", json!({"text": "hi"})),
        ])
        .await;
    assert!(!first.results[0].is_error, "{}", first.results[0].output);
    assert_eq!(first.results[1].error_kind, Some(ErrorKind::UnknownTool));
    assert!(
        first.results[1].output.contains("is deferred"),
        "{}",
        first.results[1].output
    );
    assert!(env.session.loaded_tools().contains("slack_send_message"));

    let second = env.call("slack_send_message", json!({"text": "hi"})).await;
    assert!(!second.is_error, "{}", second.output);
    assert_eq!(second.output, "hi");
    // Loaded tools no longer show up in searches.
    let search = env.call("tool_search", json!({"query": "slack"})).await;
    assert_eq!(
        search.structured.unwrap()["matches"],
        json!(["slack_list_channels"])
    );
}

#[tokio::test]
async fn tool_search_refuses_malformed_input() {
    let env = search_env();
    let cases = [
        json!({}),
        json!({"query": 1}),
        json!({"query": ""}),
        json!({"query": "x".repeat(1_001)}),
        json!({"query": "slack", "max_results": 0}),
        json!({"query": "slack", "max_results": 51}),
        json!({"query": "slack", "limit": 2}),
    ];
    for input in cases {
        let result = env.call("tool_search", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}: {}",
            result.output
        );
    }
    // The session's runtime setting is the default number of results.
    env.session.apply(&[ContextUpdate::RuntimeSetting {
        key: "tool_search_max_results".into(),
        value: json!(1),
    }]);
    let result = env.call("tool_search", json!({"query": "slack"})).await;
    assert_eq!(
        result.structured.unwrap()["matches"],
        json!(["slack_list_channels"])
    );
}
