//! `toold audit`: the audit log across sessions, as a security review asks it (`--principal
//! P`, `--tool T`, `--decision denied`, `--since 24h`, …), over `GET /v1/calls` (table and
//! JSON: newest first, at most `--limit` rows) and `GET /v1/calls/export?format=csv` (CSV:
//! every row, streamed to stdout as it arrives).
//!
//! `--since`/`--until` take a duration back from now (`24h`, `7d`, `90m`, humantime's
//! syntax) or an RFC 3339 time; the API takes times only, so the duration becomes one here.
//! The table's columns: `STARTED_AT  PRINCIPAL  SESSION  TOOL  DECISION  DECIDED_BY  ERROR
//! CALL_ID` (`-` for none), tab-separated under a header like every listing.

use std::io::Write;
use std::time::SystemTime;

use futures::StreamExt;
use serde_json::Value;

use super::wire::{ApiClient, ClientError, encode};
use super::{ExitStatus, Output};

/// `toold audit`'s filters and how many rows to print.
#[derive(Clone, Debug, Default)]
pub struct AuditRequest {
    pub session: Option<String>,
    pub batch_id: Option<String>,
    pub principal: Option<String>,
    pub tool: Option<String>,
    pub decision: Option<String>,
    pub decided_by: Option<String>,
    pub error_kind: Option<String>,
    pub errors_only: bool,
    pub since: Option<String>,
    pub until: Option<String>,
    pub trace_id: Option<String>,
    /// Rows printed as a table or JSON (0: every row); CSV prints every row.
    pub limit: usize,
}

impl AuditRequest {
    /// The query string of the filters (`a=b&c=d`), times resolved against `now`.
    fn query(&self, now: SystemTime) -> Result<String, ClientError> {
        let mut pairs: Vec<(&str, String)> = Vec::new();
        let texts = [
            ("session", &self.session),
            ("batch_id", &self.batch_id),
            ("principal", &self.principal),
            ("tool", &self.tool),
            ("decided_by", &self.decided_by),
            ("error_kind", &self.error_kind),
            ("trace_id", &self.trace_id),
        ];
        for (name, value) in texts {
            if let Some(value) = value {
                pairs.push((name, value.clone()));
            }
        }
        if let Some(decision) = &self.decision {
            pairs.push(("decision", decision_word(decision)?.to_owned()));
        }
        if self.errors_only {
            pairs.push(("is_error", "true".to_owned()));
        }
        for (name, value) in [("since", &self.since), ("until", &self.until)] {
            if let Some(value) = value {
                pairs.push((name, time_back(name, value, now)?));
            }
        }
        Ok(pairs
            .iter()
            .map(|(name, value)| format!("{name}={}", encode(value)))
            .collect::<Vec<_>>()
            .join("&"))
    }
}

/// `allow`/`allowed`, `deny`/`denied` as the API says them.
fn decision_word(text: &str) -> Result<&'static str, ClientError> {
    match text {
        "allow" | "allowed" => Ok("allow"),
        "deny" | "denied" => Ok("deny"),
        other => Err(ClientError::Usage(format!(
            "--decision takes allowed or denied, got \"{other}\""
        ))),
    }
}

/// An RFC 3339 time as given, or `now` less a duration (`24h`).
fn time_back(flag: &str, text: &str, now: SystemTime) -> Result<String, ClientError> {
    if humantime::parse_rfc3339_weak(text).is_ok() || text.contains('T') {
        return Ok(text.to_owned());
    }
    let back = humantime::parse_duration(text).map_err(|err| {
        ClientError::Usage(format!(
            "--{flag} takes a duration (24h, 7d) or an RFC 3339 time, got \"{text}\": {err}"
        ))
    })?;
    let at = now
        .checked_sub(back)
        .ok_or_else(|| ClientError::Usage(format!("--{flag} {text} reaches before the epoch")))?;
    Ok(humantime::format_rfc3339_millis(at).to_string())
}

pub async fn audit(
    client: &ApiClient,
    request: &AuditRequest,
    output: Output,
) -> Result<ExitStatus, ClientError> {
    let query = request.query(SystemTime::now())?;
    if output == Output::Csv {
        return export_csv(client, &query).await;
    }
    let rows = listed(client, &query, request.limit).await?;
    if output == Output::Json {
        let text = serde_json::to_string_pretty(&rows)
            .map_err(|err| ClientError::Failed(format!("the listing does not print: {err}")))?;
        writeln!(std::io::stdout().lock(), "{text}")?;
        return Ok(ExitStatus::Done);
    }
    let mut stdout = std::io::stdout().lock();
    writeln!(
        stdout,
        "STARTED_AT\tPRINCIPAL\tSESSION\tTOOL\tDECISION\tDECIDED_BY\tERROR\tCALL_ID"
    )?;
    for row in &rows {
        writeln!(stdout, "{}", table_line(row))?;
    }
    stdout.flush()?;
    if rows.is_empty() {
        eprintln!("toold: no calls");
    }
    Ok(ExitStatus::Done)
}

fn table_line(row: &Value) -> String {
    let text = |value: &Value| match value.as_str() {
        Some(text) if !text.is_empty() => text.to_owned(),
        _ => "-".to_owned(),
    };
    let tool = if row["tool"].is_null() {
        text(&row["requested_name"])
    } else {
        text(&row["tool"])
    };
    [
        text(&row["started_at"]),
        text(&row["principal"]),
        text(&row["session_id"]),
        tool,
        text(&row["decision"]["decision"]),
        text(&row["decision"]["decided_by"]["by"]),
        text(&row["error_kind"]),
        text(&row["call_id"]),
    ]
    .join("\t")
}

/// Pages of `GET /v1/calls` until `limit` rows (0: all of them).
async fn listed(client: &ApiClient, query: &str, limit: usize) -> Result<Vec<Value>, ClientError> {
    let mut rows = Vec::new();
    let mut cursor: Option<i64> = None;
    loop {
        let wanted = if limit == 0 {
            1000
        } else {
            (limit - rows.len()).min(1000)
        };
        let after = cursor.map(|c| format!("&cursor={c}")).unwrap_or_default();
        let page = client
            .get_json(&format!("/v1/calls?limit={wanted}{after}&{query}"))
            .await?;
        rows.extend(page["calls"].as_array().into_iter().flatten().cloned());
        cursor = page["next_cursor"].as_i64();
        if cursor.is_none() || (limit != 0 && rows.len() >= limit) {
            return Ok(rows);
        }
    }
}

/// The CSV export, copied to stdout as it streams.
async fn export_csv(client: &ApiClient, query: &str) -> Result<ExitStatus, ClientError> {
    let path = format!("/v1/calls/export?format=csv&{query}");
    let response = client
        .send(client.request(reqwest::Method::GET, &path), &path)
        .await?;
    let mut body = response.bytes_stream();
    let mut stdout = std::io::stdout().lock();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|err| client.unreachable(&err))?;
        stdout.write_all(&chunk)?;
    }
    stdout.flush()?;
    Ok(ExitStatus::Done)
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::time::{Duration, UNIX_EPOCH};

    #[test]
    fn flags_become_the_apis_query_with_durations_resolved_to_times() {
        let now = UNIX_EPOCH + Duration::from_secs(1_800_000_000);
        let request = AuditRequest {
            principal: Some("ci agent".into()),
            tool: Some("bash".into()),
            decision: Some("denied".into()),
            since: Some("24h".into()),
            until: Some("2027-01-01T00:00:00Z".into()),
            errors_only: true,
            ..AuditRequest::default()
        };
        assert_eq!(
            request.query(now).unwrap(),
            "principal=ci+agent&tool=bash&decision=deny&is_error=true&\
             since=2027-01-14T08%3A00%3A00.000Z&until=2027-01-01T00%3A00%3A00Z"
        );
        for bad in [
            AuditRequest {
                decision: Some("maybe".into()),
                ..AuditRequest::default()
            },
            AuditRequest {
                since: Some("yesterday".into()),
                ..AuditRequest::default()
            },
        ] {
            assert!(
                matches!(bad.query(now), Err(ClientError::Usage(_))),
                "{bad:?}"
            );
        }
    }
}
