//! `Snapshot` and `Fork` over gRPC, seen through `GetFile`: a snapshot starts a session with
//! what it froze, a fork's sessions see the parent's files and stay apart; bad counts and
//! names; another agent's session NOT_FOUND on all four transfer RPCs (as a missing id is), an
//! observer's writes PERMISSION_DENIED.

use serde_json::json;
use tonic::Code;
use toold::api::grpc::proto;

use super::files::{file, get, put, target};
use crate::grpc::harness::{Client, Toold};

async fn read_text(client: &mut Client, session: &str, path: &str) -> String {
    let (_, bytes) = get(client, tonic::Request::new(file(session, path)))
        .await
        .unwrap_or_else(|status| panic!("{session}:{path}: {status:?}"));
    String::from_utf8(bytes).unwrap()
}

async fn write_text(client: &mut Client, session: &str, path: &str, text: &str) {
    put(
        client,
        tonic::Request::new(target(session, path)),
        text.as_bytes(),
    )
    .await
    .unwrap_or_else(|status| panic!("{session}:{path}: {status:?}"));
}

#[tokio::test]
async fn a_snapshot_starts_sessions_and_a_fork_makes_sessions_that_see_its_files() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, _) = toold.session(&mut client).await;
    write_text(&mut client, &session, "note.txt", "first").await;
    let snapshot = client
        .snapshot(proto::SnapshotRequest {
            session_id: session.clone(),
            name: "before".into(),
        })
        .await
        .expect("a snapshot")
        .into_inner();
    assert!(snapshot.id.starts_with("snap_"), "{snapshot:?}");
    assert_eq!(snapshot.name, "before");
    assert_eq!(snapshot.session_id, session);
    assert!(snapshot.size_bytes >= 5, "{snapshot:?}");
    assert!(!snapshot.created_at.is_empty());
    assert!(snapshot.layers >= 1, "{snapshot:?}");

    write_text(&mut client, &session, "note.txt", "second").await;
    let forked = client
        .fork(proto::ForkRequest {
            session_id: session.clone(),
            count: 2,
            name: String::new(),
        })
        .await
        .expect("a fork")
        .into_inner();
    assert!(forked.snapshot_id.starts_with("snap_"), "{forked:?}");
    assert_ne!(forked.snapshot_id, snapshot.id);
    assert_eq!(forked.sessions.len(), 2, "{forked:?}");
    let (one, two) = (&forked.sessions[0].id, &forked.sessions[1].id);
    assert_ne!(one, two);
    for forked_session in [one, two] {
        assert_eq!(
            read_text(&mut client, forked_session, "note.txt").await,
            "second"
        );
    }
    // The forks are apart: one's write is not the other's, nor the parent's.
    write_text(&mut client, one, "note.txt", "one's").await;
    assert_eq!(read_text(&mut client, two, "note.txt").await, "second");
    assert_eq!(read_text(&mut client, &session, "note.txt").await, "second");
    // The first snapshot still holds what it froze.
    let from = client
        .create_session(proto::CreateSessionRequest {
            options_json: json!({"from_snapshot": snapshot.id}).to_string(),
            ..Default::default()
        })
        .await
        .expect("a session from the snapshot")
        .into_inner();
    assert_eq!(read_text(&mut client, &from.id, "note.txt").await, "first");

    for count in [0, 65] {
        let refused = client
            .fork(proto::ForkRequest {
                session_id: session.clone(),
                count,
                name: String::new(),
            })
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::InvalidArgument,
            "{count}: {refused:?}"
        );
    }
    let refused = client
        .snapshot(proto::SnapshotRequest {
            session_id: session.clone(),
            name: "bad\u{7}name".into(),
        })
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
}

#[tokio::test]
async fn another_agents_session_is_not_found_on_every_transfer_rpc() {
    use crate::auth::{AGENT_A, AGENT_B, MISSING, OBSERVER, daemon, grpc_client, with};
    let toold = daemon();
    let mut client = grpc_client(&toold).await;
    let session = client
        .create_session(with(AGENT_A, proto::CreateSessionRequest::default()))
        .await
        .unwrap()
        .into_inner()
        .id;
    put(
        &mut client,
        with(AGENT_A, target(&session, "secret.txt")),
        b"a's",
    )
    .await
    .expect("A writes into A's session");

    /// The four RPCs about `session` as `token`, each one's refusal.
    async fn refusals(client: &mut Client, token: &str, session: &str) -> Vec<tonic::Status> {
        let snapshot = proto::SnapshotRequest {
            session_id: session.into(),
            name: String::new(),
        };
        let fork = proto::ForkRequest {
            session_id: session.into(),
            count: 1,
            name: String::new(),
        };
        vec![
            put(client, with(token, target(session, "secret.txt")), b"b's")
                .await
                .unwrap_err(),
            get(client, with(token, file(session, "secret.txt")))
                .await
                .unwrap_err(),
            client.snapshot(with(token, snapshot)).await.unwrap_err(),
            client.fork(with(token, fork)).await.unwrap_err(),
        ]
    }
    let theirs = refusals(&mut client, AGENT_B, &session).await;
    let missing = refusals(&mut client, AGENT_B, MISSING).await;
    for (theirs, missing) in theirs.iter().zip(&missing) {
        assert_eq!(theirs.code(), Code::NotFound, "{theirs:?}");
        assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
        assert_eq!(
            theirs.message().replace(&session, MISSING),
            missing.message()
        );
    }
    // Nothing of B's reached A's session, and the observer reads but writes nothing.
    let (_, bytes) = get(&mut client, with(OBSERVER, file(&session, "secret.txt")))
        .await
        .expect("an observer reads");
    assert_eq!(bytes, b"a's");
    let snapshot = proto::SnapshotRequest {
        session_id: session.clone(),
        name: String::new(),
    };
    let refused = client.snapshot(with(OBSERVER, snapshot)).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let fork = proto::ForkRequest {
        session_id: session.clone(),
        count: 1,
        name: String::new(),
    };
    let refused = client.fork(with(OBSERVER, fork)).await.unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let refused = put(&mut client, with(OBSERVER, target(&session, "o.txt")), b"o")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    // Each transfer is audited with the principal that made it; B's refusals ran nothing.
    let rows = crate::support::deadline::within(
        crate::support::deadline::STEP,
        "the observer's download in the audit log",
        audited(&toold, &session),
    )
    .await;
    assert!(
        rows.contains(&("upload".into(), "agent-a".into())),
        "{rows:?}"
    );
    assert!(
        rows.iter().all(|(_, principal)| principal != "agent-b"),
        "{rows:?}"
    );
}

/// The (tool, principal) of each audit row of `session`, once a download is among them (its
/// row is written when the stream has been sent).
async fn audited(toold: &crate::http::harness::Toold, session: &str) -> Vec<(String, String)> {
    loop {
        let path = format!("/v1/sessions/{session}/calls");
        let calls = crate::auth::get(toold, crate::auth::ADMIN, &path).await;
        let text = |row: &serde_json::Value, field: &str| {
            row[field].as_str().unwrap_or_default().to_owned()
        };
        let rows: Vec<(String, String)> = calls.body["calls"]
            .as_array()
            .unwrap_or_else(|| panic!("{}", calls.body))
            .iter()
            .map(|row| (text(row, "requested_name"), text(row, "principal")))
            .collect();
        if rows.contains(&("download".into(), "observer-o".into())) {
            return rows;
        }
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
    }
}
