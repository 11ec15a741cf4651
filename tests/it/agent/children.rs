//! Child sessions through the service in process (`service::harness::Daemon`): what
//! `open_child` gives (the parent's workspace, mode, rules and principal), what its token may
//! and may not do, and how the parent's close and interrupt reach it.

use serde_json::json;
use toold::permission::Principal;
use toold::registry::calls::BatchRequest;
use toold::service::{
    Closed, CreateSessionRequest, ErrorCode, Registration, ToolService, Transport,
};

use crate::service::harness::{Daemon, admin, calls};

/// The principal a child token stands for, as the doors' gate resolves it.
fn holder(service: &ToolService, token: &str) -> Principal {
    service
        .session_tokens()
        .principal_for(token)
        .expect("an open child's token is known")
}

#[tokio::test]
async fn a_child_has_its_parents_workspace_mode_rules_and_principal() {
    let daemon = Daemon::start().await;
    let parent = daemon
        .session(json!({"permission_mode": "read_only",
            "rules": {"deny": ["bash(rm:*)"], "ask": ["bash(git push:*)"]}}))
        .await;
    let child = daemon
        .service
        .open_child(&parent.id, "call_1")
        .await
        .unwrap();
    let info = daemon
        .service
        .get_session(&admin(), &child.session_id)
        .unwrap();
    assert_eq!(info.parent_session_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(info.working_directory, parent.working_directory);
    assert_eq!(info.permission_mode, parent.permission_mode);
    assert_eq!(info.rules, parent.rules);
    assert_eq!(info.principal, parent.principal);
    assert_eq!(info.metadata, json!({"agent_call_id": "call_1"}));
    let shown = serde_json::to_value(&info).unwrap();
    assert_eq!(shown["parent_session_id"], json!(parent.id));
    // The inherited deny rule holds in the child, and so does the parent's mode.
    let body = daemon
        .batch(
            &child.session_id,
            calls(json!([
                {"id": "rm", "name": "bash", "input": {"command": "rm -f x"}},
                {"id": "w", "name": "write_file", "input": {"file_path": "x.txt", "content": "x"}},
            ])),
        )
        .await;
    assert_eq!(
        body["results"][0]["error_kind"], "permission_denied",
        "{body}"
    );
    assert!(
        body["results"][0]["output"]
            .as_str()
            .unwrap()
            .contains("bash(rm:*)"),
        "{body}"
    );
    assert_eq!(
        body["results"][1]["error_kind"], "permission_denied",
        "{body}"
    );
    assert!(!parent.working_directory.join("x.txt").exists());
}

#[tokio::test]
async fn a_child_token_acts_on_its_child_alone() {
    let daemon = Daemon::start().await;
    let service = &daemon.service;
    let parent = daemon.session(json!({})).await;
    let other = daemon.session(json!({})).await;
    let child = service.open_child(&parent.id, "call_1").await.unwrap();
    let scoped = holder(service, &child.token);
    assert_eq!(
        scoped.session_scope.as_deref(),
        Some(child.session_id.as_str())
    );
    assert_eq!(
        &*scoped.name,
        Principal::LOCAL,
        "named after the parent's principal"
    );

    // Its own session: read, run, interrupt.
    service.get_session(&scoped, &child.session_id).unwrap();
    let batch = BatchRequest::from_json(&calls(json!([
        {"id": "w", "name": "write_file", "input": {"file_path": "from_child.txt", "content": "hi"}}
    ])))
    .unwrap();
    let outcome = service
        .execute_batch(&scoped, &child.session_id, batch)
        .await
        .unwrap();
    assert!(!outcome.results[0].is_error, "{:?}", outcome.results[0]);
    assert!(parent.working_directory.join("from_child.txt").exists());
    service.interrupt(&scoped, &child.session_id).unwrap();
    let listed: Vec<String> = service
        .list_sessions(&scoped)
        .into_iter()
        .map(|s| s.id)
        .collect();
    assert_eq!(listed, std::slice::from_ref(&child.session_id));

    // Anything else: a missing id's answer, word for word; creating: forbidden.
    for elsewhere in [&parent.id, &other.id] {
        let refused = service.get_session(&scoped, elsewhere).unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound);
        assert_eq!(refused.message, format!("unknown session \"{elsewhere}\""));
        let batch = BatchRequest::from_json(&calls(json!([
            {"id": "r", "name": "read_file", "input": {"file_path": "from_child.txt"}}
        ])))
        .unwrap();
        let refused = service
            .execute_batch(&scoped, elsewhere, batch)
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound);
        assert_eq!(
            service.interrupt(&scoped, elsewhere).unwrap_err().code,
            ErrorCode::NotFound
        );
        let refused = service
            .list_calls(&scoped, elsewhere, None, 10, Closed::Readable)
            .await
            .unwrap_err();
        assert_eq!(refused.code, ErrorCode::NotFound);
    }
    let refused = service
        .create_session(&scoped, CreateSessionRequest::default())
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Forbidden);
    assert!(
        refused.message.contains("scoped to session"),
        "{}",
        refused.message
    );
    let refused = service
        .create_session(
            &scoped,
            CreateSessionRequest {
                parent_session_id: Some(child.session_id.clone()),
                ..CreateSessionRequest::default()
            },
        )
        .await
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::Forbidden);
    // Nor may it provide tools, or see or answer its principal's provider connections.
    let registration = Registration {
        provider: "agent".into(),
        tools: Vec::new(),
        global: false,
    };
    let connection = service
        .provide_tools(&admin(), registration.clone(), Transport::Http)
        .unwrap();
    let refused = service
        .provide_tools(&scoped, registration, Transport::Http)
        .err()
        .expect("refused");
    assert_eq!(refused.code, ErrorCode::Forbidden);
    assert!(service.providers(&scoped).is_empty());
    let refused = service
        .disconnect_provider(&scoped, &connection.id)
        .unwrap_err();
    assert_eq!(refused.code, ErrorCode::NotFound);
    // Its default session (a door's stateless requests) is its child, never a new one.
    let default = service
        .default_session(&scoped, &CreateSessionRequest::default())
        .await
        .unwrap();
    assert_eq!(default, child.session_id);
    assert_eq!(service.list_sessions(&admin()).len(), 3);

    // The call that opened it ends: the child closes and its token is dead.
    service.close_child(&child.session_id).await;
    assert!(
        service
            .session_tokens()
            .principal_for(&child.token)
            .is_none()
    );
    assert_eq!(
        service
            .get_session(&admin(), &child.session_id)
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    service.close_child(&child.session_id).await;
}

#[tokio::test]
async fn closing_the_parent_closes_its_children_and_ends_their_tokens() {
    let daemon = Daemon::start().await;
    let service = &daemon.service;
    let parent = daemon.session(json!({})).await;
    let child = service.open_child(&parent.id, "call_1").await.unwrap();
    let grandchild = service
        .open_child(&child.session_id, "call_2")
        .await
        .unwrap();
    let unrelated = daemon.session(json!({})).await;
    service.close_session(&admin(), &parent.id).await.unwrap();
    for closed in [&child, &grandchild] {
        assert!(
            service
                .session_tokens()
                .principal_for(&closed.token)
                .is_none()
        );
        assert_eq!(
            service
                .get_session(&admin(), &closed.session_id)
                .unwrap_err()
                .code,
            ErrorCode::NotFound
        );
        let stored = service
            .store()
            .get_session(&closed.session_id)
            .await
            .unwrap()
            .unwrap();
        assert!(
            stored.closed_at.is_some(),
            "{} is closed in the store",
            closed.session_id
        );
    }
    service.get_session(&admin(), &unrelated.id).unwrap();
    // Opening a child of a closed (or unknown) session fails with a clear message.
    let refused = service.open_child(&parent.id, "call_3").await.unwrap_err();
    assert!(
        refused.contains(&format!("unknown session \"{}\"", parent.id)),
        "{refused}"
    );
}

#[tokio::test]
async fn interrupting_the_parent_cancels_the_childs_running_call() {
    let daemon = Daemon::start().await;
    let parent = daemon.session(json!({})).await;
    let child = daemon
        .service
        .open_child(&parent.id, "call_1")
        .await
        .unwrap();
    let running = daemon.running_sleep(&child.session_id).await;
    daemon.service.interrupt(&admin(), &parent.id).unwrap();
    let body = running.await.unwrap().unwrap().json();
    assert_eq!(body["results"][0]["error_kind"], "cancelled", "{body}");
}

#[tokio::test]
async fn after_a_restart_an_agent_calls_child_is_closed_and_a_requested_one_kept() {
    let daemon = Daemon::start().await;
    let parent = daemon.session(json!({})).await;
    let for_call = daemon
        .service
        .open_child(&parent.id, "call_1")
        .await
        .unwrap();
    let requested = daemon
        .session(json!({"parent_session_id": parent.id}))
        .await;
    let restarted = daemon.restart().await;
    let service = &restarted.service;
    service.get_session(&admin(), &parent.id).unwrap();
    let kept = service.get_session(&admin(), &requested.id).unwrap();
    assert_eq!(kept.parent_session_id.as_deref(), Some(parent.id.as_str()));
    assert_eq!(
        service
            .get_session(&admin(), &for_call.session_id)
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
    assert!(
        service
            .session_tokens()
            .principal_for(&for_call.token)
            .is_none()
    );
    // The kept child still closes with its parent.
    service.close_session(&admin(), &parent.id).await.unwrap();
    assert_eq!(
        service
            .get_session(&admin(), &requested.id)
            .unwrap_err()
            .code,
        ErrorCode::NotFound
    );
}
