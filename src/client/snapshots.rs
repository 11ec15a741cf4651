//! `toold snapshot SESSION [--name N]` and `toold fork SESSION -n N [--name N]` (DESIGN §12),
//! over `POST /v1/sessions/{id}/snapshots` and `POST /v1/sessions/{id}/fork`.
//!
//! `snapshot` prints the snapshot's id alone, so `SNAP=$(toold snapshot S)` works; `fork`
//! prints `SESSION  SNAPSHOT` rows under a header, one per new session, so `cut -f1` gives the
//! sessions and every row says what they came from. `-o json` prints the daemon's answer.
//! An unknown session is the daemon's 404 (`unknown session "ID"`), exit 1.

use std::io::Write;

use serde_json::{Value, json};

use super::ExitStatus;
use super::wire::{ApiClient, ClientError, encode};

pub async fn snapshot(
    client: &ApiClient,
    session: &str,
    name: Option<&str>,
    json: bool,
) -> Result<ExitStatus, ClientError> {
    let body = match name {
        Some(name) => json!({"name": name}),
        None => json!({}),
    };
    let path = format!("/v1/sessions/{}/snapshots", encode(session));
    let taken = client.post_json(&path, &body).await?;
    if json {
        return print_json(&taken);
    }
    let id = text(&taken, "id")?;
    writeln!(std::io::stdout().lock(), "{id}")?;
    Ok(ExitStatus::Done)
}

pub async fn fork(
    client: &ApiClient,
    session: &str,
    count: u32,
    name: Option<&str>,
    json: bool,
) -> Result<ExitStatus, ClientError> {
    let mut body = json!({"count": count});
    if let Some(name) = name {
        body["name"] = Value::String(name.to_owned());
    }
    let path = format!("/v1/sessions/{}/fork", encode(session));
    let forked = client.post_json(&path, &body).await?;
    if json {
        return print_json(&forked);
    }
    let snapshot = text(&forked, "snapshot_id")?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "SESSION\tSNAPSHOT")?;
    for session in forked["sessions"].as_array().into_iter().flatten() {
        writeln!(stdout, "{}\t{snapshot}", text(session, "id")?)?;
    }
    stdout.flush()?;
    Ok(ExitStatus::Done)
}

/// A string field the answer must hold.
fn text<'a>(answer: &'a Value, key: &str) -> Result<&'a str, ClientError> {
    answer[key].as_str().ok_or_else(|| {
        ClientError::Failed(format!("the daemon's answer has no \"{key}\": {answer}"))
    })
}

fn print_json(answer: &Value) -> Result<ExitStatus, ClientError> {
    let text = serde_json::to_string_pretty(answer)
        .map_err(|err| ClientError::Failed(format!("the answer does not print: {err}")))?;
    writeln!(std::io::stdout().lock(), "{text}")?;
    Ok(ExitStatus::Done)
}
