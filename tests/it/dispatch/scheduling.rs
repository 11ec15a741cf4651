//! Partition-then-gather as executed: overlap, limits, ordering, fail-closed classification,
//! sibling abort, interrupts and timeouts.

use std::sync::Arc;
use std::time::Duration;

use serde_json::json;
use tokio::sync::Barrier;
use toold::tool::{ErrorKind, InterruptBehavior, ToolError, ToolOutput};

use crate::dispatch::harness::*;

fn position(log: &[String], entry: &str) -> usize {
    log.iter()
        .position(|e| e == entry)
        .unwrap_or_else(|| panic!("{entry} not in {log:?}"))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn reads_around_a_write_run_in_three_groups() {
    let tracker = Arc::new(Tracker::default());
    let h = Harness::builder()
        .tool(tracked(safe_spec("read"), tracker.clone()))
        .tool(tracked(unsafe_spec("write"), tracker.clone()))
        .build();
    let calls = vec![
        labelled("r1", "read", 40),
        labelled("r2", "read", 40),
        labelled("w", "write", 10),
        labelled("r3", "read", 40),
        labelled("r4", "read", 40),
    ];
    let outcome = h.run(calls).await;
    assert!(
        outcome.results.iter().all(|r| !r.is_error),
        "{:?}",
        outcome.results
    );
    let log = tracker.log();
    // The write starts after both earlier reads ended and ends before either later read starts.
    for earlier in ["end r1", "end r2"] {
        assert!(
            position(&log, earlier) < position(&log, "start w"),
            "{log:?}"
        );
    }
    for later in ["start r3", "start r4"] {
        assert!(position(&log, "end w") < position(&log, later), "{log:?}");
    }
    // Each read group overlapped internally.
    assert!(
        position(&log, "start r2") < position(&log, "end r1"),
        "{log:?}"
    );
    assert!(
        position(&log, "start r4") < position(&log, "end r3"),
        "{log:?}"
    );
    assert_eq!(tracker.max(), 2);
}

/// Ten safe calls that can only all finish if all ten run at once.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_safe_calls_overlap_fully() {
    let tracker = Arc::new(Tracker::default());
    let barrier = Arc::new(Barrier::new(10));
    let (t, b) = (tracker.clone(), barrier.clone());
    let h = Harness::builder()
        .tool(tool(
            safe_spec("meet").timeout(Duration::from_secs(10)),
            move |input, _| {
                let (tracker, barrier) = (t.clone(), b.clone());
                async move {
                    let label = input["label"].as_str().unwrap().to_owned();
                    tracker.enter(&label);
                    barrier.wait().await;
                    tracker.leave(&label);
                    Ok(ToolOutput::text(label))
                }
            },
        ))
        .build();
    let calls = (0..10)
        .map(|i| labelled(&format!("c{i}"), "meet", 0))
        .collect();
    let outcome = h.run(calls).await;
    assert!(
        outcome.results.iter().all(|r| !r.is_error),
        "{:?}",
        outcome.results
    );
    assert_eq!(tracker.max(), 10);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn safe_calls_never_exceed_max_concurrency() {
    let tracker = Arc::new(Tracker::default());
    let h = Harness::builder()
        .tool(tracked(safe_spec("read"), tracker.clone()))
        .max_concurrency(3)
        .build();
    let calls = (0..12)
        .map(|i| labelled(&format!("c{i}"), "read", 15))
        .collect();
    let outcome = h.run(calls).await;
    assert_eq!(outcome.results.len(), 12);
    assert!(tracker.max() <= 3, "observed {}", tracker.max());
    assert!(
        tracker.max() >= 2,
        "safe calls should overlap, observed {}",
        tracker.max()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn ten_unsafe_calls_never_overlap() {
    let tracker = Arc::new(Tracker::default());
    let h = Harness::builder()
        .tool(tracked(unsafe_spec("write"), tracker.clone()))
        .build();
    let calls = (0..10)
        .map(|i| labelled(&format!("c{i}"), "write", 5))
        .collect();
    let outcome = h.run(calls).await;
    assert_eq!(outcome.results.len(), 10);
    assert_eq!(tracker.max(), 1);
    let log = tracker.log();
    for i in 0..10 {
        // Strictly one after another, in request order.
        assert_eq!(log[2 * i], format!("start c{i}"));
        assert_eq!(log[2 * i + 1], format!("end c{i}"));
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn results_come_in_request_order_when_later_calls_finish_first() {
    // Call i may finish only after calls i+1.. have: completion order is forced to be the
    // reverse of request order, with no timing involved.
    let finished = Arc::new(std::sync::Mutex::new(0usize));
    let changed = Arc::new(tokio::sync::Notify::new());
    let (f, c) = (finished.clone(), changed.clone());
    let h = Harness::builder()
        .tool(tool(safe_spec("gated"), move |input, _| {
            let (finished, changed) = (f.clone(), c.clone());
            async move {
                let turn = 4 - input["i"].as_u64().unwrap() as usize;
                loop {
                    let notified = changed.notified();
                    if *finished.lock().unwrap() == turn {
                        break;
                    }
                    notified.await;
                }
                *finished.lock().unwrap() += 1;
                changed.notify_waiters();
                Ok(ToolOutput::text(format!("done {turn}")))
            }
        }))
        .build();
    let calls = (0..5)
        .map(|i| call(&format!("c{i}"), "gated", json!({"i": i})))
        .collect();
    let outcome = h.run(calls).await;
    let ids: Vec<_> = outcome.results.iter().map(|r| r.id.as_str()).collect();
    assert_eq!(ids, ["c0", "c1", "c2", "c3", "c4"]);
    assert_eq!(outcome.results[0].output, "done 4", "c0 finished last");
    assert_eq!(outcome.results[4].output, "done 0", "c4 finished first");
}

/// A classifier that panics or errors, and input that fails the schema, are all unsafe: the
/// safe calls on either side of them do not overlap.
#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn unclassifiable_calls_run_serially() {
    let tracker = Arc::new(Tracker::default());
    let picky = safe_spec("picky")
        .input_schema(json!({"type": "object", "properties": {
            "label": {"type": "string"}, "ms": {"type": "integer"}, "mode": {"type": "string"}}}))
        .concurrency_safe_if(|input, _| match input["mode"].as_str() {
            Some("panic") => panic!("classifier bug"),
            Some("error") => Err("cannot classify".into()),
            _ => Ok(true),
        });
    let h = Harness::builder()
        .tool(tracked(picky, tracker.clone()))
        .build();
    for middle in [
        json!({"label": "m", "ms": 1, "mode": "panic"}),
        json!({"label": "m", "ms": 1, "mode": "error"}),
        json!({"label": "m", "ms": "not a number"}),
    ] {
        let calls = vec![
            labelled("a", "picky", 30),
            call("m", "picky", middle.clone()),
            labelled("b", "picky", 30),
        ];
        let outcome = h.run(calls).await;
        assert_eq!(outcome.results.len(), 3);
        let log = tracker.log();
        let (end_a, start_b) = (
            log.iter().rposition(|e| e == "end a"),
            log.iter().rposition(|e| e == "start b"),
        );
        assert!(end_a < start_b, "{middle}: {log:?}");
    }
    assert_eq!(tracker.max(), 1);
    // The schema failure itself is reported, not run.
    let outcome = h.run(vec![call("x", "picky", json!({"ms": "slow"}))]).await;
    assert_eq!(
        outcome.results[0].error_kind,
        Some(ErrorKind::InputValidation)
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_shell_call_aborts_its_running_siblings() {
    let shell = safe_spec("bash").aborts_siblings_on_failure(true);
    let waiter = safe_spec("wait");
    let h = Harness::builder()
        .tool(tool(shell, |input, _| async move {
            // The succeeding call finishes on its first poll; the failing one a little later,
            // so `ok` has completed before the abort fires whatever the scheduling.
            if input["fail"] == true {
                tokio::time::sleep(Duration::from_millis(20)).await;
                Ok(ToolOutput::failure("exit code 1"))
            } else {
                Ok(ToolOutput::text("fine"))
            }
        }))
        .tool(tool(waiter, |_, ctx| async move {
            // Runs until cancelled, then hands back what it has.
            ctx.cancellation.cancelled().await;
            Ok(ToolOutput::text("stopped early"))
        }))
        .tool(tool(unsafe_spec("after"), |_, _| async {
            Ok(ToolOutput::text("after ran"))
        }))
        .build();
    let outcome = h
        .run(vec![
            call("w1", "wait", json!({})),
            call("ok", "bash", json!({})),
            call("boom", "bash", json!({"fail": true})),
            call("w2", "wait", json!({})),
            call("later", "after", json!({})),
        ])
        .await;
    let kinds: Vec<_> = outcome.results.iter().map(|r| r.error_kind).collect();
    assert_eq!(
        kinds,
        [
            Some(ErrorKind::Aborted),
            None,
            Some(ErrorKind::Execution),
            Some(ErrorKind::Aborted),
            None
        ]
    );
    assert!(outcome.results[0].output.starts_with("AbortedError: "));
    assert!(
        outcome.results[0].output.contains("stopped early"),
        "partial output kept"
    );
    assert_eq!(
        outcome.results[4].output, "after ran",
        "the next group is not aborted"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn siblings_not_started_yet_are_aborted_too() {
    let h = Harness::builder()
        .max_concurrency(2)
        .tool(tool(
            safe_spec("bash").aborts_siblings_on_failure(true),
            |_, _| async { Ok(ToolOutput::failure("exit code 2")) },
        ))
        .tool(tool(safe_spec("wait"), |_, ctx| async move {
            ctx.cancellation.cancelled().await;
            Ok(ToolOutput::text(""))
        }))
        .build();
    let outcome = h
        .run(vec![
            call("w", "wait", json!({})),
            call("boom", "bash", json!({})),
            call("queued1", "wait", json!({})),
            call("queued2", "wait", json!({})),
        ])
        .await;
    let kinds: Vec<_> = outcome.results.iter().map(|r| r.error_kind).collect();
    assert_eq!(
        kinds,
        [
            Some(ErrorKind::Aborted),
            Some(ErrorKind::Execution),
            Some(ErrorKind::Aborted),
            Some(ErrorKind::Aborted)
        ]
    );
    assert!(
        outcome.results[2]
            .output
            .contains("before this call started"),
        "{}",
        outcome.results[2].output
    );
    assert_eq!(
        h.audit.records().len(),
        4,
        "calls aborted before they started are audited"
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_failing_tool_without_the_flag_aborts_nothing() {
    let h = Harness::builder()
        .tool(tool(safe_spec("flaky"), |input, _| async move {
            tokio::time::sleep(Duration::from_millis(input["ms"].as_u64().unwrap_or(0))).await;
            if input["fail"] == true {
                Err(ToolError::Execution("no".into()))
            } else {
                Ok(ToolOutput::text("ok"))
            }
        }))
        .build();
    let outcome = h
        .run(vec![
            call("a", "flaky", json!({"fail": true})),
            call("b", "flaky", json!({"ms": 30})),
        ])
        .await;
    assert_eq!(outcome.results[0].error_kind, Some(ErrorKind::Execution));
    assert!(!outcome.results[1].is_error);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn an_interrupt_cancels_cancel_calls_and_lets_block_calls_finish() {
    let started = Arc::new(tokio::sync::Semaphore::new(0));
    let (s1, s2) = (started.clone(), started.clone());
    // Tools see the session only through a read-only view; the test hands the blocking tool
    // the session itself (set once the harness has built it, before any call starts).
    let live_session = Arc::new(std::sync::OnceLock::<Arc<toold::session::SessionState>>::new());
    let session_for_tool = live_session.clone();
    let h = Harness::builder()
        .tool(tool(
            safe_spec("cancellable").interrupt_behavior(InterruptBehavior::Cancel),
            move |_, ctx| {
                let started = s1.clone();
                async move {
                    started.add_permits(1);
                    ctx.cancellation.cancelled().await;
                    Ok(ToolOutput::text("partial"))
                }
            },
        ))
        .tool(tool(
            safe_spec("blocking").interrupt_behavior(InterruptBehavior::Block),
            move |_, _ctx| {
                let started = s2.clone();
                let session = session_for_tool.clone();
                async move {
                    // The batch's interrupt token, as it was when this call started.
                    let interrupt = session
                        .get()
                        .expect("set before the batch runs")
                        .interrupt_token();
                    started.add_permits(1);
                    // Finishes only after the interrupt fired: it must survive it.
                    interrupt.cancelled().await;
                    Ok(ToolOutput::text("finished"))
                }
            },
        ))
        .tool(tool(unsafe_spec("queued"), |_, _| async {
            Ok(ToolOutput::text("must not run"))
        }))
        .build();
    let _ = live_session.set(h.session.clone());
    let session = h.session.clone();
    let interrupter = tokio::spawn(async move {
        let _both = started.acquire_many(2).await.unwrap();
        session.interrupt();
    });
    let outcome = h
        .run(vec![
            call("c", "cancellable", json!({})),
            call("b", "blocking", json!({})),
            call("q", "queued", json!({})),
        ])
        .await;
    interrupter.await.unwrap();
    let r = &outcome.results;
    assert_eq!(r[0].error_kind, Some(ErrorKind::Cancelled));
    assert!(r[0].output.starts_with("CancelledError: ") && r[0].output.contains("partial"));
    assert!(!r[1].is_error, "{:?}", r[1]);
    assert_eq!(r[1].output, "finished");
    assert_eq!(
        r[2].error_kind,
        Some(ErrorKind::Cancelled),
        "queued calls do not start"
    );
    // The interrupt does not reach the next batch.
    let next = h.run(vec![call("n", "queued", json!({}))]).await;
    assert_eq!(next.results[0].output, "must not run");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_call_past_its_timeout_is_stopped_with_its_partial_output() {
    let h = Harness::builder()
        .tool(tool(
            safe_spec("slow").timeout(Duration::from_millis(50)),
            |_, ctx| async move {
                ctx.cancellation.cancelled().await;
                Ok(ToolOutput::text("half done"))
            },
        ))
        .tool(tool(
            safe_spec("stubborn").timeout(Duration::from_millis(50)),
            |_, _| async move {
                // Ignores cancellation: dropped after the grace period.
                tokio::time::sleep(Duration::from_secs(3600)).await;
                Ok(ToolOutput::text("never"))
            },
        ))
        .build();
    let outcome = h
        .run(vec![
            call("a", "slow", json!({})),
            call("b", "stubborn", json!({})),
        ])
        .await;
    for result in &outcome.results {
        assert_eq!(result.error_kind, Some(ErrorKind::Timeout));
        assert!(
            result.output.starts_with("TimeoutError: "),
            "{}",
            result.output
        );
        assert!(result.output.contains("50 ms"), "{}", result.output);
    }
    assert!(outcome.results[0].output.contains("half done"));
}
