//! `sleep`, `read_result`, `send_user_message` and `structured_output`: behaviour and bad
//! input, detached and through a dispatcher.

use std::sync::Arc;

use serde_json::{Value, json};
use toold::dispatch::ResultStore;
use toold::event::EventType;
use toold::tool::{ErrorKind, ToolContext, ToolError};

use crate::misc::harness::{EmitTool, Env, EnvOptions, execution_message, validation_message};

#[tokio::test]
async fn sleep_waits_and_refuses_bad_durations() {
    let env = Env::new();
    let output = env.run("sleep", json!({"duration_ms": 5})).await.unwrap();
    assert_eq!(output.text, "Slept 5 ms.");
    assert_eq!(output.metadata["slept_ms"], json!(5));
    let cases = [
        json!({}),
        json!({"duration_ms": -1}),
        json!({"duration_ms": 300_001}),
        json!({"duration_ms": "10"}),
        json!({"duration_ms": 1.5}),
        json!({"duration_ms": 1, "why": "x"}),
    ];
    for input in cases {
        let result = env.call("sleep", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}: {}",
            result.output
        );
    }
    let message = validation_message(env.run("sleep", json!({"duration_ms": 300_001})).await);
    assert!(message.contains("at most 300000"), "{message}");
    let message = validation_message(env.run("sleep", json!({"duration_ms": "1"})).await);
    assert!(message.contains("non-negative integer"), "{message}");
}

#[tokio::test]
async fn sleep_returns_early_when_cancelled() {
    let env = Env::new();
    let tool = env.tool("sleep");
    let ctx = ToolContext::detached(env.session.clone());
    let cancel = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(20)).await;
        cancel.cancel();
    });
    let output = tool
        .execute(json!({"duration_ms": 300_000}), &ctx)
        .await
        .unwrap();
    assert!(output.is_error);
    assert!(
        output.text.starts_with("The sleep was stopped after "),
        "{}",
        output.text
    );
    assert!(output.text.ends_with(" of 300000 ms."), "{}", output.text);
    assert_eq!(output.metadata["cancelled"], json!(true));
}

#[tokio::test]
async fn an_interrupt_cancels_a_sleep_in_a_dispatcher() {
    let env = Arc::new(Env::new());
    assert_eq!(
        env.tool("sleep").spec().interrupt_behavior,
        toold::tool::InterruptBehavior::Cancel
    );
    let mut events = env.events.subscribe();
    let running = {
        let env = env.clone();
        tokio::spawn(async move { env.call("sleep", json!({"duration_ms": 300_000})).await })
    };
    // Interrupt once the call has started (the batch holds the token that fires).
    loop {
        let event = crate::support::deadline::within(
            crate::support::deadline::STEP,
            "tool:pre",
            events.recv(),
        )
        .await
        .unwrap();
        if event.event_type == EventType::ToolPre {
            break;
        }
    }
    env.session.interrupt();
    let result = running.await.unwrap();
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::Cancelled),
        "{}",
        result.output
    );
}

fn page_content(output: &str) -> &str {
    let body = &output[output.find('\n').unwrap() + 1..];
    &body[..body.rfind("\n[").unwrap()]
}

#[tokio::test]
async fn read_result_pages_through_an_offloaded_output() {
    let env = Env::with(EnvOptions {
        extra: vec![EmitTool::tool()],
        ..EnvOptions::default()
    });
    let emitted = env.call("emit", json!({"count": 2_500})).await;
    let offloaded = emitted.offloaded.expect("2 500 characters are offloaded");
    assert_eq!(offloaded.total_chars, 2_500);
    let id = offloaded.result_id;
    let mut collected = String::new();
    let mut offset = 0;
    let mut pages = 0;
    loop {
        let page = env
            .call(
                "read_result",
                json!({"result_id": id, "offset": offset, "limit": 1_000}),
            )
            .await;
        assert!(!page.is_error, "{}", page.output);
        assert!(page.offloaded.is_none());
        pages += 1;
        let end = page.metadata["end"].as_u64().unwrap();
        assert!(
            page.output
                .starts_with(&format!("[{id}: characters {offset}..{end} of 2500]\n")),
            "{}",
            page.output
        );
        collected.push_str(page_content(&page.output));
        if end == 2_500 {
            assert!(
                page.output.ends_with("\n[end of result]"),
                "{}",
                page.output
            );
            break;
        }
        assert!(
            page.output.ends_with(&format!(
                "continue with read_result {{\"result_id\": \"{id}\", \"offset\": {end}}}]"
            )),
            "{}",
            page.output
        );
        offset = end;
    }
    assert_eq!(pages, 3);
    assert_eq!(collected, EmitTool::text(2_500));
}

#[tokio::test]
async fn read_result_pages_are_bounded_and_count_characters() {
    let env = Env::new();
    let big = env
        .results
        .offload(env.session.id(), "c", &EmitTool::text(70_000))
        .await
        .unwrap();
    let page = env
        .call("read_result", json!({"result_id": big.result_id}))
        .await;
    assert!(page.offloaded.is_none(), "read_result is never offloaded");
    assert_eq!(page.metadata["end"], json!(30_000));
    assert_eq!(page_content(&page.output).chars().count(), 30_000);
    assert!(page.output.chars().count() < 30_300);

    let unicode = env
        .results
        .offload(env.session.id(), "c", "héllo wörld ✓")
        .await
        .unwrap();
    let output = env
        .run(
            "read_result",
            json!({"result_id": unicode.result_id, "offset": 6, "limit": 5}),
        )
        .await
        .unwrap();
    assert_eq!(page_content(&output.text), "wörld");

    // The session's page-size setting applies when no limit is given.
    env.session
        .apply(&[toold::tool::ContextUpdate::RuntimeSetting {
            key: "read_result_page_chars".into(),
            value: json!(3),
        }]);
    let output = env
        .run("read_result", json!({"result_id": unicode.result_id}))
        .await
        .unwrap();
    assert_eq!(page_content(&output.text), "hél");

    let empty = env
        .results
        .offload(env.session.id(), "c", "")
        .await
        .unwrap();
    let output = env
        .run("read_result", json!({"result_id": empty.result_id}))
        .await
        .unwrap();
    assert_eq!(
        output.text,
        format!(
            "[{}: characters 0..0 of 0]\n\n[end of result]",
            empty.result_id
        )
    );
}

#[tokio::test]
async fn read_result_refuses_unknown_ids_and_bad_ranges() {
    let env = Env::new();
    let stored = env
        .results
        .offload(env.session.id(), "c", "0123456789")
        .await
        .unwrap();
    let id = stored.result_id.as_str();
    let message = execution_message(
        env.run("read_result", json!({"result_id": "res_nope"}))
            .await,
    );
    assert!(message.contains("unknown result \"res_nope\""), "{message}");
    // Another session's output is unknown to this one, though the id is real.
    let foreign = env
        .results
        .offload("another_session", "c", "secret")
        .await
        .unwrap();
    let message = execution_message(
        env.run("read_result", json!({"result_id": foreign.result_id}))
            .await,
    );
    assert!(message.contains("unknown result"), "{message}");
    for offset in [10, 11, u64::MAX] {
        let message = validation_message(
            env.run("read_result", json!({"result_id": id, "offset": offset}))
                .await,
        );
        assert!(
            message.contains(&format!("offset {offset} is past the end")),
            "{message}"
        );
        assert!(message.contains("which has 10 characters"), "{message}");
    }
    for bad_id in ["../../etc/passwd", "res/x", "res x", "", "rés"] {
        let message =
            validation_message(env.run("read_result", json!({"result_id": bad_id})).await);
        assert!(
            message.contains("is not a result id"),
            "{bad_id}: {message}"
        );
    }
    let message = validation_message(
        env.run("read_result", json!({"result_id": id, "limit": 30_001}))
            .await,
    );
    assert!(message.contains("at most 30000"), "{message}");
    let cases = [
        json!({}),
        json!({"result_id": ""}),
        json!({"result_id": "../etc/passwd"}),
        json!({"result_id": 5}),
        json!({"result_id": id, "offset": -1}),
        json!({"result_id": id, "limit": 0}),
        json!({"result_id": id, "limit": 30_001}),
        json!({"result_id": id, "page": 2}),
    ];
    for input in cases {
        let result = env.call("read_result", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}: {}",
            result.output
        );
    }
    let unknown = env
        .call("read_result", json!({"result_id": "res_nope"}))
        .await;
    assert_eq!(unknown.error_kind, Some(ErrorKind::Execution));
}

#[tokio::test]
async fn send_user_message_needs_an_interactive_session() {
    let env = Env::new();
    let result = env
        .call("send_user_message", json!({"message": "hello"}))
        .await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::RequiresInteraction),
        "{}",
        result.output
    );
    // Without a dispatcher the tool refuses by itself.
    match env
        .run("send_user_message", json!({"message": "hello"}))
        .await
    {
        Err(ToolError::RequiresInteraction(message)) => {
            assert!(message.contains("not interactive"), "{message}")
        }
        other => panic!("expected requires_interaction, got {other:?}"),
    }
}

#[tokio::test]
async fn send_user_message_delivers_through_progress() {
    let env = Env::with(EnvOptions {
        interactive: true,
        ..EnvOptions::default()
    });
    let mut events = env.events.subscribe();
    let result = env
        .call(
            "send_user_message",
            json!({"message": "Build is **green**"}),
        )
        .await;
    assert!(!result.is_error, "{}", result.output);
    assert_eq!(
        result.output,
        "Message delivered to the user (18 characters)."
    );
    let mut delivered = Vec::new();
    while let Ok(event) = events.try_recv() {
        if event.event_type == EventType::ToolProgress {
            delivered.push(event.data.clone());
        }
    }
    assert_eq!(
        delivered,
        vec![json!({"user_message": "Build is **green**"})]
    );

    let cases = [
        (json!({}), ErrorKind::InputValidation),
        (json!({"message": ""}), ErrorKind::InputValidation),
        (json!({"message": 7}), ErrorKind::InputValidation),
        (
            json!({"message": "x".repeat(10_001)}),
            ErrorKind::InputValidation,
        ),
        (json!({"message": "   \n"}), ErrorKind::Validation),
    ];
    for (input, kind) in cases {
        let result = env.call("send_user_message", input.clone()).await;
        assert_eq!(result.error_kind, Some(kind), "{input}: {}", result.output);
    }
}

fn schema() -> Value {
    json!({
        "type": "object",
        "properties": {
            "name": {"type": "string"},
            "count": {"type": "integer", "minimum": 0}
        },
        "required": ["name", "count"],
        "additionalProperties": false
    })
}

#[tokio::test]
async fn structured_output_returns_its_input() {
    let env = Env::new();
    let data = json!({"anything": [1, {"deep": true}], "goes": null});
    let result = env.call("structured_output", data.clone()).await;
    assert!(!result.is_error, "{}", result.output);
    assert_eq!(result.structured, Some(data));
    assert_eq!(result.output, "Structured output accepted.");
    for input in [json!([1]), json!("text"), json!(3)] {
        let result = env.call("structured_output", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::InputValidation),
            "{input}"
        );
    }
    let message = validation_message(env.run("structured_output", json!([1])).await);
    assert!(
        message.contains("must be a JSON object, got an array"),
        "{message}"
    );
}

#[tokio::test]
async fn structured_output_is_checked_against_the_session_schema() {
    let env = Env::with(EnvOptions {
        output_schema: Some(schema()),
        ..EnvOptions::default()
    });
    let good = json!({"name": "x", "count": 2});
    let result = env.call("structured_output", good.clone()).await;
    assert!(!result.is_error, "{}", result.output);
    assert_eq!(result.structured, Some(good));
    assert_eq!(result.metadata["schema_checked"], json!(true));

    let cases = [
        (json!({"name": "x"}), "\"count\" is a required property"),
        (json!({"name": "x", "count": -1}), "at /count:"),
        (json!({"name": 5, "count": 1}), "at /name:"),
        (json!({"name": "x", "count": 1, "extra": 1}), "extra"),
    ];
    for (input, expected) in cases {
        let result = env.call("structured_output", input.clone()).await;
        assert_eq!(
            result.error_kind,
            Some(ErrorKind::Validation),
            "{input}: {}",
            result.output
        );
        assert!(
            result.output.starts_with(
                "ValidationError: the output does not match the session's output schema: "
            ),
            "{}",
            result.output
        );
        assert!(
            result.output.contains(expected),
            "{input}: {}",
            result.output
        );
    }
}

#[tokio::test]
async fn a_broken_session_schema_is_an_execution_error() {
    let env = Env::with(EnvOptions {
        output_schema: Some(json!({"type": 5})),
        ..EnvOptions::default()
    });
    let message = execution_message(env.run("structured_output", json!({"a": 1})).await);
    assert!(
        message.contains("the session's output schema does not compile"),
        "{message}"
    );
}
