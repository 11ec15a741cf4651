//! The hub on its own: registration refusals, which sessions see which tools, sharing calls
//! between connections, a dropped connection's calls, and the `agent` tool's child session
//! (through a test implementation of the port; the service's is tested end to end).

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};

use serde_json::{Value, json};

use super::*;
use crate::permission::{Principal, Role};
use crate::tool::{FileStateEntry, PermissionLevel, SessionView, ToolContext};

#[derive(Debug)]
struct View;

impl SessionView for View {
    fn id(&self) -> &str {
        "sess_parent"
    }
    fn shared_id(&self) -> Arc<str> {
        Arc::from("sess_parent")
    }
    fn working_directory(&self) -> &Path {
        Path::new("/tmp")
    }
    fn real_working_directory(&self) -> &Path {
        Path::new("/tmp")
    }
    fn permission_mode(&self) -> PermissionLevel {
        PermissionLevel::WorkspaceWrite
    }
    fn interactive(&self) -> bool {
        false
    }
    fn shell_cwd(&self) -> PathBuf {
        PathBuf::from("/tmp")
    }
    fn file_state(&self, _path: &Path) -> Option<FileStateEntry> {
        None
    }
    fn todos(&self) -> Value {
        json!([])
    }
    fn loaded_tools(&self) -> BTreeSet<String> {
        BTreeSet::new()
    }
    fn runtime_setting(&self, _key: &str) -> Option<Value> {
        None
    }
    fn network_requested(&self) -> bool {
        false
    }
    fn output_schema(&self) -> Option<&Value> {
        None
    }
}

fn hub() -> Arc<ProviderHub> {
    ProviderHub::new(["read_file".to_owned(), "jira__search".to_owned()])
}

fn agent(name: &str) -> Principal {
    Principal::new(name, Role::Agent)
}

fn registration(provider: &str, tools: &[&str]) -> Registration {
    Registration {
        provider: provider.to_owned(),
        tools: tools
            .iter()
            .map(|name| ToolDeclaration {
                name: (*name).to_owned(),
                description: format!("{name} things"),
                ..ToolDeclaration::default()
            })
            .collect(),
        global: false,
    }
}

fn refusal(result: Result<ProviderConnection, Refusal>) -> Refusal {
    match result {
        Ok(connection) => panic!("registered {}", connection.provider),
        Err(refusal) => refusal,
    }
}

#[test]
fn registrations_are_refused_with_the_reason() {
    let hub = hub();
    let a = agent("a");
    let cases: Vec<(Principal, Registration, RefusalKind, &str)> = vec![
        (
            Principal::new("o", Role::Observer),
            registration("p", &["t"]),
            RefusalKind::Forbidden,
            "observers",
        ),
        (
            a.clone(),
            Registration {
                global: true,
                ..registration("p", &["t"])
            },
            RefusalKind::Forbidden,
            "global",
        ),
        (
            a.clone(),
            registration("bad name", &["t"]),
            RefusalKind::Invalid,
            "does not match",
        ),
        (
            a.clone(),
            registration("", &["t"]),
            RefusalKind::Invalid,
            "does not match",
        ),
        (
            a.clone(),
            registration("mcp", &["t"]),
            RefusalKind::Invalid,
            "reserved",
        ),
        (
            a.clone(),
            registration("a__b", &["t"]),
            RefusalKind::Invalid,
            "reserved",
        ),
        (
            a.clone(),
            registration("p", &[]),
            RefusalKind::Invalid,
            "declares no tools",
        ),
        (
            a.clone(),
            registration("p", &["t", "t"]),
            RefusalKind::Held,
            "twice",
        ),
        (
            a.clone(),
            registration("p", &["x.y"]),
            RefusalKind::Invalid,
            "must match",
        ),
        (
            a.clone(),
            registration("p", &[&"t".repeat(62)]),
            RefusalKind::Invalid,
            "must match",
        ),
        (
            a.clone(),
            registration("p", &[&"t".repeat(32)]),
            RefusalKind::Invalid,
            "longer than 31",
        ),
        (
            a.clone(),
            registration(&"p".repeat(32), &["t"]),
            RefusalKind::Invalid,
            "longer than 31",
        ),
        (
            a.clone(),
            registration("jira", &["search"]),
            RefusalKind::Invalid,
            "shadow",
        ),
    ];
    for (principal, registration, kind, says) in cases {
        let refused = refusal(hub.connect(&principal, registration.clone(), Transport::Grpc));
        assert_eq!(refused.kind, kind, "{registration:?}: {refused}");
        assert!(
            refused.message.contains(says),
            "{registration:?}: {refused}"
        );
    }
    let mut bad_schema = registration("p", &["t"]);
    bad_schema.tools[0].input_schema =
        Some(json!({"type": "object", "properties": {"x": {"type": 7}}}));
    let refused = refusal(hub.connect(&a, bad_schema, Transport::Grpc));
    assert_eq!(refused.kind, RefusalKind::Invalid);
    assert!(refused.message.contains("p__t"), "{refused}");
    let mut not_object = registration("p", &["t"]);
    not_object.tools[0].input_schema = Some(json!({"type": "string"}));
    assert_eq!(
        refusal(hub.connect(&a, not_object, Transport::Grpc)).kind,
        RefusalKind::Invalid
    );
    assert_eq!(hub.generation(), 0, "nothing refused connected");
}

#[test]
fn a_name_is_held_by_its_principal_while_connected() {
    let hub = hub();
    let first = hub
        .connect(&agent("a"), registration("p", &["t"]), Transport::Grpc)
        .unwrap();
    assert_eq!(first.tools, vec!["p__t".to_owned()]);
    let held = refusal(hub.connect(&agent("b"), registration("p", &["t"]), Transport::Http));
    assert_eq!(held.kind, RefusalKind::Held);
    assert!(held.message.contains("another principal"), "{held}");
    let other_tools = refusal(hub.connect(&agent("a"), registration("p", &["u"]), Transport::Grpc));
    assert_eq!(other_tools.kind, RefusalKind::Held);
    let second = hub
        .connect(&agent("a"), registration("p", &["t"]), Transport::Http)
        .unwrap();
    drop(first);
    drop(second);
    assert!(hub.status(&Principal::local()).is_empty());
    hub.connect(&agent("b"), registration("p", &["t"]), Transport::Http)
        .unwrap();
}

#[test]
fn sessions_see_named_providers_of_their_principal_or_an_admin_and_global_ones() {
    let hub = hub();
    let generation = hub.generation();
    let _own = hub
        .connect(&agent("a"), registration("own", &["t"]), Transport::Grpc)
        .unwrap();
    let _admin = hub
        .connect(
            &Principal::local(),
            registration("adm", &["t"]),
            Transport::Grpc,
        )
        .unwrap();
    let _global = hub
        .connect(
            &Principal::local(),
            Registration {
                global: true,
                ..registration("all", &["t"])
            },
            Transport::Grpc,
        )
        .unwrap();
    assert_ne!(hub.generation(), generation);
    let names = |owner: &str, named: &[&str]| -> Vec<String> {
        let named: Vec<String> = named.iter().map(|n| (*n).to_owned()).collect();
        hub.tools(Some(owner), &named)
            .iter()
            .map(|t| t.name().to_owned())
            .collect()
    };
    assert_eq!(names("a", &[]), vec!["all__t"]);
    assert_eq!(
        names("a", &["own", "adm", "later"]),
        vec!["adm__t", "all__t", "own__t"]
    );
    assert_eq!(names("b", &["own", "adm"]), vec!["adm__t", "all__t"]);
    assert_eq!(hub.status(&agent("a")).len(), 1);
    assert_eq!(hub.status(&Principal::new("o", Role::Observer)).len(), 3);
}

fn context() -> ToolContext {
    ToolContext::detached(Arc::new(View))
}

/// Answers every invocation `connection` receives with its own id, until it closes.
fn answer_all(
    hub: Arc<ProviderHub>,
    mut connection: ProviderConnection,
) -> tokio::task::JoinHandle<Vec<Invocation>> {
    tokio::spawn(async move {
        let mut seen = Vec::new();
        while let Some(message) = connection.outbound.recv().await {
            if let Outbound::Invoke(invocation) = message {
                hub.result(
                    &connection.id,
                    &invocation.invocation_id,
                    connection.id.clone(),
                    false,
                );
                seen.push(invocation);
            }
        }
        seen
    })
}

#[tokio::test]
async fn connections_share_calls_and_a_dropped_one_fails_its_calls_naming_the_provider() {
    let hub = hub();
    let a = agent("a");
    let one = hub
        .connect(&a, registration("p", &["t"]), Transport::Grpc)
        .unwrap();
    let two = hub
        .connect(&a, registration("p", &["t"]), Transport::Grpc)
        .unwrap();
    let (one_id, two_id) = (one.id.clone(), two.id.clone());
    let first = answer_all(hub.clone(), one);
    let second = answer_all(hub.clone(), two);
    let tool = hub.tools(Some("a"), &["p".to_owned()])[0].clone();
    let mut by = std::collections::HashMap::new();
    for n in 0..20 {
        let output = tool
            .tool
            .execute(json!({"n": n}), &context())
            .await
            .unwrap();
        assert!(!output.is_error, "{}", output.text);
        *by.entry(output.text).or_insert(0) += 1;
    }
    assert_eq!(by.get(&one_id), Some(&10), "{by:?}");
    assert_eq!(by.get(&two_id), Some(&10), "{by:?}");
    assert!(hub.disconnect(&one_id));
    assert!(hub.disconnect(&two_id));
    let seen = first.await.unwrap();
    assert_eq!(seen[0].tool, "t");
    assert!(seen[0].deadline_unix_ms > 0 && seen[0].child_session.is_none());
    second.await.unwrap();
    let gone = tool.tool.execute(json!({}), &context()).await.unwrap();
    assert!(
        gone.is_error && gone.text.contains("provider \"p\" is not connected"),
        "{}",
        gone.text
    );

    let mut silent = hub
        .connect(&a, registration("p", &["t"]), Transport::Http)
        .unwrap();
    let tool = hub.tools(Some("a"), &["p".to_owned()])[0].clone();
    let call = tokio::spawn(async move { tool.tool.execute(json!({}), &context()).await });
    let Some(Outbound::Invoke(invocation)) = silent.outbound.recv().await else {
        panic!("no invocation");
    };
    assert!(!hub.result("conn_other", &invocation.invocation_id, "x".into(), false));
    drop(silent);
    let failed = call.await.unwrap().unwrap();
    assert!(failed.is_error, "{}", failed.text);
    assert!(
        failed.text.contains("provider \"p\" lost its connection"),
        "{}",
        failed.text
    );
}

#[tokio::test]
async fn a_cancelled_call_sends_cancel() {
    let hub = hub();
    let mut connection = hub
        .connect(&agent("a"), registration("p", &["t"]), Transport::Grpc)
        .unwrap();
    let tool = hub.tools(Some("a"), &["p".to_owned()])[0].clone();
    let ctx = context();
    let cancel = ctx.cancellation.clone();
    let call = tokio::spawn(async move { tool.tool.execute(json!({}), &ctx).await });
    let Some(Outbound::Invoke(invocation)) = connection.outbound.recv().await else {
        panic!("no invocation");
    };
    cancel.cancel();
    let Some(Outbound::Cancel { invocation_id, .. }) = connection.outbound.recv().await else {
        panic!("no cancel");
    };
    assert_eq!(invocation_id, invocation.invocation_id);
    assert!(call.await.unwrap().unwrap().is_error);
    assert!(
        !hub.result(&connection.id, &invocation_id, "late".into(), false),
        "a late result is ignored"
    );
}

#[derive(Default)]
struct Children {
    log: Mutex<Vec<String>>,
}

#[async_trait::async_trait]
impl ChildSessions for Children {
    async fn open_child(&self, parent: &str, call_id: &str) -> Result<ChildSession, String> {
        self.log
            .lock()
            .unwrap()
            .push(format!("open {parent} {call_id}"));
        Ok(ChildSession {
            session_id: "sess_child".into(),
            token: "tok".into(),
        })
    }
    async fn close_child(&self, child: &str) {
        self.log.lock().unwrap().push(format!("close {child}"));
    }
}

#[tokio::test]
async fn the_agent_tool_runs_in_a_child_session_closed_when_the_call_ends() {
    let hub = hub();
    assert!(
        hub.tools(Some("a"), &[]).is_empty(),
        "no agent tool without its provider"
    );
    let connection = hub
        .connect(
            &agent("a"),
            registration("agent", &["agent", "helper"]),
            Transport::Grpc,
        )
        .unwrap();
    assert_eq!(connection.tools, vec!["agent__helper", "agent"]);
    let names: Vec<String> = hub
        .tools(Some("a"), &[])
        .iter()
        .map(|t| t.name().to_owned())
        .collect();
    assert_eq!(
        names,
        vec!["agent"],
        "the agent tool is in every session of its principal"
    );
    assert!(
        hub.tools(Some("b"), &[]).is_empty(),
        "another agent's sessions do not get it"
    );
    let tool = hub.tools(Some("a"), &[])[0].clone();
    let input = json!({"description": "d", "prompt": "p"});
    let unported = tool.tool.execute(input.clone(), &context()).await.unwrap();
    assert!(
        unported.is_error && unported.text.contains("no child sessions"),
        "{}",
        unported.text
    );

    let children = Arc::new(Children::default());
    let port: Arc<dyn ChildSessions> = children.clone();
    hub.set_child_sessions(Arc::downgrade(&port));
    let answers = answer_all(hub.clone(), connection);
    let ctx = context();
    let output = tool.tool.execute(input, &ctx).await.unwrap();
    assert!(!output.is_error, "{}", output.text);
    assert_eq!(
        *children.log.lock().unwrap(),
        vec![
            format!("open sess_parent {}", ctx.call_id),
            "close sess_child".to_owned()
        ]
    );
    hub.disconnect(&output.text);
    let invocations = answers.await.unwrap();
    assert_eq!(invocations[0].tool, "agent");
    assert_eq!(
        invocations[0].child_session,
        Some(ChildSession {
            session_id: "sess_child".into(),
            token: "tok".into()
        })
    );
}
