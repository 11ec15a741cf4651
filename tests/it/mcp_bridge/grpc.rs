//! The gRPC listing: `ListMcpServers` shows what `GET /v1/mcp/servers` does, with the proto's
//! empty values for what is absent (`session_id` and `last_error` "", `pid` 0).

use std::time::{Duration, Instant};

use toold::api::grpc::proto;

use super::{eager, servers};
use crate::grpc::harness::Toold;
use crate::support::mcp_servers::settings;

#[tokio::test]
async fn list_mcp_servers_over_grpc_shows_each_instance() {
    let Some(servers) = servers("ListMcpServers over gRPC") else {
        return;
    };
    let config = tempfile::tempdir().unwrap();
    let file = config.path().join("toold.toml");
    let entries = [
        eager(servers.everything("every")),
        eager(servers.everything("shared")).set("scope", "daemon"),
    ];
    std::fs::write(&file, settings("", &entries)).unwrap();
    let toold = Toold::start_with(&["--config", file.to_str().unwrap()]);
    let mut client = toold.client().await;
    let session = client
        .create_session(proto::CreateSessionRequest {
            options_json: r#"{"mcp_servers": ["every"]}"#.into(),
            ..Default::default()
        })
        .await
        .expect("session created")
        .into_inner();
    let deadline = Instant::now() + Duration::from_secs(20);
    let listed = loop {
        let listed = client
            .list_mcp_servers(proto::ListMcpServersRequest {})
            .await
            .expect("ListMcpServers")
            .into_inner()
            .servers;
        if listed.len() == 2 && listed.iter().all(|server| server.state == "ready") {
            break listed;
        }
        assert!(Instant::now() < deadline, "not ready: {listed:?}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    let (every, shared) = (&listed[0], &listed[1]);
    assert_eq!(
        (
            every.name.as_str(),
            every.scope.as_str(),
            every.session_id.as_str()
        ),
        ("every", "session", session.id.as_str()),
        "{listed:?}"
    );
    assert_eq!(
        (
            shared.name.as_str(),
            shared.scope.as_str(),
            shared.session_id.as_str()
        ),
        ("shared", "daemon", ""),
        "{listed:?}"
    );
    for server in &listed {
        assert_eq!(server.transport, "stdio");
        assert!(server.pid > 1, "{server:?}");
        assert_eq!(server.last_error, "");
        assert_eq!(server.restarts, 0);
        let echo = format!("mcp__{}__echo", server.name);
        assert!(server.tools.contains(&echo), "{server:?}");
    }
}
