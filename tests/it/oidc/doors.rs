//! Provider-issued tokens on every door, each role enforced as for static tokens (DESIGN §10):
//! an `agent` token's caller sees only its sessions, an `observer` reads and cannot execute
//! (403 `insufficient_scope` naming `toold.execute`), a token that maps to no role is a 403
//! too; the protected-resource metadata names the provider exactly as configured; the static
//! token configured beside the issuer keeps working.

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use toold::api::grpc::proto;

use super::{STATIC_ADMIN, principal_of, setup};
use crate::auth::{bash, call, get, grpc_client, post, session_of, with};
use crate::mcp::McpClient;

/// The `WWW-Authenticate` header of `reply`.
fn challenge(reply: &crate::http::harness::Reply) -> String {
    reply
        .headers
        .get("www-authenticate")
        .map(|value| value.to_str().unwrap().to_owned())
        .unwrap_or_default()
}

#[tokio::test]
async fn http_and_sse_enforce_the_role_a_provider_token_carries() {
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let agent_a = provider.token("agent-a", "toold.execute").await;
    let agent_b = provider.token("agent-b", "toold.execute").await;
    let observer = provider.token("observer", "toold.read").await;

    let a = session_of(toold, &agent_a, json!({})).await;
    let reply = post(
        toold,
        &agent_a,
        &format!("/v1/sessions/{a}/batches"),
        bash("echo hi"),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    let session = get(toold, &agent_a, &format!("/v1/sessions/{a}")).await;
    assert_eq!(
        session.body["principal"],
        principal_of(provider, "agent-a"),
        "{}",
        session.body
    );
    let rows = get(toold, &agent_a, &format!("/v1/sessions/{a}/calls")).await;
    let rows = rows.body["calls"].as_array().unwrap().clone();
    assert!(!rows.is_empty());
    for row in &rows {
        assert_eq!(row["principal"], principal_of(provider, "agent-a"), "{row}");
    }

    // Agent B: A's session does not exist for it; its listing holds only its own.
    let b = session_of(toold, &agent_b, json!({})).await;
    let theirs = get(toold, &agent_b, &format!("/v1/sessions/{a}")).await;
    assert_eq!(theirs.status, StatusCode::NOT_FOUND, "{}", theirs.body);
    let listed = get(toold, &agent_b, "/v1/sessions").await;
    let ids: Vec<&str> = listed.body["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|s| s["id"].as_str())
        .collect();
    assert_eq!(ids, [b.as_str()], "{}", listed.body);
    // SSE: A's stream opens for A, not for B.
    let path = format!("/v1/sessions/{a}/events");
    let open = |token: String| {
        let builder = toold
            .request_as(Some(&token), Method::GET, &path)
            .header("accept", "text/event-stream");
        async move { builder.send().await.unwrap().status() }
    };
    assert_eq!(open(agent_a.clone()).await, StatusCode::OK);
    assert_eq!(open(agent_b.clone()).await, StatusCode::NOT_FOUND);

    // The observer reads everything and executes nothing: 403 with the scope it lacks.
    let read = get(toold, &observer, &format!("/v1/sessions/{a}")).await;
    assert_eq!(read.status, StatusCode::OK, "{}", read.body);
    let refused = post(
        toold,
        &observer,
        &format!("/v1/sessions/{a}/batches"),
        bash("echo o"),
    )
    .await;
    assert_eq!(refused.status, StatusCode::FORBIDDEN, "{}", refused.body);
    let header = challenge(&refused);
    assert!(header.starts_with("Bearer "), "{header}");
    assert!(header.contains("error=\"insufficient_scope\""), "{header}");
    assert!(header.contains("scope=\"toold.execute\""), "{header}");
    let created = post(toold, &observer, "/v1/sessions", json!({})).await;
    assert_eq!(created.status, StatusCode::FORBIDDEN, "{}", created.body);
    assert_eq!(open(observer).await, StatusCode::OK);

    // The terminal client's --token takes the JWT as any token: A's session, not B's.
    let mut client = std::process::Command::new(env!("CARGO_BIN_EXE_toold"));
    client.args(["--url", &toold.base, "--token", &agent_a, "sessions"]);
    crate::support::daemon::without_settings(&mut client);
    let listed = crate::support::deadline::output_within(
        &mut client,
        std::time::Duration::from_secs(60),
        "toold sessions",
    )
    .unwrap();
    let printed = String::from_utf8_lossy(&listed.stdout);
    assert!(listed.status.success(), "{printed}");
    assert!(printed.contains(&a) && !printed.contains(&b), "{printed}");

    // The static admin beside the issuer sees both sessions.
    let all = get(toold, STATIC_ADMIN, "/v1/sessions").await;
    assert_eq!(
        all.body["sessions"].as_array().unwrap().len(),
        2,
        "{}",
        all.body
    );
}

#[tokio::test]
async fn grpc_metadata_carries_a_provider_token_and_its_role() {
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let agent_a = provider.token("agent-a", "toold.execute").await;
    let agent_b = provider.token("agent-b", "toold.execute").await;
    let observer = provider.token("observer", "toold.read").await;
    let mut client = grpc_client(toold).await;
    let created = client
        .create_session(with(&agent_a, proto::CreateSessionRequest::default()))
        .await
        .unwrap()
        .into_inner();
    let a = created.id.clone();
    let batch = |token: &str| {
        with(
            token,
            proto::ExecuteBatchRequest {
                session_id: a.clone(),
                calls: vec![crate::grpc::harness::call(
                    "c1",
                    "bash",
                    json!({"command": "echo g"}),
                )],
                idempotency_key: String::new(),
            },
        )
    };
    let ran = client
        .execute_batch(batch(&agent_a))
        .await
        .unwrap()
        .into_inner();
    assert_eq!(ran.results.len(), 1);
    let hidden = client.execute_batch(batch(&agent_b)).await.unwrap_err();
    assert_eq!(hidden.code(), tonic::Code::NotFound, "{hidden:?}");
    let refused = client.execute_batch(batch(&observer)).await.unwrap_err();
    assert_eq!(refused.code(), tonic::Code::PermissionDenied, "{refused:?}");
    let closed = client
        .close_session(with(
            &agent_b,
            proto::CloseSessionRequest {
                session_id: a.clone(),
            },
        ))
        .await
        .unwrap_err();
    assert_eq!(closed.code(), tonic::Code::NotFound, "{closed:?}");
    // A bad token over gRPC: UNAUTHENTICATED, as over HTTP.
    let garbled = format!("{agent_a}x");
    let status = client
        .create_session(with(&garbled, proto::CreateSessionRequest::default()))
        .await
        .unwrap_err();
    assert_eq!(status.code(), tonic::Code::Unauthenticated, "{status:?}");
}

#[tokio::test]
async fn both_mcp_eras_accept_a_provider_token_and_an_observer_runs_nothing() {
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    let agent = provider.token("agent-a", "toold.execute").await;
    // The 2025-11-25 era: a handshake, then calls in the MCP session.
    let mut legacy = McpClient::new(toold, "/mcp").token(&agent);
    let init = legacy.initialize().await;
    assert_eq!(init.status, StatusCode::OK, "{}", init.text);
    let called = legacy
        .call_tool("bash", json!({"command": "echo legacy"}))
        .await;
    assert_eq!(called.status, StatusCode::OK, "{}", called.text);
    assert!(called.text_content().contains("legacy"), "{}", called.text);
    // The 2026-07-28 era: stateless, in the caller's default session.
    let mut stateless = McpClient::new(toold, "/mcp").token(&agent);
    let listed = stateless.stateless("tools/list", json!({}), None).await;
    assert_eq!(listed.status, StatusCode::OK, "{}", listed.text);
    assert!(crate::mcp::tool_names(listed.result()).contains(&"bash".to_owned()));

    // Without a token: 401 pointing at the metadata, with no error code (RFC 6750 §3.1).
    let reply = toold
        .send(
            toold
                .request_as(None, Method::POST, "/mcp")
                .header("content-type", "application/json")
                .body("{}"),
        )
        .await;
    assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
    let header = challenge(&reply);
    let metadata_url = format!("{}/.well-known/oauth-protected-resource/mcp", toold.base);
    assert!(
        header.contains(&format!("resource_metadata=\"{metadata_url}\"")),
        "{header}"
    );
    assert!(!header.contains("error="), "{header}");

    // The observer's call in the agent's session (its own endpoint) runs nothing.
    let observer = provider.token("observer", "toold.read").await;
    let session = crate::auth::session_of(toold, &agent, json!({})).await;
    let path = format!("/v1/sessions/{session}/mcp");
    let mut as_observer = McpClient::new(toold, &path).token(&observer);
    let refused = as_observer
        .call_tool("bash", json!({"command": "echo observed > o.txt"}))
        .await;
    assert!(
        refused.message.get("error").is_some() || refused.result()["isError"] == true,
        "{}",
        refused.text
    );
    let rows = get(toold, &agent, &format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(rows.body["calls"], json!([]), "the observer's call ran");
}

#[tokio::test]
async fn the_protected_resource_metadata_names_the_provider_and_a_roleless_token_lacks_scope() {
    let Some(setup) = setup("") else { return };
    let (toold, provider) = (&setup.toold, &setup.provider);
    for path in [
        "/.well-known/oauth-protected-resource",
        "/.well-known/oauth-protected-resource/mcp",
    ] {
        let reply = toold.send(toold.request_as(None, Method::GET, path)).await;
        assert_eq!(reply.status, StatusCode::OK, "{path}: {}", reply.body);
        let document = &reply.body;
        // RFC 9728 §2: resource (REQUIRED), the rest OPTIONAL but what MCP clients read.
        assert_eq!(document["resource"], setup.mcp_url.as_str(), "{document}");
        assert_eq!(
            document["authorization_servers"],
            json!([provider.issuer]),
            "{document}"
        );
        assert_eq!(
            document["scopes_supported"],
            json!(["toold.read", "toold.execute", "toold.admin"])
        );
        assert_eq!(document["bearer_methods_supported"], json!(["header"]));
        for (key, value) in document.as_object().unwrap() {
            let known = [
                "resource",
                "authorization_servers",
                "scopes_supported",
                "bearer_methods_supported",
                "resource_name",
            ];
            assert!(known.contains(&key.as_str()), "{key}: {value}");
            assert!(!matches!(value, Value::Null), "{key}");
        }
    }
    // A valid token that maps to no role and carries no toold scope: 403, the scope named.
    let roleless = provider.token("no-role", "profile").await;
    let reply = get(toold, &roleless, "/v1/sessions").await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    let header = challenge(&reply);
    assert!(header.contains("error=\"insufficient_scope\""), "{header}");
    assert!(header.contains("scope=\"toold.read\""), "{header}");
    let reply = call(toold, &roleless, Method::POST, "/mcp", Some(json!({}))).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN);
    assert!(challenge(&reply).contains("scope=\"toold.execute\""));
}
