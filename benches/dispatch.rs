//! Pure dispatch overhead: a no-op tool through the whole pipeline (classification, schema
//! validation, permission, execution, offload check, in-memory audit, events), one call and a
//! 100-call read-only batch. The per-call figure for the batch is the time per batch / 100.
//! The audit sink counts rows instead of keeping them: what a row costs to make durable is the
//! store's figure (measured with the store), and an ever-growing in-memory log would measure
//! the allocator rather than dispatch.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::{Value, json};
use toold::dispatch::{
    AuditRecord, AuditSink, DispatchDeps, DispatchSettings, Dispatcher, SinkError,
};
use toold::event::EventBus;
use toold::permission::PermissionLevel;
use toold::registry::{PoolOptions, ToolPool, ToolRegistry};
use toold::session::{SessionConfig, SessionState};
use toold::tool::{Tool, ToolCall, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Counts audit rows, so the benchmark can check every call was audited.
#[derive(Default)]
struct CountingAudit {
    rows: AtomicU64,
}

#[async_trait]
impl AuditSink for CountingAudit {
    async fn record(&self, _record: AuditRecord) -> Result<(), SinkError> {
        self.rows.fetch_add(1, Ordering::Relaxed);
        Ok(())
    }
}

struct Noop {
    spec: ToolSpec,
}

#[async_trait]
impl Tool for Noop {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn execute(&self, _input: Value, _ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        Ok(ToolOutput::text("ok"))
    }
}

fn setup() -> (
    Dispatcher,
    Arc<SessionState>,
    Arc<ToolPool>,
    Arc<CountingAudit>,
) {
    let spec = ToolSpec::builder("noop")
        .description("does nothing")
        .input_schema(json!({"type": "object", "properties": {"n": {"type": "integer"}}}))
        .read_only(true)
        .concurrency_safe(true)
        .destructive(false)
        .permission(PermissionLevel::ReadOnly)
        .max_result_size_chars(Some(100_000))
        .build()
        .expect("bench spec builds");
    let mut registry = ToolRegistry::new();
    registry
        .register(Arc::new(Noop { spec }))
        .expect("registers");
    let session = Arc::new(SessionState::new(
        SessionConfig::new("bench", PathBuf::from("/tmp"))
            .permission_mode(PermissionLevel::ReadOnly),
    ));
    let pool = Arc::new(ToolPool::assemble(
        &registry,
        &[],
        &session,
        &PoolOptions::for_mode(PermissionLevel::ReadOnly),
    ));
    // A subscriber keeps the event bus doing its real work (it drops what it cannot keep).
    let events = EventBus::new(1024);
    std::mem::forget(events.subscribe());
    let audit = Arc::new(CountingAudit::default());
    let deps = DispatchDeps {
        audit: audit.clone(),
        ..DispatchDeps::in_memory(events)
    };
    let dispatcher = Dispatcher::new(deps, DispatchSettings::default());
    (dispatcher, session, pool, audit)
}

fn calls(n: usize) -> Vec<ToolCall> {
    (0..n)
        .map(|i| ToolCall::new(format!("c{i}"), "noop", json!({"n": i})))
        .collect()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let (dispatcher, session, pool, audit) = setup();
    let mut group = c.benchmark_group("dispatch");
    group.measurement_time(Duration::from_secs(5));
    for n in [1usize, 100] {
        group.throughput(Throughput::Elements(n as u64));
        group.bench_function(format!("noop_batch_{n}"), |b| {
            // Batches are driven from a task on the runtime, as a door's handler drives them;
            // only the start and end of each sample cross threads.
            b.iter_custom(|iters| {
                let (dispatcher, session, pool) =
                    (dispatcher.clone(), session.clone(), pool.clone());
                let timed = runtime.spawn(async move {
                    let start = Instant::now();
                    for _ in 0..iters {
                        let batch = dispatcher
                            .execute_batch(session.clone(), pool.clone(), calls(n))
                            .await;
                        std::hint::black_box(batch);
                    }
                    start.elapsed()
                });
                runtime.block_on(timed).expect("benchmark task")
            })
        });
    }
    group.finish();
    let batch =
        runtime.block_on(dispatcher.execute_batch(session.clone(), pool.clone(), calls(100)));
    assert_eq!(batch.results.len(), 100);
    assert!(
        batch.results.iter().all(|r| !r.is_error),
        "no-op calls must succeed"
    );
    println!(
        "audit rows written during the run: {}",
        audit.rows.load(Ordering::Relaxed)
    );
}

criterion_group!(benches, bench);
criterion_main!(benches);
