//! The workspace in and out (DESIGN §12), through the real daemon: files (`files`), archives
//! (`archives`, and the hostile ones in `hostile`), snapshots and forks (`snapshots`), the
//! hooks around them (`hooks`), and the daemon's memory while 1 GiB goes in and out
//! (`memory`).

mod archives;
mod files;
mod fleet;
mod hooks;
mod hostile;
mod memory;
mod snapshots;

use reqwest::Method;
use serde_json::Value;

use crate::http::harness::{Reply, Toold};

/// `PUT /v1/sessions/{session}/files/{path}` with `body`.
pub async fn put_file(toold: &Toold, session: &str, path: &str, body: Vec<u8>) -> Reply {
    let builder = toold
        .request(Method::PUT, &format!("/v1/sessions/{session}/files/{path}"))
        .body(body);
    toold.send(builder).await
}

/// `POST /v1/sessions/{session}/archive?path=…` with `body`.
pub async fn post_archive(toold: &Toold, session: &str, dir: Option<&str>, body: Vec<u8>) -> Reply {
    let query = dir.map(|d| format!("?path={d}")).unwrap_or_default();
    let builder = toold
        .request(
            Method::POST,
            &format!("/v1/sessions/{session}/archive{query}"),
        )
        .header("content-type", "application/octet-stream")
        .body(body);
    toold.send(builder).await
}

/// The raw bytes and status of a GET with `headers`.
pub async fn get_bytes(
    toold: &Toold,
    path: &str,
    headers: &[(&str, &str)],
) -> (reqwest::StatusCode, reqwest::header::HeaderMap, Vec<u8>) {
    let mut builder = toold.request(Method::GET, path);
    for (name, value) in headers {
        builder = builder.header(*name, *value);
    }
    crate::support::deadline::within(crate::http::harness::REQUEST, "a download", async {
        let response = builder.send().await.expect("request sent");
        let status = response.status();
        let headers = response.headers().clone();
        (status, headers, response.bytes().await.unwrap().to_vec())
    })
    .await
}

/// The session's audit rows for the internal tool `tool` (by the name called: a call refused
/// before its tool resolved has no `tool`).
pub async fn audit_rows(toold: &Toold, session: &str, tool: &str) -> Vec<Value> {
    let reply = toold.get(&format!("/v1/sessions/{session}/calls")).await;
    assert_eq!(reply.status, 200, "{}", reply.body);
    reply.body["calls"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|row| row["requested_name"] == tool)
        .cloned()
        .collect()
}
