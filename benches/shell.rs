//! What the shell costs: classifying a command (tree-sitter parse and walk, as the dispatcher
//! does several times per call), and running `true` end to end through the `bash` tool,
//! unsandboxed, under bubblewrap and under Landlock (each sandbox only where this machine
//! offers it; a missing one is reported and skipped).

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::json;
use toold::permission::PermissionLevel;
use toold::session::{SessionConfig, SessionState};
use toold::tool::Tool;
use toold::tool::ToolContext;
use toold::tools::{
    BackgroundShells, SandboxCapability, SandboxMode, SandboxSettings, ShellSandbox, SpillSettings,
};

/// The `bash` tool with shells in `mode`'s sandbox, or `None` when the machine lacks it.
fn sandboxed_bash(mode: SandboxMode, data_dir: &std::path::Path) -> Option<Arc<dyn Tool>> {
    let settings = SandboxSettings {
        mode,
        ..SandboxSettings::default()
    };
    let sandbox = ShellSandbox::resolve(&settings, &SandboxCapability::probe(), data_dir);
    if !sandbox.confines() {
        eprintln!("skipping bash true under {mode:?}: {}", sandbox.describe());
        return None;
    }
    let shells = Arc::new(BackgroundShells::with_settings(
        SpillSettings::default(),
        sandbox,
    ));
    Some(shells.tools().expect("shell tools build")[0].clone())
}

fn bench(c: &mut Criterion) {
    let tools = Arc::new(BackgroundShells::default())
        .tools()
        .expect("shell tools build");
    let bash = tools[0].clone();
    let workspace = tempfile::tempdir().expect("workspace");
    let session = Arc::new(SessionState::new(
        SessionConfig::new("bench", PathBuf::from(workspace.path()))
            .permission_mode(PermissionLevel::DangerFullAccess),
    ));

    let mut group = c.benchmark_group("shell");
    group.measurement_time(Duration::from_secs(5));
    let round = AtomicU64::new(0);
    for command in [
        "git status",
        "ls -la src | grep rs | wc -l",
        "find . -name '*.rs' -exec grep -l foo {} + 2>/dev/null | head",
    ] {
        group.bench_function(format!("classify {command}"), |b| {
            b.iter(|| {
                // A distinct comment defeats the classifier's cache without changing the verdict.
                let n = round.fetch_add(1, Ordering::Relaxed);
                let input = json!({"command": format!("{command} # {n}")});
                bash.spec().is_concurrency_safe(&input, &session)
            })
        });
    }
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    group.bench_function("bash true unsandboxed", |b| {
        b.to_async(&runtime).iter(|| async {
            let ctx = ToolContext::detached(session.clone());
            let output = bash.execute(json!({"command": "true"}), &ctx).await;
            assert!(output.is_ok_and(|o| !o.is_error));
        })
    });
    // Authorised at workspace_write, so the sandbox applies.
    let confined = Arc::new(SessionState::new(
        SessionConfig::new("bench_sandboxed", PathBuf::from(workspace.path()))
            .permission_mode(PermissionLevel::WorkspaceWrite),
    ));
    let data_dir = tempfile::tempdir().expect("data dir");
    for (mode, name, expected) in [
        (SandboxMode::Bwrap, "bash true under bubblewrap", "bwrap"),
        (
            SandboxMode::Landlock,
            "bash true under landlock",
            "landlock",
        ),
    ] {
        let Some(bash) = sandboxed_bash(mode, data_dir.path()) else {
            continue;
        };
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                let ctx = ToolContext::detached(confined.clone());
                let output = bash.execute(json!({"command": "true"}), &ctx).await;
                assert!(output.is_ok_and(
                    |o| !o.is_error && o.metadata.get("sandbox") == Some(&json!(expected))
                ));
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
