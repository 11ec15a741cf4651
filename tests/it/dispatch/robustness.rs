//! The edges: calls streaming in around running groups, interrupts mid-stream, hooks that
//! rewrite input unsafely, context that must survive offload, a panic inside toold itself,
//! and event numbering under concurrent publishers.

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::sync::{Notify, mpsc};
use toold::dispatch::BatchUpdate;
use toold::event::{EventBus, EventDraft, EventType};
use toold::hooks::{HookEvent, PreToolUseOutcome, ToolHook};
use toold::permission::{PermissionDecision, PermissionPolicy, PermissionRequest};
use toold::tool::{ErrorKind, InterruptBehavior, ToolError, ToolOutput};

use crate::dispatch::harness::*;
use crate::dispatch::streaming::tokio_stream_shim::ReceiverStream;

const PATIENCE: Duration = Duration::from_secs(10);

/// Starts a streaming batch; returns the call sender, the update receiver and the task.
fn stream(
    h: &Harness,
) -> (
    mpsc::Sender<toold::tool::ToolCall>,
    mpsc::UnboundedReceiver<BatchUpdate>,
    tokio::task::JoinHandle<()>,
) {
    let (calls, incoming) = mpsc::channel(16);
    let (updates, received) = mpsc::unbounded_channel();
    let task = h.dispatcher.spawn_batch(
        h.session.clone(),
        h.pool(),
        "batch_edge".into(),
        ReceiverStream(incoming),
        updates,
    );
    (calls, received, task)
}

async fn next_result(
    received: &mut mpsc::UnboundedReceiver<BatchUpdate>,
) -> toold::tool::ToolResult {
    loop {
        match tokio::time::timeout(PATIENCE, received.recv())
            .await
            .expect("an update in time")
        {
            Some(BatchUpdate::Result { result, .. }) => return result,
            Some(BatchUpdate::Progress(_)) => continue,
            None => panic!("the batch ended without the expected result"),
        }
    }
}

/// A safe group is running; an unsafe call streams in and waits for it; a safe call after
/// the unsafe one waits for that.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn streamed_calls_respect_the_groups_around_them() {
    let tracker = Arc::new(Tracker::default());
    let release = Arc::new(Notify::new());
    let (t, r) = (tracker.clone(), release.clone());
    let h = Harness::builder()
        .tool(tool(safe_spec("read"), move |input, _| {
            let (tracker, release) = (t.clone(), r.clone());
            async move {
                let label = input["label"].as_str().unwrap().to_owned();
                tracker.enter(&label);
                if input["hold"] == true {
                    release.notified().await;
                }
                tracker.leave(&label);
                Ok(ToolOutput::text(label))
            }
        }))
        .tool(tracked(unsafe_spec("write"), tracker.clone()))
        .build();
    let (calls, mut received, task) = stream(&h);
    calls
        .send(call("r1", "read", json!({"label": "r1", "hold": true})))
        .await
        .unwrap();
    calls.send(labelled("w", "write", 1)).await.unwrap();
    calls
        .send(call("r2", "read", json!({"label": "r2"})))
        .await
        .unwrap();
    // Give the executor every chance to start what it should not.
    tokio::time::sleep(Duration::from_millis(50)).await;
    assert_eq!(
        tracker.log(),
        ["start r1"],
        "w and r2 must wait for the held read"
    );
    release.notify_one();
    drop(calls);
    for expected in ["r1", "w", "r2"] {
        assert_eq!(next_result(&mut received).await.id, expected);
    }
    task.await.unwrap();
    assert_eq!(
        tracker.log(),
        [
            "start r1", "end r1", "start w", "end w", "start r2", "end r2"
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_interrupt_mid_stream_cancels_what_comes_after() {
    let h = Harness::builder()
        .tool(tool(
            safe_spec("wait").interrupt_behavior(InterruptBehavior::Cancel),
            |_, ctx| async move {
                ctx.cancellation.cancelled().await;
                Ok(ToolOutput::text(""))
            },
        ))
        .tool(tool(safe_spec("quick"), |_, _| async {
            Ok(ToolOutput::text("ran"))
        }))
        .build();
    let mut events = h.events.subscribe();
    let (calls, mut received, task) = stream(&h);
    calls.send(call("w", "wait", json!({}))).await.unwrap();
    // Wait until the call is executing, then interrupt.
    loop {
        let event = tokio::time::timeout(PATIENCE, events.recv())
            .await
            .unwrap()
            .unwrap();
        if event.event_type == EventType::ToolPre {
            break;
        }
    }
    h.session.interrupt();
    assert_eq!(
        next_result(&mut received).await.error_kind,
        Some(ErrorKind::Cancelled)
    );
    calls.send(call("late", "quick", json!({}))).await.unwrap();
    let late = next_result(&mut received).await;
    assert_eq!(
        late.error_kind,
        Some(ErrorKind::Cancelled),
        "{}",
        late.output
    );
    drop(calls);
    task.await.unwrap();
}

/// A policy with a bug: it panics. toold must still answer the call.
struct PanickingPolicy;

#[async_trait]
impl PermissionPolicy for PanickingPolicy {
    async fn decide(&self, _request: &PermissionRequest<'_>) -> PermissionDecision {
        panic!("policy bug")
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_panic_inside_toold_still_answers_every_call() {
    let h = Harness::builder()
        .permission(Arc::new(PanickingPolicy))
        .tool(tool(safe_spec("quick"), |_, _| async {
            Ok(ToolOutput::text("ran"))
        }))
        .build();
    let outcome = h
        .run(vec![
            call("a", "quick", json!({})),
            call("b", "nope", json!({})),
        ])
        .await;
    assert_eq!(outcome.results.len(), 2);
    assert_eq!(outcome.results[0].error_kind, Some(ErrorKind::Execution));
    assert!(
        outcome.results[0].output.contains("internal error"),
        "{}",
        outcome.results[0].output
    );
    assert_eq!(outcome.results[1].error_kind, Some(ErrorKind::UnknownTool));
}

/// Rewrites every input to `{"path": <value of "rewrite_to">}`, and adds context.
struct Rewriter;

#[async_trait]
impl ToolHook for Rewriter {
    fn name(&self) -> &str {
        "rewriter"
    }
    fn matches(&self, _tool_name: &str) -> bool {
        true
    }
    async fn pre_tool_use(&self, event: &HookEvent) -> PreToolUseOutcome {
        PreToolUseOutcome {
            updated_input: event
                .tool_input
                .get("rewrite_to")
                .map(|to| json!({"path": to})),
            additional_context: Some("HOOK CONTEXT".into()),
            ..PreToolUseOutcome::default()
        }
    }
}

fn path_tool(name: &str) -> Arc<dyn toold::tool::Tool> {
    let spec = safe_spec(name)
        .max_result_size_chars(Some(100))
        .concurrency_safe_if(|input, _| Ok(input["path"] != "unsafe"));
    Arc::new(FnTool {
        spec: spec.build().unwrap(),
        run: Arc::new(|input: Value, _| {
            Box::pin(async move {
                Ok(ToolOutput::text(
                    "x".repeat(input["size"].as_u64().unwrap_or(3) as usize),
                ))
            })
        }),
        validate: Some(Arc::new(|input: &Value| {
            if input["path"] == "forbidden" {
                Err(ToolError::Validation("path is forbidden".into()))
            } else {
                Ok(())
            }
        })),
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hook_updates_pass_the_tools_validation_and_keep_the_group_safe() {
    let h = Harness::builder()
        .tool(path_tool("probe"))
        .hook(Arc::new(Rewriter))
        .build();
    let outcome = h
        .run(vec![
            call(
                "sem",
                "probe",
                json!({"path": "ok", "rewrite_to": "forbidden"}),
            ),
            call(
                "par",
                "probe",
                json!({"path": "ok", "rewrite_to": "unsafe"}),
            ),
            call("big", "probe", json!({"path": "ok", "size": 5000})),
        ])
        .await;
    let r = &outcome.results;
    assert_eq!(r[0].error_kind, Some(ErrorKind::HookBlocked));
    assert!(r[0].output.contains("path is forbidden"), "{}", r[0].output);
    assert_eq!(r[1].error_kind, Some(ErrorKind::HookBlocked));
    assert!(r[1].output.contains("parallel"), "{}", r[1].output);
    // Offloaded, and the hook's context is still at the end for the model to read.
    assert!(r[2].offloaded.is_some());
    assert!(r[2].output.ends_with("\n\nHOOK CONTEXT"), "{}", r[2].output);
    let stored = r[2].offloaded.as_ref().unwrap();
    use toold::dispatch::ResultStore;
    let page = h
        .results
        .read(&stored.result_id, 0, u64::MAX)
        .await
        .unwrap();
    assert!(
        !page.content.contains("HOOK CONTEXT"),
        "context is for the model, not the stored output"
    );
}

#[test]
fn seqs_arrive_in_order_under_concurrent_publishers() {
    let bus = EventBus::new(100_000);
    let mut subscriber = bus.subscribe();
    std::thread::scope(|scope| {
        for _ in 0..4 {
            let bus = bus.clone();
            scope.spawn(move || {
                for _ in 0..5_000 {
                    bus.publish(EventDraft::new(EventType::ToolProgress, "s"));
                }
            });
        }
    });
    let mut last = 0;
    let mut count = 0;
    while let Ok(event) = subscriber.try_recv() {
        assert!(event.seq > last, "seq {} after {last}", event.seq);
        last = event.seq;
        count += 1;
    }
    assert_eq!(count, 20_000);
}
