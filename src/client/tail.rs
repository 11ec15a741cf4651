//! `toold tail`: the event stream (`GET /v1/events`, filtered by session, tool and type), one
//! line per event on stdout (coloured per session on a terminal, like `stern`), or NDJSON with
//! `-o json` (each line the server's event JSON as sent). Notices go to stderr.
//!
//! A dropped connection, a daemon restart or a `lagged` notice is followed by a reconnect with
//! `Last-Event-ID` = the last seq printed: the daemon replays what came after it from its
//! store, so the output has no gap and no duplicate. Only the first connection's failure ends
//! the command (exit 4, or 3 for a refused token); after that it retries until stopped, with
//! a back-off from 0.25 s to 5 s. A refused token or an invalid filter always ends it.

use std::io::Write;
use std::time::Duration;

use serde_json::Value;

use super::sse::{Frame, FrameReader};
use super::wire::{ApiClient, ClientError, encode};
use super::{ExitStatus, TailRequest};

const FIRST_RETRY: Duration = Duration::from_millis(250);
const LONGEST_RETRY: Duration = Duration::from_secs(5);

/// ANSI colours given to sessions (by a hash of the id), bright ones first.
const COLOURS: [u8; 12] = [92, 93, 94, 95, 96, 91, 32, 33, 34, 35, 36, 31];

pub async fn tail(
    client: &ApiClient,
    request: &TailRequest,
    json: bool,
    colour: bool,
) -> Result<ExitStatus, ClientError> {
    let path = events_path(request);
    let mut last_seq = request.since_seq;
    let mut connected_once = false;
    let mut retry = FIRST_RETRY;
    loop {
        let ended = match connect(client, &path, last_seq).await {
            Ok(mut frames) => {
                if connected_once {
                    eprintln!("toold: reconnected, {}", resume_point(last_seq));
                }
                connected_once = true;
                retry = FIRST_RETRY;
                follow(&mut frames, &mut last_seq, json, colour).await?
            }
            Err(err) if connected_once && err.is_transient() => format!("{err}"),
            Err(err) => return Err(err),
        };
        eprintln!(
            "toold: {ended}; reconnecting in {} ms, {}",
            retry.as_millis(),
            resume_point(last_seq)
        );
        tokio::time::sleep(retry).await;
        retry = (retry * 2).min(LONGEST_RETRY);
    }
}

fn resume_point(last_seq: Option<u64>) -> String {
    match last_seq {
        Some(seq) => format!("resuming after seq {seq}"),
        None => "no event seen yet, so from what is live".to_owned(),
    }
}

/// `/v1/events` with the filters as its query.
fn events_path(request: &TailRequest) -> String {
    let filters = [
        ("session", &request.session),
        ("tool", &request.tool),
        ("type", &request.event_type),
    ];
    let query: Vec<String> = filters
        .iter()
        .filter_map(|(name, value)| value.as_ref().map(|v| format!("{name}={}", encode(v))))
        .collect();
    if query.is_empty() {
        "/v1/events".to_owned()
    } else {
        format!("/v1/events?{}", query.join("&"))
    }
}

async fn connect(
    client: &ApiClient,
    path: &str,
    last_seq: Option<u64>,
) -> Result<FrameReader, ClientError> {
    let mut builder = client
        .request(reqwest::Method::GET, path)
        .header("accept", "text/event-stream");
    if let Some(seq) = last_seq {
        builder = builder.header("last-event-id", seq.to_string());
    }
    let response = client.send(builder, path).await?;
    Ok(FrameReader::new(response))
}

/// Prints frames until the stream ends; says why it ended.
async fn follow(
    frames: &mut FrameReader,
    last_seq: &mut Option<u64>,
    json: bool,
    colour: bool,
) -> Result<String, ClientError> {
    let mut stdout = std::io::stdout().lock();
    loop {
        let frame = match frames.next().await {
            Ok(Some(frame)) => frame,
            Ok(None) => return Ok("the stream ended".to_owned()),
            Err(reason) => return Ok(format!("the connection was lost ({reason})")),
        };
        if frame.event == "lagged" {
            return Ok("the daemon dropped this subscriber for falling behind".to_owned());
        }
        let Some(seq) = frame.id.as_deref().and_then(|id| id.parse::<u64>().ok()) else {
            continue;
        };
        // A replay never repeats what was printed; this guards the output all the same.
        if last_seq.is_some_and(|last| seq <= last) {
            continue;
        }
        if json {
            writeln!(stdout, "{}", frame.data)?;
        } else {
            writeln!(stdout, "{}", text_line(&frame, colour))?;
        }
        stdout.flush()?;
        *last_seq = Some(seq);
    }
}

/// `TIME SESSION TYPE TOOL CALL DATA`, the session coloured when `colour`.
fn text_line(frame: &Frame, colour: bool) -> String {
    let event: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
    let text = |key: &str| event[key].as_str().unwrap_or("-").to_owned();
    let time = event["ts"]
        .as_str()
        .and_then(|ts| ts.get(11..23))
        .unwrap_or("-")
        .to_owned();
    // Whole: ids are time-ordered, so sessions made together share a long prefix.
    let session_id = text("session_id");
    let session = if colour {
        format!("\x1b[{}m{session_id}\x1b[0m", colour_of(&session_id))
    } else {
        session_id
    };
    let mut data = event["data"].to_string();
    if data.chars().count() > 160 {
        data = data.chars().take(159).chain(['…']).collect();
    }
    format!(
        "{time} {session} {:<19} {:<12} {:<8} {data}",
        frame.event,
        text("tool"),
        text("call_id")
    )
}

/// The same session always gets the same colour (FNV-1a of its id).
fn colour_of(session_id: &str) -> u8 {
    let hash = session_id
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |hash, byte| {
            (hash ^ u64::from(byte)).wrapping_mul(0x0100_0000_01b3)
        });
    COLOURS[(hash % COLOURS.len() as u64) as usize]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_filters_become_the_query_escaped() {
        let request = TailRequest {
            session: Some("s 1".into()),
            event_type: Some("tool:post".into()),
            ..TailRequest::default()
        };
        assert_eq!(
            events_path(&request),
            "/v1/events?session=s+1&type=tool%3Apost"
        );
        assert_eq!(events_path(&TailRequest::default()), "/v1/events");
    }

    #[test]
    fn a_text_line_names_the_event_and_colours_the_session_only_on_request() {
        let frame = Frame {
            id: Some("4".into()),
            event: "tool:post".into(),
            data: r#"{"seq":4,"ts":"2026-11-26T01:02:03.456Z","type":"tool:post","session_id":"sess-1","call_id":"c1","tool":"bash","data":{"is_error":false}}"#.into(),
        };
        let plain = text_line(&frame, false);
        assert_eq!(
            plain,
            "01:02:03.456 sess-1 tool:post           bash         c1       {\"is_error\":false}"
        );
        let coloured = text_line(&frame, true);
        assert!(coloured.contains(&format!("\x1b[{}msess-1\x1b[0m", colour_of("sess-1"))));
    }
}
