//! A pre-tool hook's `ask` reaches the approval flow of the daemon's policy
//! ([`RulePolicy`]): in an interactive session it becomes an approval that a resolution
//! answers, in a non-interactive one the call is blocked at once. Approvals live in a real
//! SQLite store.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use async_trait::async_trait;
use serde_json::json;
use toold::event::{EventBus, EventType};
use toold::hooks::{HookEvent, PreToolUseOutcome, PreToolVerdict, ToolHook};
use toold::permission::{
    Approver, DecidedBy, PermissionDecision, PermissionLevel, Resolution, RulePolicy, ToolNames,
};
use toold::store::{SessionRecord, SessionStore, SqliteStore, Store, StoreApprovals as Approvals};
use toold::tool::{ErrorKind, ToolOutput};

use crate::dispatch::harness::*;

/// Asks about every call.
struct AskingHook;

#[async_trait]
impl ToolHook for AskingHook {
    fn name(&self) -> &str {
        "confirm-everything"
    }

    fn matches(&self, _tool_name: &str) -> bool {
        true
    }

    async fn pre_tool_use(&self, _event: &HookEvent) -> PreToolUseOutcome {
        PreToolUseOutcome {
            verdict: PreToolVerdict::Ask {
                reason: "sure?".into(),
            },
            ..PreToolUseOutcome::default()
        }
    }
}

async fn harness(interactive: bool) -> (Harness, Arc<Approvals>, tempfile::TempDir) {
    let dir = tempfile::tempdir().unwrap();
    let store = SqliteStore::open(&dir.path().join("t.db").to_string_lossy(), "node")
        .await
        .unwrap();
    store
        .insert_session(&SessionRecord {
            id: "sess_test".into(),
            working_directory: dir.path().to_path_buf(),
            permission_mode: PermissionLevel::WorkspaceWrite,
            interactive,
            owner: "node".into(),
            principal: None,
            created_at: SystemTime::now(),
            closed_at: None,
            options: json!({}),
            state: json!({}),
        })
        .await
        .unwrap();
    let store: Arc<dyn Store> = Arc::new(store);
    // The approvals announce on the harness's bus.
    let events = EventBus::new(1024);
    let approvals = Arc::new(Approvals::new(store, events.clone()));
    let policy = RulePolicy::new(
        approvals.clone(),
        Arc::new(ToolNames::new(["echo"], [])),
        None,
        Duration::from_secs(60),
    );
    let harness = Harness::builder()
        .interactive(interactive)
        .tool(tool(safe_spec("echo"), |_, _| async {
            Ok(ToolOutput::text("ran"))
        }))
        .hook(Arc::new(AskingHook))
        .permission(Arc::new(policy))
        .events(events)
        .build();
    (harness, approvals, dir)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_ask_in_an_interactive_session_waits_for_an_approval() {
    let (h, approvals, _dir) = harness(true).await;
    let mut events = h.events.subscribe();
    let run = h.run(vec![call("c1", "echo", json!({}))]);
    let approve = async {
        let approval_id = loop {
            let event = crate::support::deadline::within(
                crate::support::deadline::STEP,
                "permission:ask",
                events.recv(),
            )
            .await
            .unwrap();
            if event.event_type == EventType::PermissionAsk {
                assert!(
                    event.data.value()["reason"]
                        .as_str()
                        .unwrap()
                        .contains("confirm-everything")
                );
                break event.data.value()["approval_id"]
                    .as_str()
                    .unwrap()
                    .to_owned();
            }
        };
        let resolution = Resolution {
            allow: true,
            reason: None,
            remember: false,
            approver: Approver::new("grpc", Some("t")),
        };
        assert!(approvals.resolve(&approval_id, resolution).await.unwrap());
    };
    let (outcome, ()) = tokio::join!(run, approve);
    assert_eq!(outcome.results[0].output, "ran", "{:?}", outcome.results[0]);
    let row = h.audit.records().pop().unwrap();
    let Some(PermissionDecision::Allow {
        decided_by: DecidedBy::Approver {
            approver, asked_by, ..
        },
    }) = row.decision
    else {
        panic!("decided by an approver: {:?}", row.decision)
    };
    assert_eq!(approver, "grpc");
    assert!(matches!(*asked_by, DecidedBy::Hook { ref hook } if hook == "confirm-everything"));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_hook_ask_in_a_non_interactive_session_is_blocked_at_once() {
    let (h, _approvals, _dir) = harness(false).await;
    let outcome = h.run(vec![call("c1", "echo", json!({}))]).await;
    let result = &outcome.results[0];
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::HookBlocked),
        "{result:?}"
    );
    assert!(
        result.output.contains("not interactive"),
        "{}",
        result.output
    );
}
