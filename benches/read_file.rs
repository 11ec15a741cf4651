//! `read_file` of a 4 KiB text file, in process, with a detached context (no dispatcher, no
//! schema validation). `4_kib_in_process` calls `Tool::execute` alone, as an embedder would:
//! it resolves the path, opens it beneath the workspace (`openat2`), reads, hashes and numbers
//! it (on the calling thread when the file is in the page cache), and builds the file-state
//! update. Budget: 30 µs. `4_kib_validate_authorise_execute` adds what the dispatcher asks of
//! the tool before it runs: `validate_input` and the input's required permission.
//!
//! Iterations run inside one task on the runtime, as a call does inside its batch's task, so
//! the figure includes any hop to the blocking pool and back but not a hop per sample.

use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, Throughput, criterion_group, criterion_main};
use serde_json::json;
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ContextUpdate, Tool, ToolContext, ToolError, ToolOutput};
use toold::tools::ReadFile;

/// 64 lines of 63 characters and a newline: 4 096 bytes.
fn four_kib() -> String {
    let body = "abcdefghijklmnopqrstuvwxyz0123456789abcdefghijklmnopqrstuvwx";
    (0..64).map(|i| format!("{i:02} {body}\n")).collect()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
        .expect("runtime");
    let dir = tempfile::tempdir().expect("temporary directory");
    let workspace = dir.path().canonicalize().expect("canonical workspace");
    let content = four_kib();
    assert_eq!(content.len(), 4096);
    std::fs::write(workspace.join("four_kib.txt"), &content).expect("fixture");
    let session = Arc::new(SessionState::new(SessionConfig::new("bench", &workspace)));
    let ctx = ToolContext::detached(session);
    let tool = Arc::new(ReadFile::new().expect("read_file builds"));
    let input = json!({"file_path": "four_kib.txt"});

    // The benchmark measures a read that works.
    let output = runtime
        .block_on(tool.execute(input.clone(), &ctx))
        .expect("the read succeeds");
    assert_eq!(output.text.lines().count(), 64);
    assert!(matches!(
        output.context_updates.as_slice(),
        [ContextUpdate::FileState(entry)] if entry.size == 4096 && !entry.partial
    ));

    let mut group = c.benchmark_group("read_file");
    group.measurement_time(Duration::from_secs(5));
    group.throughput(Throughput::Bytes(4096));
    group.bench_function("4_kib_in_process", |b| {
        b.iter_custom(|iters| {
            let (tool, ctx, input) = (tool.clone(), ctx.clone(), input.clone());
            let timed = runtime.spawn(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let output = tool.execute(input.clone(), &ctx).await;
                    std::hint::black_box(output.expect("the read succeeds"));
                }
                start.elapsed()
            });
            runtime.block_on(timed).expect("benchmark task")
        })
    });
    group.bench_function("4_kib_validate_authorise_execute", |b| {
        b.iter_custom(|iters| {
            let (tool, ctx, input) = (tool.clone(), ctx.clone(), input.clone());
            let timed = runtime.spawn(async move {
                let start = Instant::now();
                for _ in 0..iters {
                    let output = validate_authorise_execute(&tool, &input, &ctx).await;
                    std::hint::black_box(output.expect("the read succeeds"));
                }
                start.elapsed()
            });
            runtime.block_on(timed).expect("benchmark task")
        })
    });
    group.finish();
}

/// The tool's part of a dispatched call: semantic validation, the permission the input needs
/// (the policy's decision itself is `benches/permission.rs`'s business), then the run.
async fn validate_authorise_execute(
    tool: &ReadFile,
    input: &serde_json::Value,
    ctx: &ToolContext,
) -> Result<ToolOutput, ToolError> {
    tool.validate_input(input, ctx).await?;
    let required = tool.spec().required_permission(input, ctx);
    let mut ctx = ctx.clone();
    ctx.authorized = required;
    tool.execute(input.clone(), &ctx).await
}

criterion_group!(benches, bench);
criterion_main!(benches);
