//! What a child session inherits and what it is refused (`child_request`), which session is
//! below which (`Children`), and the child tokens' life (`SessionTokens`).

use std::path::PathBuf;

use serde_json::json;

use super::*;
use crate::permission::PermissionLevel;
use crate::service::ErrorCode;
use crate::service::sessions::{SessionRuleTexts, ToolFilter};

fn parent() -> SessionInfo {
    SessionInfo {
        id: "sess_parent".into(),
        working_directory: PathBuf::from("/work/space"),
        permission_mode: PermissionLevel::WorkspaceWrite,
        interactive: false,
        owner: "node-a".into(),
        owner_address: None,
        principal: Some("agent-a".into()),
        created_at: "2026-01-01T00:00:00.000Z".into(),
        closed: false,
        rules: SessionRuleTexts {
            allow: vec!["bash(git status)".into()],
            deny: vec!["read_file(./secrets/**)".into()],
            ask: vec![],
        },
        tools: ToolFilter {
            deny: vec!["web_fetch".into()],
            mode: None,
        },
        mcp_servers: vec![],
        providers: vec!["jira".into()],
        metadata: json!({}),
        network: false,
        parent_session_id: None,
        from_snapshot: None,
        copy: None,
        environment: None,
    }
}

fn refused(request: CreateSessionRequest) -> String {
    let err = child_request(&parent(), request).expect_err("refused");
    assert_eq!(err.code, ErrorCode::Forbidden);
    err.message
}

#[test]
fn a_child_gets_the_parents_workspace_mode_rules_and_filter() {
    let request = CreateSessionRequest {
        rules: SessionRuleTexts {
            deny: vec!["bash(rm:*)".into(), "read_file(./secrets/**)".into()],
            ..SessionRuleTexts::default()
        },
        tools: ToolFilter {
            deny: vec!["sleep".into()],
            mode: Some(PermissionLevel::ReadOnly),
        },
        ..CreateSessionRequest::default()
    };
    let child = child_request(&parent(), request).unwrap();
    assert_eq!(child.parent_session_id.as_deref(), Some("sess_parent"));
    assert_eq!(child.working_directory, Some(PathBuf::from("/work/space")));
    assert_eq!(child.permission_mode, Some(PermissionLevel::WorkspaceWrite));
    assert_eq!(child.rules.allow, ["bash(git status)"]);
    // The parent's first, then the child's own; none twice.
    assert_eq!(child.rules.deny, ["read_file(./secrets/**)", "bash(rm:*)"]);
    assert_eq!(child.tools.deny, ["web_fetch", "sleep"]);
    assert_eq!(child.tools.mode, Some(PermissionLevel::ReadOnly));
    assert_eq!(child.providers, ["jira"]);
}

#[test]
fn a_narrower_mode_is_kept() {
    let request = CreateSessionRequest {
        permission_mode: Some(PermissionLevel::ReadOnly),
        ..CreateSessionRequest::default()
    };
    let child = child_request(&parent(), request).unwrap();
    assert_eq!(child.permission_mode, Some(PermissionLevel::ReadOnly));
}

#[test]
fn what_would_widen_the_parent_is_refused() {
    let wider = refused(CreateSessionRequest {
        permission_mode: Some(PermissionLevel::DangerFullAccess),
        ..CreateSessionRequest::default()
    });
    assert!(
        wider.contains(
            "permission_mode \"danger_full_access\" is wider than the parent's \"workspace_write\""
        ),
        "{wider}"
    );
    let filter = refused(CreateSessionRequest {
        tools: ToolFilter {
            mode: Some(PermissionLevel::DangerFullAccess),
            ..ToolFilter::default()
        },
        ..CreateSessionRequest::default()
    });
    assert!(filter.contains("tools.mode"), "{filter}");
    let allow = refused(CreateSessionRequest {
        rules: SessionRuleTexts {
            allow: vec!["write_file".into()],
            ..SessionRuleTexts::default()
        },
        ..CreateSessionRequest::default()
    });
    assert!(
        allow.contains("not allow rules") && allow.contains("write_file"),
        "{allow}"
    );
    let elsewhere = refused(CreateSessionRequest {
        working_directory: Some(PathBuf::from("/elsewhere")),
        ..CreateSessionRequest::default()
    });
    assert!(elsewhere.contains("\"/elsewhere\" differs"), "{elsewhere}");
    let interactive = refused(CreateSessionRequest {
        interactive: true,
        ..CreateSessionRequest::default()
    });
    assert!(interactive.contains("interactive"), "{interactive}");
    let network = refused(CreateSessionRequest {
        network: true,
        ..CreateSessionRequest::default()
    });
    assert!(network.contains("network"), "{network}");
}

#[test]
fn children_and_their_children_are_below_their_ancestors() {
    let children = Children::default();
    children.adopt("p", "c1");
    children.adopt("p", "c2");
    children.adopt("c1", "g1");
    children.adopt("other", "x");
    assert!(children.is_below("c1", "p"));
    assert!(children.is_below("g1", "p"));
    assert!(!children.is_below("p", "c1"));
    assert!(!children.is_below("x", "p"));
    assert!(!children.is_below("unknown", "p"));
    let mut below = children.below("p");
    below.sort();
    assert_eq!(below, ["c1", "c2", "g1"]);
    children.forget("p");
    assert!(!children.is_below("c1", "p"));
    assert!(children.is_below("g1", "c1"));
}

#[test]
fn a_token_names_its_scoped_principal_until_revoked() {
    let tokens = SessionTokens::default();
    assert_eq!(tokens.principal_for("anything"), None);
    let principal = Principal::new("agent-a", Role::Agent).scoped_to("sess_child");
    let token = tokens.mint(principal.clone()).unwrap();
    let other = tokens
        .mint(Principal::new("agent-b", Role::Agent).scoped_to("sess_other"))
        .unwrap();
    assert_ne!(token, other);
    assert_eq!(
        token.len(),
        "toold_child_".len() + 64,
        "256 bits in hex: {token}"
    );
    assert_eq!(tokens.principal_for(&token), Some(principal));
    assert_eq!(tokens.principal_for(&format!("{token}x")), None);
    assert_eq!(tokens.principal_for(""), None);
    tokens.revoke("sess_child");
    assert_eq!(tokens.principal_for(&token), None);
    assert_eq!(
        tokens
            .principal_for(&other)
            .unwrap()
            .session_scope
            .as_deref(),
        Some("sess_other")
    );
}
