//! The pipeline's phases: every error kind with its prefix, hooks, offload, audit, exactly
//! one result per call, and session updates that apply from the next batch.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use toold::hooks::{HookEvent, PostToolUseOutcome, PreToolUseOutcome, PreToolVerdict, ToolHook};
use toold::permission::{DecidedBy, PermissionDecision, PermissionLevel};
use toold::tool::{
    CallInput, ContextUpdate, ErrorKind, PreviewStyle, ToolCall, ToolError, ToolOutput,
};

use crate::dispatch::harness::*;

/// A hook whose pre-tool answer depends on the input's `hook` field.
struct ScriptedHook;

#[async_trait]
impl ToolHook for ScriptedHook {
    fn name(&self) -> &str {
        "scripted"
    }

    fn matches(&self, tool_name: &str) -> bool {
        tool_name == "echo"
    }

    async fn pre_tool_use(&self, event: &HookEvent) -> PreToolUseOutcome {
        let mut outcome = PreToolUseOutcome::default();
        match event.tool_input["hook"].as_str() {
            Some("deny") => {
                outcome.verdict = PreToolVerdict::Deny {
                    reason: "not today".into(),
                }
            }
            Some("ask") => {
                outcome.verdict = PreToolVerdict::Ask {
                    reason: "sure?".into(),
                }
            }
            Some("rewrite") => outcome.updated_input = Some(json!({"text": "rewritten"})),
            Some("break") => outcome.updated_input = Some(json!({"text": 42})),
            Some("escalate") => {
                outcome.updated_input = Some(json!({"text": "x", "privileged": true}))
            }
            Some("context") => outcome.additional_context = Some("note from pre".into()),
            _ => {}
        }
        outcome
    }

    async fn post_tool_use(&self, event: &HookEvent) -> PostToolUseOutcome {
        let response = event.tool_response.as_ref().unwrap();
        PostToolUseOutcome {
            additional_context: Some(format!(
                "post saw {:?} is_error={}",
                event.hook_event_name, response["is_error"]
            )),
        }
    }
}

fn echo_schema() -> Value {
    json!({"type": "object", "properties": {
        "text": {"type": "string"}, "hook": {"type": "string"}, "privileged": {"type": "boolean"},
        "fail": {"type": "boolean"}},
        "required": ["text"], "additionalProperties": false})
}

fn harness(mode: PermissionLevel) -> Harness {
    let echo = safe_spec("echo")
        .alias("Echo")
        .input_schema(echo_schema())
        .permission_for(PermissionLevel::ReadOnly, |input, _| {
            Ok(if input["privileged"] == true {
                PermissionLevel::DangerFullAccess
            } else {
                PermissionLevel::ReadOnly
            })
        });
    let mut validated = FnTool {
        spec: safe_spec("validated").build().unwrap(),
        run: Arc::new(|_, _| Box::pin(async { Ok(ToolOutput::text("ran")) })),
        validate: None,
    };
    validated.validate = Some(Arc::new(|input: &Value| {
        if input["path"] == "" {
            Err(ToolError::Validation("path must not be empty".into()))
        } else {
            Ok(())
        }
    }));
    Harness::builder()
        .mode(mode)
        .tool(tool(echo, |input, _| async move {
            if input["fail"] == true {
                return Err(ToolError::Execution("echo failed".into()));
            }
            Ok(ToolOutput::text(input["text"].as_str().unwrap_or_default()))
        }))
        .tool(Arc::new(validated))
        .tool(tool(
            safe_spec("write").permission(PermissionLevel::WorkspaceWrite),
            |_, _| async { Ok(ToolOutput::text("written")) },
        ))
        .tool(tool(
            safe_spec("ask_user").requires_user_interaction(true),
            |_, _| async { Ok(ToolOutput::text("asked")) },
        ))
        .tool(tool(safe_spec("panics"), |_, _| async {
            panic!("tool bug")
        }))
        .tool(tool(
            safe_spec("slow").timeout(Duration::from_millis(20)),
            |_, ctx| async move {
                ctx.cancellation.cancelled().await;
                Ok(ToolOutput::text(""))
            },
        ))
        .hook(Arc::new(ScriptedHook))
        .build()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_error_kind_comes_with_its_prefix() {
    let h = harness(PermissionLevel::ReadOnly);
    let malformed = ToolCall {
        id: "malformed".into(),
        name: "echo".into(),
        input: CallInput::from_arguments("{\"text\": "),
    };
    let cases: Vec<(ToolCall, ErrorKind, &str)> = vec![
        (
            call("c1", "ecko", json!({})),
            ErrorKind::UnknownTool,
            "did you mean \"echo\"?",
        ),
        (
            call("c2", "echo", json!({"text": 1})),
            ErrorKind::InputValidation,
            "/text",
        ),
        (
            call("c3", "echo", json!({})),
            ErrorKind::InputValidation,
            "\"text\" is a required property",
        ),
        (malformed, ErrorKind::InputValidation, "not valid JSON"),
        (
            call("c4", "validated", json!({"path": ""})),
            ErrorKind::Validation,
            "path must not be empty",
        ),
        (
            call("c5", "echo", json!({"text": "x", "privileged": true})),
            ErrorKind::PermissionDenied,
            "needs danger_full_access",
        ),
        (
            call("c6", "echo", json!({"text": "x", "hook": "deny"})),
            ErrorKind::HookBlocked,
            "not today",
        ),
        (
            call("c7", "ask_user", json!({})),
            ErrorKind::RequiresInteraction,
            "not interactive",
        ),
        (
            call("c8", "echo", json!({"text": "x", "fail": true})),
            ErrorKind::Execution,
            "echo failed",
        ),
        (
            call("c9", "panics", json!({})),
            ErrorKind::Execution,
            "panicked: tool bug",
        ),
        (
            call("c10", "slow", json!({})),
            ErrorKind::Timeout,
            "within 20 ms",
        ),
    ];
    let calls: Vec<ToolCall> = cases.iter().map(|(c, _, _)| c.clone()).collect();
    let outcome = h.run(calls).await;
    assert_eq!(outcome.results.len(), cases.len());
    for ((call, kind, needle), result) in cases.iter().zip(&outcome.results) {
        assert_eq!(result.id, call.id);
        assert!(result.is_error, "{}", call.id);
        assert_eq!(
            result.error_kind,
            Some(*kind),
            "{}: {}",
            call.id,
            result.output
        );
        assert!(
            result.output.starts_with(kind.prefix()),
            "{}: {}",
            call.id,
            result.output
        );
        assert!(
            result.output.contains(needle),
            "{}: {}",
            call.id,
            result.output
        );
    }
    // cancelled and aborted have their own scheduling tests; their prefixes are checked there.
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn every_call_gets_exactly_one_result_and_one_audit_row() {
    let h = harness(PermissionLevel::ReadOnly);
    let calls = vec![
        call("a", "echo", json!({"text": "1"})),
        call("b", "nope", json!({})),
        call("a", "echo", json!({"text": "duplicate id"})),
        call("c", "echo", json!({"text": "x", "privileged": true})),
        call("d", "Echo", json!({"text": "via alias"})),
        call("e", "slow", json!({})),
    ];
    let outcome = h.run(calls.clone()).await;
    let ids: Vec<_> = outcome.results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["a", "b", "a", "c", "d", "e"]);
    assert!(outcome.results[0].output.starts_with("1\n\npost saw"));
    assert_eq!(outcome.results[2].error_kind, Some(ErrorKind::Validation));
    assert!(outcome.results[2].output.contains("more than once"));
    assert!(outcome.results[4].output.starts_with("via alias"));
    let rows = h.audit.records();
    assert_eq!(rows.len(), calls.len());
    let mut indexes: Vec<_> = rows.iter().map(|r| r.index).collect();
    indexes.sort();
    assert_eq!(indexes, [0, 1, 2, 3, 4, 5]);
    let denied = rows.iter().find(|r| r.call_id == "c").unwrap();
    assert_eq!(denied.error_kind, Some(ErrorKind::PermissionDenied));
    assert!(matches!(
        denied.decision,
        Some(PermissionDecision::Deny {
            decided_by: DecidedBy::Mode {
                mode: PermissionLevel::ReadOnly
            },
            ..
        })
    ));
    let alias = rows.iter().find(|r| r.call_id == "d").unwrap();
    assert_eq!(alias.tool.as_deref(), Some("echo"));
    assert_eq!(alias.requested_name, "Echo");
    assert!(alias.decision.as_ref().unwrap().is_allow());
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hooks_rewrite_narrow_and_annotate() {
    let h = harness(PermissionLevel::ReadOnly);
    let outcome = h
        .run(vec![
            call(
                "rewrite",
                "echo",
                json!({"text": "orig", "hook": "rewrite"}),
            ),
            call("break", "echo", json!({"text": "orig", "hook": "break"})),
            call(
                "escalate",
                "echo",
                json!({"text": "orig", "hook": "escalate"}),
            ),
            call("ask", "echo", json!({"text": "orig", "hook": "ask"})),
            call(
                "context",
                "echo",
                json!({"text": "orig", "hook": "context"}),
            ),
            call("failing", "echo", json!({"text": "orig", "fail": true})),
        ])
        .await;
    let r = &outcome.results;
    assert!(
        r[0].output
            .starts_with("rewritten\n\npost saw PostToolUse is_error=false"),
        "{}",
        r[0].output
    );
    assert_eq!(r[1].error_kind, Some(ErrorKind::HookBlocked));
    assert!(r[1].output.contains("fails the schema"), "{}", r[1].output);
    assert_eq!(
        r[2].error_kind,
        Some(ErrorKind::PermissionDenied),
        "a hook cannot widen: {}",
        r[2].output
    );
    assert_eq!(
        r[3].error_kind,
        Some(ErrorKind::HookBlocked),
        "{}",
        r[3].output
    );
    assert!(
        r[4].output.starts_with("orig\n\nnote from pre\n\npost saw"),
        "{}",
        r[4].output
    );
    assert!(
        r[5].output.contains("PostToolUseFailure is_error=true"),
        "{}",
        r[5].output
    );
    let row = h
        .audit
        .records()
        .into_iter()
        .find(|r| r.call_id == "rewrite")
        .unwrap();
    assert_eq!(
        row.input,
        json!({"text": "rewritten"}),
        "the audit keeps the final input"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn interactive_sessions_may_use_interactive_tools() {
    let interactive = Harness::builder()
        .interactive(true)
        .tool(tool(safe_spec("ask_user").requires_user_interaction(true), |_, ctx| async move {
            Ok(ToolOutput::text(format!("interactive={}", ctx.interactive)))
        }))
        .build();
    let outcome = interactive
        .run(vec![call("a", "ask_user", json!({}))])
        .await;
    assert_eq!(outcome.results[0].output, "interactive=true");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn oversized_output_is_offloaded_with_a_preview() {
    let body: String = (0..5000)
        .map(|i| char::from(b'a' + (i % 26) as u8))
        .collect::<String>()
        + "THE END";
    let (b1, b2) = (body.clone(), body.clone());
    let h = Harness::builder()
        .tool(tool(
            safe_spec("big").max_result_size_chars(Some(1000)),
            move |_, _| {
                let body = b1.clone();
                async move { Ok(ToolOutput::text(body)) }
            },
        ))
        .tool(tool(
            safe_spec("shell")
                .max_result_size_chars(Some(1000))
                .preview_style(PreviewStyle::HeadAndTail),
            move |_, _| {
                let body = b2.clone();
                async move { Ok(ToolOutput::failure(body)) }
            },
        ))
        .tool(tool(
            safe_spec("bounded").max_result_size_chars(None),
            |_, _| async { Ok(ToolOutput::text("x".repeat(50_000))) },
        ))
        .build();
    let outcome = h
        .run(vec![
            call("a", "big", json!({})),
            call("b", "shell", json!({})),
            call("c", "bounded", json!({})),
        ])
        .await;
    let head = &outcome.results[0];
    let stored = head.offloaded.clone().expect("offloaded");
    assert_eq!(stored.total_chars, body.chars().count() as u64);
    assert!(head.output.starts_with(&body[..1000]));
    assert!(!head.output.contains("THE END"));
    assert!(head.output.contains(&stored.result_id) && head.output.contains("read_result"));
    use toold::dispatch::ResultStore;
    let page = h
        .results
        .read(&stored.result_id, 0, u64::MAX)
        .await
        .unwrap();
    assert_eq!(page.content, body, "the stored output is the whole output");

    let shell = &outcome.results[1];
    assert!(shell.offloaded.is_some());
    assert!(shell.output.starts_with("ExecutionError: "));
    assert!(
        shell.output.contains("THE END"),
        "head-and-tail shows the end"
    );
    assert!(shell.output.contains("characters omitted"));

    assert!(
        outcome.results[2].offloaded.is_none(),
        "None means never offload"
    );
    assert_eq!(outcome.results[2].output.len(), 50_000);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn session_updates_apply_after_the_call_and_the_pool_stays_frozen() {
    let h = Harness::builder()
        .tool(tool(
            safe_spec("tool_search").should_defer(true),
            |input, _| async move {
                let name = input["select"].as_str().unwrap().to_owned();
                Ok(ToolOutput::text("loaded")
                    .with_update(ContextUpdate::LoadTools { names: vec![name] }))
            },
        ))
        .tool(tool(
            unsafe_spec("hidden").should_defer(true),
            |_, _| async { Ok(ToolOutput::text("hidden ran")) },
        ))
        .build();
    let first = h
        .run(vec![
            call("load", "tool_search", json!({"select": "hidden"})),
            call("use", "hidden", json!({})),
        ])
        .await;
    assert_eq!(first.results[0].output, "loaded");
    assert_eq!(first.results[1].error_kind, Some(ErrorKind::UnknownTool));
    assert!(
        first.results[1].output.contains("deferred"),
        "{}",
        first.results[1].output
    );
    assert!(h.session.loaded_tools().contains("hidden"));
    let second = h.run(vec![call("use", "hidden", json!({}))]).await;
    assert_eq!(second.results[0].output, "hidden ran");
}
