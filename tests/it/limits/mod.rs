//! `[limits]` (DESIGN §10) against the real daemon, with the agents A and B of `auth`: each
//! limit refuses over HTTP (429, `Retry-After`, code `limit_exceeded`) and gRPC
//! (`RESOURCE_EXHAUSTED`); A at its limit does not limit B; a slot comes back when what held it
//! ends, fails or is dropped by its client; 0 is no limit. `batches` and `sessions` are the
//! service's limits, `rate` the gate's, `shells` the per-session shell limits.

mod batches;
mod rate;
mod sessions;
mod shells;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use crate::auth::{daemon_configured, post};
use crate::http::harness::{Reply, Toold};

/// The daemon of `auth` (A, B, an observer, an admin) with `limits` as its `[limits]`.
pub fn limited(limits: &str) -> Toold {
    daemon_configured(&format!("[limits]\n{limits}\n"), &[])
}

/// Asserts `reply` is a refusal for a limit (`key` named in its message).
pub fn assert_limited(reply: &Reply, key: &str) {
    assert_eq!(
        reply.status,
        StatusCode::TOO_MANY_REQUESTS,
        "{}",
        reply.body
    );
    assert_eq!(
        reply.body["error"]["code"], "limit_exceeded",
        "{}",
        reply.body
    );
    let message = reply.body["error"]["message"].as_str().unwrap();
    assert!(message.contains(key), "{message}");
    let retry = reply.headers.get("retry-after").expect("Retry-After");
    assert!(retry.to_str().unwrap().parse::<u64>().unwrap() >= 1);
}

/// Asserts a gRPC answer is a refusal for a limit (`key` named in its message).
pub fn assert_grpc_limited<T: std::fmt::Debug>(answer: Result<T, tonic::Status>, key: &str) {
    let refused = answer.unwrap_err();
    assert_eq!(
        refused.code(),
        tonic::Code::ResourceExhausted,
        "{refused:?}"
    );
    assert!(refused.message().contains(key), "{refused:?}");
    assert_eq!(refused.metadata().get("retry-after").unwrap(), "1");
}

/// Starts a [`held_batch`] in `token`'s session `id` and returns once it runs: its answer to
/// come, and the workspace where `release` ends it.
pub async fn hold(
    toold: &Arc<Toold>,
    token: &'static str,
    id: &str,
) -> (tokio::task::JoinHandle<Reply>, PathBuf) {
    let dir = workspace_of(toold, token, id).await;
    let held = tokio::spawn({
        let (toold, id) = (toold.clone(), id.to_owned());
        async move { run(&toold, token, &id, held_batch()).await }
    });
    wait_started(&dir).await;
    (held, dir)
}

/// A batch whose one `bash` call says it started (a file `started` in its workspace) and
/// runs until the test creates `release` there.
pub fn held_batch() -> Value {
    json!({"calls": [{"id": "held", "name": "bash", "input": {
        "command": "touch started; while [ ! -e release ]; do sleep 0.05; done; echo released"
    }}]})
}

/// Waits until a [`held_batch`] runs in `workspace` (bounded, so a bug fails, not hangs).
pub async fn wait_started(workspace: &Path) {
    for _ in 0..600 {
        if workspace.join("started").exists() {
            return;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    panic!("the held batch never started in {}", workspace.display());
}

/// The workspace of `token`'s session `id`.
pub async fn workspace_of(toold: &Toold, token: &str, id: &str) -> std::path::PathBuf {
    let reply = crate::auth::get(toold, token, &format!("/v1/sessions/{id}")).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    reply.body["working_directory"].as_str().unwrap().into()
}

/// Runs `batch` in session `id` as `token`.
pub async fn run(toold: &Toold, token: &str, id: &str, batch: Value) -> Reply {
    post(toold, token, &format!("/v1/sessions/{id}/batches"), batch).await
}
