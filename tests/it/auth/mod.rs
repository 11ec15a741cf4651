//! Principals and roles (DESIGN §10) against the real daemon, door by door: two agents, A and
//! B, an observer O and an admin, configured in `[[auth.tokens]]` (B's by its SHA-256, the
//! others' in plain). B can neither read, subscribe to, call into, interrupt nor approve
//! anything of A's session: each attempt answers exactly as a missing id does (status and
//! message, the id aside), with nothing of A's in the body. O reads everything and changes
//! nothing (403). Audit rows and events name who acted.
//!
//! `http` covers HTTP and SSE, `grpc` the generated tonic client, `mcp` the MCP door (with the
//! tests' own MCP client), `approvals` a pending approval of A's session through every door.

mod approvals;
mod grpc;
mod http;
mod mcp;

use std::sync::Arc;

use reqwest::{Method, StatusCode};
use serde_json::{Value, json};
use sha2::{Digest, Sha256};

use crate::grpc::harness::Client;
use crate::http::harness::{Reply, Toold};

pub const AGENT_A: &str = "token-agent-a";
pub const AGENT_B: &str = "token-agent-b";
pub const OBSERVER: &str = "token-observer";
pub const ADMIN: &str = "token-admin";

/// A session id no one created, to compare refusals with.
pub const MISSING: &str = "sess_00000000000000000000000000000000";

/// The daemon with A, B (as a digest), O, and ADMIN as an `--auth-token` admin; the
/// `[permissions]` ask rule holds `echo ask …` for a person.
pub fn daemon() -> Toold {
    daemon_with(&[])
}

/// [`daemon`] with `extra` flags.
pub fn daemon_with(extra: &[&str]) -> Toold {
    daemon_configured("", extra)
}

/// [`daemon`] with `settings` added to its settings file (sections other than
/// `[permissions]` and `[[auth.tokens]]`) and `extra` flags.
pub fn daemon_configured(settings: &str, extra: &[&str]) -> Toold {
    let digest_b: String = Sha256::digest(AGENT_B.as_bytes())
        .iter()
        .map(|byte| format!("{byte:02x}"))
        .collect();
    let settings = format!(
        "{settings}\n\n[permissions]\nask = [\"bash(echo ask:*)\"]\n\n\
         [[auth.tokens]]\nname = \"agent-a\"\ntoken = \"{AGENT_A}\"\nrole = \"agent\"\n\n\
         [[auth.tokens]]\nname = \"agent-b\"\nsha256 = \"{digest_b}\"\nrole = \"agent\"\n\n\
         [[auth.tokens]]\nname = \"observer-o\"\ntoken = \"{OBSERVER}\"\nrole = \"observer\"\n"
    );
    let dir = Arc::new(tempfile::tempdir().unwrap());
    let file = dir.path().join("toold.toml");
    std::fs::write(&file, settings).unwrap();
    let file = file.to_str().unwrap().to_owned();
    let mut flags = vec!["--config", file.as_str(), "--auth-token", ADMIN];
    flags.extend_from_slice(extra);
    Toold::start_with(dir, &flags)
}

/// A request as the holder of `token`.
pub async fn call(
    toold: &Toold,
    token: &str,
    method: Method,
    path: &str,
    body: Option<Value>,
) -> Reply {
    let mut builder = toold.request_as(Some(token), method, path);
    if let Some(body) = body {
        builder = builder
            .header("content-type", "application/json")
            .body(body.to_string());
    }
    toold.send(builder).await
}

pub async fn get(toold: &Toold, token: &str, path: &str) -> Reply {
    call(toold, token, Method::GET, path, None).await
}

pub async fn post(toold: &Toold, token: &str, path: &str, body: Value) -> Reply {
    call(toold, token, Method::POST, path, Some(body)).await
}

/// A session of the holder of `token`; its id.
pub async fn session_of(toold: &Toold, token: &str, body: Value) -> String {
    let reply = post(toold, token, "/v1/sessions", body).await;
    assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
    reply.body["id"].as_str().unwrap().to_owned()
}

/// Asserts `reply` (about `id`) is what the same request about `missing_id` got: the same
/// status and error code, the same message with the id swapped, and none of `secrets`.
pub fn like_missing(reply: &Reply, missing: &Reply, ids: (&str, &str), secrets: &[&str]) {
    let (id, missing_id) = ids;
    assert_eq!(reply.status, missing.status, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], missing.body["error"]["code"]);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    let expected = missing.body["error"]["message"]
        .as_str()
        .unwrap_or_default();
    assert_eq!(message.replace(id, missing_id), expected, "{}", reply.body);
    let text = reply.body.to_string();
    for secret in secrets {
        assert!(!text.contains(secret), "{secret} leaked in {text}");
    }
}

/// A batch running `command` as call `c1`.
pub fn bash(command: &str) -> Value {
    json!({"calls": [{"id": "c1", "name": "bash", "input": {"command": command}}]})
}

/// The generated gRPC client, connected to `toold`'s listener.
pub async fn grpc_client(toold: &Toold) -> Client {
    let channel = tonic::transport::Channel::from_shared(toold.base.clone())
        .unwrap()
        .connect()
        .await
        .unwrap();
    Client::new(channel)
}

/// A gRPC request carrying `token`.
pub fn with<T>(token: &str, message: T) -> tonic::Request<T> {
    let mut request = tonic::Request::new(message);
    let value = tonic::metadata::MetadataValue::try_from(format!("Bearer {token}")).unwrap();
    request.metadata_mut().insert("authorization", value);
    request
}
