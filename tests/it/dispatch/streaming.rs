//! Streaming execution: calls start before the batch has fully arrived, progress is passed on
//! at once, and each call's states are visible as events in order.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::{Notify, mpsc};
use tokio_stream_shim::ReceiverStream;
use toold::dispatch::BatchUpdate;
use toold::event::EventType;
use toold::tool::ToolOutput;

use crate::dispatch::harness::*;

/// A minimal receiver-to-stream adapter so the test needs no extra crate.
pub mod tokio_stream_shim {
    use std::pin::Pin;
    use std::task::{Context, Poll};

    use tokio::sync::mpsc;

    pub struct ReceiverStream<T>(pub mpsc::Receiver<T>);

    impl<T> futures::Stream for ReceiverStream<T> {
        type Item = T;
        fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<T>> {
            self.0.poll_recv(cx)
        }
    }
}

const PATIENCE: Duration = Duration::from_secs(10);

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_starts_before_the_rest_of_its_batch_arrives() {
    let started = Arc::new(Notify::new());
    let s = started.clone();
    let h = Harness::builder()
        .tool(tool(safe_spec("first"), move |_, _| {
            let started = s.clone();
            async move {
                started.notify_one();
                Ok(ToolOutput::text("first done"))
            }
        }))
        .tool(tool(safe_spec("second"), |_, _| async {
            Ok(ToolOutput::text("second done"))
        }))
        .build();
    let mut events = h.events.subscribe();
    let (calls, incoming) = mpsc::channel(4);
    let (updates, mut received) = mpsc::unbounded_channel();
    let dispatcher = h.dispatcher.clone();
    let (session, pool) = (h.session.clone(), h.pool());
    let batch = tokio::spawn(async move {
        dispatcher
            .run_batch(
                session,
                pool,
                "batch_stream".into(),
                ReceiverStream(incoming),
                updates,
            )
            .await;
    });
    calls.send(call("1", "first", json!({}))).await.unwrap();
    // The first call runs, and its result is yielded, while the batch is still open.
    tokio::time::timeout(PATIENCE, started.notified())
        .await
        .expect("first call started");
    let first = tokio::time::timeout(PATIENCE, received.recv())
        .await
        .unwrap()
        .unwrap();
    assert!(
        matches!(first, BatchUpdate::Result { index: 0, ref result } if result.output == "first done")
    );
    calls.send(call("2", "second", json!({}))).await.unwrap();
    drop(calls);
    batch.await.unwrap();
    let second = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the second result",
        received.recv(),
    )
    .await
    .unwrap();
    assert!(matches!(second, BatchUpdate::Result { index: 1, .. }));

    // queued → executing (pre) → completed (post) for each call, framed by the batch events.
    let seen: Vec<(EventType, Option<String>)> = Harness::drain(&mut events)
        .iter()
        .map(|e| (e.event_type, e.call_id.as_deref().map(str::to_owned)))
        .collect();
    let one = Some("1".to_owned());
    let two = Some("2".to_owned());
    assert_eq!(
        seen,
        [
            (EventType::BatchStart, None),
            (EventType::ToolQueued, one.clone()),
            (EventType::ToolPre, one.clone()),
            (EventType::ToolPost, one),
            (EventType::ToolQueued, two.clone()),
            (EventType::ToolPre, two.clone()),
            (EventType::ToolPost, two),
            (EventType::BatchEnd, None),
        ]
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn progress_is_passed_on_before_the_call_finishes() {
    let release = Arc::new(Notify::new());
    let r = release.clone();
    let h = Harness::builder()
        .tool(tool(safe_spec("reporter"), move |_, ctx| {
            let release = r.clone();
            async move {
                ctx.progress.report(json!({"step": 1}));
                // Finishes only after the test has seen the progress.
                release.notified().await;
                Ok(ToolOutput::text("done"))
            }
        }))
        .build();
    let mut events = h.events.subscribe();
    let (calls, incoming) = mpsc::channel(1);
    let (updates, mut received) = mpsc::unbounded_channel();
    let dispatcher = h.dispatcher.clone();
    let (session, pool) = (h.session.clone(), h.pool());
    let batch = tokio::spawn(async move {
        dispatcher
            .run_batch(
                session,
                pool,
                "batch_progress".into(),
                ReceiverStream(incoming),
                updates,
            )
            .await;
    });
    calls.send(call("p", "reporter", json!({}))).await.unwrap();
    drop(calls);
    let update = tokio::time::timeout(PATIENCE, received.recv())
        .await
        .unwrap()
        .unwrap();
    let BatchUpdate::Progress(progress) = update else {
        panic!("expected progress first, got {update:?}")
    };
    assert_eq!(&*progress.call_id, "p");
    assert_eq!(progress.data, json!({"step": 1}));
    release.notify_one();
    batch.await.unwrap();
    assert!(matches!(
        crate::support::deadline::within(
            crate::support::deadline::STEP,
            "the result",
            received.recv()
        )
        .await,
        Some(BatchUpdate::Result { .. })
    ));
    let progress_event = Harness::drain(&mut events)
        .into_iter()
        .find(|e| e.event_type == EventType::ToolProgress)
        .expect("a tool:progress event");
    assert_eq!(progress_event.batch_id.as_deref(), Some("batch_progress"));
    assert_eq!(progress_event.tool.as_deref(), Some("reporter"));
}
