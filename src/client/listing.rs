//! The listing commands: `toold sessions`, `toold tools [--format F]`, and `toold approvals
//! [allow|deny ID]` (pending approvals across the open sessions, and resolving one). Lines are
//! tab-separated columns under a header row, for a person and for `cut`/`awk` alike; an empty
//! listing is the header alone on stdout and `no sessions` (or the like) on stderr, so a
//! person is told and a pipe gets no row that is not one. `-o json` prints the API's objects
//! instead (a JSON array; an approval with its `session_id`).

use std::io::Write;

use serde_json::{Value, json};

use super::run_call::in_session;
use super::wire::{ApiClient, ClientError, encode};
use super::{ApprovalDecision, ExitStatus};

/// `ID  MODE  interactive|-  OWNER  WORKING_DIRECTORY  open|closed  IMAGE  TIER  LIMITS`, one
/// session a line; the last three say where an environment session runs (its image, or the
/// root it was given, its isolation tier and its limits) and are `-` for a plain session.
pub async fn sessions(client: &ApiClient, json: bool) -> Result<ExitStatus, ClientError> {
    let listed = client.get_json("/v1/sessions").await?;
    if json {
        return print_json(array(&listed, "sessions"));
    }
    let mut lines = vec![
        "ID\tMODE\tINTERACTIVE\tOWNER\tWORKING_DIRECTORY\tSTATE\tIMAGE\tTIER\tLIMITS".to_owned(),
    ];
    for session in array(&listed, "sessions") {
        let text = |key: &str| session[key].as_str().unwrap_or("-").to_owned();
        let interactive = if session["interactive"] == true {
            "interactive"
        } else {
            "-"
        };
        let state = if session["closed"] == true {
            "closed"
        } else {
            "open"
        };
        lines.push(format!(
            "{}\t{}\t{interactive}\t{}\t{}\t{state}\t{}",
            text("id"),
            text("permission_mode"),
            text("owner"),
            text("working_directory"),
            environment_columns(&session["environment"]),
        ));
    }
    print_listing(&lines, "no sessions")
}

/// `IMAGE  TIER  LIMITS` of a session's `environment` (`-` each for a plain session). The
/// limits are `name=value` joined by commas, in the order the API names them, so that a
/// column holds no blank and `awk` splits the line as `cut` does.
fn environment_columns(environment: &Value) -> String {
    if !environment.is_object() {
        return "-\t-\t-".to_owned();
    }
    let image = environment["image"]
        .as_str()
        .or_else(|| environment["rootfs"].as_str())
        .unwrap_or("-");
    let tier = environment["isolation"].as_str().unwrap_or("-");
    let limits: Vec<String> = ["memory_mb", "cpus", "pids", "disk_mb"]
        .iter()
        .filter_map(|name| {
            let value = &environment["limits"][*name];
            (!value.is_null()).then(|| format!("{name}={value}"))
        })
        .collect();
    let limits = if limits.is_empty() {
        "-".to_owned()
    } else {
        limits.join(",")
    };
    format!("{image}\t{tier}\t{limits}")
}

/// The catalogue (`NAME  DESCRIPTION'S FIRST LINE`), or with a format the definitions as that
/// provider wants them (JSON), which a session's pool gives.
pub async fn tools(
    client: &ApiClient,
    format: Option<&str>,
    session: Option<&str>,
    json: bool,
) -> Result<ExitStatus, ClientError> {
    let Some(format) = format else {
        let catalogue = client.get_json("/v1/tools").await?;
        if json {
            return print_json(array(&catalogue, "tools"));
        }
        let header = std::iter::once("NAME\tDESCRIPTION".to_owned());
        let lines: Vec<String> = header
            .chain(array(&catalogue, "tools").iter().map(|tool| {
                let description = tool["description"].as_str().unwrap_or("");
                let first = description.lines().next().unwrap_or("");
                format!("{}\t{first}", tool["name"].as_str().unwrap_or("-"))
            }))
            .collect();
        return print_listing(&lines, "no tools");
    };
    let definitions = in_session(client, session, async |id: &str| {
        let path = format!(
            "/v1/sessions/{}/tools?format={}",
            encode(id),
            encode(format)
        );
        client.get_json(&path).await
    })
    .await?;
    let text = serde_json::to_string_pretty(&definitions["tools"])
        .map_err(|err| ClientError::Failed(format!("the definitions do not print: {err}")))?;
    print_lines(&[text])
}

/// Pending approvals: `ID  SESSION  TOOL  CALL  INPUT  REASON`, one a line.
pub async fn approvals(
    client: &ApiClient,
    session: Option<&str>,
    json: bool,
) -> Result<ExitStatus, ClientError> {
    let pending = pending(client, session).await?;
    if json {
        let approvals: Vec<Value> = pending
            .into_iter()
            .map(|(session, mut approval)| {
                approval["session_id"] = Value::String(session);
                approval
            })
            .collect();
        return print_json(&approvals);
    }
    let header = std::iter::once("ID\tSESSION\tTOOL\tCALL\tINPUT\tREASON".to_owned());
    let lines: Vec<String> = header
        .chain(pending.iter().map(|(session, approval)| {
            let text = |key: &str| approval[key].as_str().unwrap_or("-").to_owned();
            format!(
                "{}\t{session}\t{}\t{}\t{}\t{}",
                text("id"),
                text("tool"),
                text("call_id"),
                approval["input"],
                text("reason"),
            )
        }))
        .collect();
    print_listing(&lines, "no pending approvals")
}

/// Allows or denies approval `id`, in `session` or in whichever open session holds it.
pub async fn resolve(
    client: &ApiClient,
    session: Option<&str>,
    decision: ApprovalDecision,
    id: &str,
) -> Result<ExitStatus, ClientError> {
    let holder = match session {
        Some(session) => session.to_owned(),
        None => pending(client, None)
            .await?
            .into_iter()
            .find(|(_, approval)| approval["id"] == id)
            .map(|(session, _)| session)
            .ok_or_else(|| {
                ClientError::Failed(format!("no pending approval {id:?} in any open session"))
            })?,
    };
    let path = format!("/v1/sessions/{}/approvals/{}", encode(&holder), encode(id));
    client
        .post_json(&path, &json!({"decision": decision.as_str()}))
        .await?;
    eprintln!("toold: {} {id} (session {holder})", past_tense(decision));
    Ok(ExitStatus::Done)
}

fn past_tense(decision: ApprovalDecision) -> &'static str {
    match decision {
        ApprovalDecision::Allow => "allowed",
        ApprovalDecision::Deny => "denied",
    }
}

/// Every pending approval of `session`, or of every open session, with its session's id.
async fn pending(
    client: &ApiClient,
    session: Option<&str>,
) -> Result<Vec<(String, Value)>, ClientError> {
    let sessions: Vec<String> = match session {
        Some(session) => vec![session.to_owned()],
        None => {
            let listed = client.get_json("/v1/sessions").await?;
            array(&listed, "sessions")
                .iter()
                .filter(|s| s["closed"] != true)
                .filter_map(|s| s["id"].as_str().map(str::to_owned))
                .collect()
        }
    };
    let mut found = Vec::new();
    for id in sessions {
        let path = format!("/v1/sessions/{}/approvals", encode(&id));
        let listed = match client.get_json(&path).await {
            Ok(listed) => listed,
            // Closed (or gone to another principal) between the two requests.
            Err(ClientError::Refused { status: 404, .. }) if session.is_none() => continue,
            Err(err) => return Err(err),
        };
        for approval in array(&listed, "approvals") {
            found.push((id.clone(), approval.clone()));
        }
    }
    Ok(found)
}

fn array<'a>(body: &'a Value, key: &str) -> &'a [Value] {
    body[key].as_array().map(Vec::as_slice).unwrap_or(&[])
}

/// A header and its rows; with no rows, `empty` said on stderr.
fn print_listing(lines: &[String], empty: &str) -> Result<ExitStatus, ClientError> {
    let status = print_lines(lines)?;
    if lines.len() <= 1 {
        eprintln!("toold: {empty}");
    }
    Ok(status)
}

/// `items` as one pretty JSON array.
fn print_json(items: &[Value]) -> Result<ExitStatus, ClientError> {
    let text = serde_json::to_string_pretty(items)
        .map_err(|err| ClientError::Failed(format!("the listing does not print: {err}")))?;
    print_lines(&[text])
}

fn print_lines(lines: &[String]) -> Result<ExitStatus, ClientError> {
    let mut stdout = std::io::stdout().lock();
    for line in lines {
        writeln!(stdout, "{line}")?;
    }
    stdout.flush()?;
    Ok(ExitStatus::Done)
}
