//! What a permission decision costs the dispatcher: the mode alone, a compound bash line
//! against a dozen rules (tree-sitter split, broad deny/ask, narrow allow), and a file path
//! against gitignore-style rules (symlink resolution included).

use std::sync::Arc;
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use serde_json::{Value, json};
use toold::dispatch::InMemoryResultStore;
use toold::event::EventBus;
use toold::permission::{
    PermissionLevel, PermissionPolicy, PermissionRequest, RuleContext, RulePolicy, RuleSet,
    RuleSource, SessionRules,
};
use toold::session::{SessionConfig, SessionState};
use toold::store::{SqliteStore, Store, StoreApprovals as Approvals};
use toold::tools::{BackgroundShells, ToolDeps, builtin_registry};

fn strings(texts: &[&str]) -> Vec<String> {
    texts.iter().map(|t| (*t).to_owned()).collect()
}

fn bench(c: &mut Criterion) {
    let runtime = tokio::runtime::Runtime::new().expect("runtime");
    let dir = tempfile::tempdir().expect("dir");
    let workspace = dir.path().canonicalize().expect("canonical");
    std::fs::create_dir_all(workspace.join("src")).expect("src");
    let store: Arc<dyn Store> = Arc::new(
        runtime
            .block_on(SqliteStore::open(
                &workspace.join("t.db").to_string_lossy(),
                "node",
            ))
            .expect("store"),
    );
    let registry = builtin_registry(&ToolDeps {
        results: Arc::new(InMemoryResultStore::default()),
        web_fetch: Default::default(),
        skills: Default::default(),
        shells: Arc::new(BackgroundShells::default()),
    })
    .expect("registry");
    let names = toold::service::tool_names(&registry);
    let context = RuleContext {
        workspace: &workspace,
        home: None,
        tools: &names,
    };
    let rules = SessionRules {
        server: RuleSet::parse(
            &strings(&[
                "bash(git status:*)",
                "bash(npm run test:*)",
                "bash(grep:*)",
                "Read(./src/**)",
            ]),
            &strings(&[
                "bash(rm:*)",
                "bash(curl:*)",
                "read_file(./secrets/**)",
                "Write(*.pem)",
            ]),
            &strings(&["bash(git push:*)", "edit_file(./config/**)"]),
            RuleSource::Server,
            &context,
        )
        .expect("server rules"),
        session: RuleSet::parse(
            &strings(&["bash(make:*)"]),
            &strings(&["bash(ls:*)"]),
            &[],
            RuleSource::Session,
            &context,
        )
        .expect("session rules"),
    };
    let mut config = SessionConfig::new("bench", workspace.clone());
    config.rules = Arc::new(rules);
    let ruled = SessionState::new(config);
    let bare = SessionState::new(SessionConfig::new("bench", workspace.clone()));
    let policy = RulePolicy::new(
        Arc::new(Approvals::new(store, EventBus::new(16))),
        Arc::new(names.clone()),
        None,
        Duration::from_secs(60),
    );

    let mut group = c.benchmark_group("permission");
    group.measurement_time(Duration::from_secs(5));
    let cases: [(&str, &SessionState, &str, Value); 3] = [
        (
            "mode only",
            &bare,
            "read_file",
            json!({"file_path": "src/main.rs"}),
        ),
        (
            "bash compound, 11 rules",
            &ruled,
            "bash",
            json!({"command": "git status && npm run test -- --watch | grep ok"}),
        ),
        (
            "read_file path, 11 rules",
            &ruled,
            "read_file",
            json!({"file_path": "src/main.rs"}),
        ),
    ];
    for (name, session, tool, input) in cases {
        group.bench_function(name, |b| {
            b.to_async(&runtime).iter(|| async {
                let decision = policy
                    .decide(&PermissionRequest {
                        session_id: "bench",
                        session,
                        batch_id: "b",
                        actor: None,
                        call_id: "c",
                        tool,
                        input: &input,
                        required: PermissionLevel::ReadOnly,
                        mode: PermissionLevel::WorkspaceWrite,
                        interactive: false,
                        hook_asked: None,
                    })
                    .await;
                assert!(decision.is_allow());
            })
        });
    }
    group.finish();
}

criterion_group!(benches, bench);
criterion_main!(benches);
