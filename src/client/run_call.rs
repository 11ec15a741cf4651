//! `toold call TOOL JSON [--session ID]`: one call in a batch of its own, streamed (SSE) so
//! the tool's progress can turn a spinner on stderr while it runs; then its output on stdout,
//! whole (an offloaded output paged from `GET /v1/results/{id}`), and exit 1 if it failed.
//!
//! A call that waits for an approval says so on stderr, on a terminal or not, with the
//! approval's id and the command that answers it (`toold approvals allow|deny ID`, with
//! `--url` when it is not the default; never the token). The batch stream carries only
//! progress and results, so the session's events (`GET /v1/events?session=`) are followed
//! alongside, opened before the batch is posted (the daemon subscribes before it answers, so
//! no `permission:ask` of the batch can be missed) and matched by the batch's id from its
//! `x-toold-batch-id` header. When the events cannot be opened (a token that may not read
//! them) the call runs all the same, without the notice.

use std::io::{IsTerminal, Write};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde_json::{Value, json};

use super::ExitStatus;
use super::sse::{Frame, FrameReader};
use super::wire::{ApiClient, ClientError, encode, with_json};

/// Characters asked for per page of an offloaded output (the API's default page).
const RESULT_PAGE: u64 = 1 << 20;

pub async fn call(
    client: &ApiClient,
    tool: &str,
    input: &str,
    session: Option<&str>,
) -> Result<ExitStatus, ClientError> {
    let input: Value = serde_json::from_str(input)
        .map_err(|err| ClientError::Usage(format!("the input {input:?} is not JSON: {err}")))?;
    if !input.is_object() {
        return Err(ClientError::Usage(format!(
            "the input {input} is not a JSON object"
        )));
    }
    // Printed before the session is closed: an offloaded output is paged while it is open.
    let result = in_session(client, session, async |id: &str| {
        let run = run_one(client, id, tool, &input);
        let result = match session {
            Some(_) => run.await?,
            None => interrupted_on_ctrl_c(client, id, run).await?,
        };
        print_output(client, &result).await?;
        Ok(result)
    })
    .await?;
    if result["is_error"] == true {
        let kind = result["error_kind"].as_str().unwrap_or("error");
        eprintln!("toold: {tool} failed ({kind})");
        return Ok(ExitStatus::ToolFailed);
    }
    Ok(ExitStatus::Done)
}

/// Runs `work` in session `session`, or in an interactive session of its own, created for it
/// and closed after it (its id goes to stderr, for `tail` and `approvals`).
pub async fn in_session<T>(
    client: &ApiClient,
    session: Option<&str>,
    work: impl AsyncFnOnce(&str) -> Result<T, ClientError>,
) -> Result<T, ClientError> {
    if let Some(id) = session {
        return work(id).await;
    }
    let created = client
        .post_json("/v1/sessions", &json!({"interactive": true}))
        .await?;
    let id = created["id"]
        .as_str()
        .ok_or_else(|| ClientError::Failed(format!("a new session has no id: {created}")))?
        .to_owned();
    eprintln!("toold: session {id}");
    let outcome = work(&id).await;
    if let Err(err) = client
        .delete(&format!("/v1/sessions/{}", encode(&id)))
        .await
    {
        eprintln!("toold: the session {id} was left open: {err}");
    }
    outcome
}

/// `run`, in a session of the client's own: Ctrl-C interrupts the session (so its call is
/// cancelled and its result comes back as any other), a second Ctrl-C gives up waiting. The
/// session is closed afterwards either way. (In a session given with `--session`, Ctrl-C
/// keeps its default: an interrupt would stop the other calls running there too.)
async fn interrupted_on_ctrl_c(
    client: &ApiClient,
    session: &str,
    run: impl Future<Output = Result<Value, ClientError>>,
) -> Result<Value, ClientError> {
    let mut run = std::pin::pin!(run);
    tokio::select! {
        result = &mut run => return result,
        _ = tokio::signal::ctrl_c() => {}
    }
    eprintln!("toold: interrupting the call (Ctrl-C again to stop waiting)");
    let path = format!("/v1/sessions/{}/interrupt", encode(session));
    client.post_json(&path, &json!({})).await?;
    tokio::select! {
        result = run => result,
        _ = tokio::signal::ctrl_c() => Err(ClientError::Failed("interrupted".to_owned())),
    }
}

/// The call's result in the toold shape (`{"id","name","is_error","output",…}`).
async fn run_one(
    client: &ApiClient,
    session: &str,
    tool: &str,
    input: &Value,
) -> Result<Value, ClientError> {
    let path = format!("/v1/sessions/{}/batches", encode(session));
    let body = json!({"calls": [{"id": "call", "name": tool, "input": input}]});
    let mut asks = ApprovalAsks::open(client, session).await;
    let builder = with_json(client.request(reqwest::Method::POST, &path), &body)
        .header("accept", "text/event-stream");
    let response = client.send(builder, &path).await?;
    if let Some(asks) = &mut asks {
        asks.batch_id = response
            .headers()
            .get("x-toold-batch-id")
            .and_then(|value| value.to_str().ok())
            .map(str::to_owned);
    }
    let spinner = Spinner::start(tool);
    let mut frames = FrameReader::new(response);
    let mut result = None;
    let lost = |reason: String| ClientError::Unreachable {
        url: client.base().to_owned(),
        reason: format!("the connection was lost before the result: {reason}"),
    };
    loop {
        let next = match &mut asks {
            Some(watch) => tokio::select! {
                frame = frames.next() => Next::Frame(frame),
                seen = watch.next() => Next::Seen(seen),
            },
            None => Next::Frame(frames.next().await),
        };
        let next = match next {
            Next::Frame(frame) => frame,
            Next::Seen(Some(Seen::Asked(notice))) => {
                spinner.say(&notice, "waiting for approval");
                continue;
            }
            Next::Seen(Some(Seen::Decided)) => {
                spinner.clear();
                continue;
            }
            // The events are only for the notice: the call goes on without them.
            Next::Seen(None) => {
                asks = None;
                continue;
            }
        };
        let Some(frame) = next.map_err(lost)? else {
            break;
        };
        match frame.event.as_str() {
            "tool:progress" => spinner.show(&frame.data),
            "result" => {
                result = Some(serde_json::from_str(&frame.data).map_err(|err| {
                    ClientError::Failed(format!(
                        "a result frame is not JSON ({err}): {}",
                        frame.data
                    ))
                })?);
            }
            "done" => break,
            _ => {}
        }
    }
    spinner.stop();
    result.ok_or_else(|| lost("the stream ended".into()))
}

/// Whichever stream spoke first.
enum Next {
    Frame(Result<Option<Frame>, String>),
    Seen(Option<Seen>),
}

/// What the session's events said about the batch's approvals.
enum Seen {
    /// The notice to print: waiting for approval ID, and how to answer it.
    Asked(String),
    /// An approval was answered (or a rule decided): the call goes on or ends.
    Decided,
}

/// The session's event stream, read for the batch's `permission:ask` and
/// `permission:decision` events.
struct ApprovalAsks {
    frames: FrameReader,
    /// The batch's id once its response is in; events of other batches are skipped.
    batch_id: Option<String>,
    /// How to reach the daemon in the answering command (`--url` when not the default).
    url_flag: String,
    asked: bool,
}

impl ApprovalAsks {
    /// The stream, subscribed (the response's head is in), or `None` when it cannot be had.
    async fn open(client: &ApiClient, session: &str) -> Option<ApprovalAsks> {
        let path = format!("/v1/events?session={}", encode(session));
        let builder = client
            .request(reqwest::Method::GET, &path)
            .header("accept", "text/event-stream");
        let response = client.send(builder, &path).await.ok()?;
        let url_flag = if client.base() == super::DEFAULT_URL {
            String::new()
        } else {
            format!(" --url {}", client.base())
        };
        Some(ApprovalAsks {
            frames: FrameReader::new(response),
            batch_id: None,
            url_flag,
            asked: false,
        })
    }

    /// The next thing worth saying; `None` when the stream ended or broke.
    async fn next(&mut self) -> Option<Seen> {
        loop {
            let frame = self.frames.next().await.ok()??;
            let event: Value = serde_json::from_str(&frame.data).unwrap_or(Value::Null);
            let ours = self
                .batch_id
                .as_deref()
                .is_none_or(|batch| event["batch_id"] == batch);
            if !ours {
                continue;
            }
            match frame.event.as_str() {
                "permission:ask" => {
                    self.asked = true;
                    return Some(Seen::Asked(self.notice(&event["data"])));
                }
                "permission:decision" if self.asked => return Some(Seen::Decided),
                _ => {}
            }
        }
    }

    /// `waiting for approval ID (TOOL: REASON) — answer with: toold approvals allow ID …`.
    fn notice(&self, data: &Value) -> String {
        let id = data["approval_id"].as_str().unwrap_or("?");
        let tool = data["tool"].as_str().unwrap_or("the tool");
        let why = match data["reason"].as_str().filter(|reason| !reason.is_empty()) {
            Some(reason) => format!("{tool}: {reason}"),
            None => tool.to_owned(),
        };
        let url = &self.url_flag;
        format!(
            "toold: waiting for approval {id} ({why}) — answer with: \
             toold approvals allow {id}{url} (or toold approvals deny {id}{url})"
        )
    }
}

/// The output, whole, on stdout (with a final newline if it has none).
async fn print_output(client: &ApiClient, result: &Value) -> Result<(), ClientError> {
    let mut stdout = std::io::stdout().lock();
    let mut last = None;
    match result["offloaded"]["result_id"].as_str() {
        Some(result_id) => {
            let total = result["offloaded"]["total_chars"].as_u64().unwrap_or(0);
            let mut offset = 0;
            while offset < total {
                let path = format!(
                    "/v1/results/{}?offset={offset}&limit={RESULT_PAGE}",
                    encode(result_id)
                );
                let page = client.get_json(&path).await?;
                let content = page["content"].as_str().unwrap_or("");
                if content.is_empty() {
                    return Err(ClientError::Failed(format!(
                        "the result {result_id} ends at {offset} of {total} characters"
                    )));
                }
                stdout.write_all(content.as_bytes())?;
                offset += content.chars().count() as u64;
                last = content.chars().last();
            }
        }
        None => {
            let output = result["output"].as_str().unwrap_or("");
            stdout.write_all(output.as_bytes())?;
            last = output.chars().last();
        }
    }
    if last.is_some_and(|c| c != '\n') {
        stdout.write_all(b"\n")?;
    }
    stdout.flush()?;
    Ok(())
}

/// A spinner on stderr with the tool's latest progress, when stderr is a terminal.
struct Spinner {
    latest: Arc<Mutex<String>>,
    ticker: Option<tokio::task::JoinHandle<()>>,
}

impl Spinner {
    fn start(tool: &str) -> Spinner {
        let latest = Arc::new(Mutex::new(String::new()));
        if !std::io::stderr().is_terminal() {
            return Spinner {
                latest,
                ticker: None,
            };
        }
        let shown = latest.clone();
        let tool = tool.to_owned();
        let ticker = tokio::spawn(async move {
            const FRAMES: [char; 10] = ['⠋', '⠙', '⠹', '⠸', '⠼', '⠴', '⠦', '⠧', '⠇', '⠏'];
            let mut tick = tokio::time::interval(Duration::from_millis(100));
            for frame in FRAMES.iter().cycle() {
                tick.tick().await;
                let progress = shown.lock().map(|p| p.clone()).unwrap_or_default();
                eprint!("\r\x1b[K{frame} {tool} {progress}");
            }
        });
        Spinner {
            latest,
            ticker: Some(ticker),
        }
    }

    /// A `tool:progress` frame's `data` (`{"call_id","tool","data"}`), as a line.
    fn show(&self, frame_data: &str) {
        let parsed: Value = serde_json::from_str(frame_data).unwrap_or(Value::Null);
        if let Ok(mut latest) = self.latest.lock() {
            *latest = progress_line(&parsed["data"]);
        }
    }

    /// A line of its own on stderr (above the spinner, on a terminal), and `status` as the
    /// spinner's text until the next progress report.
    fn say(&self, line: &str, status: &str) {
        if let Ok(mut latest) = self.latest.lock() {
            *latest = status.to_owned();
        }
        if self.ticker.is_some() {
            eprintln!("\r\x1b[K{line}");
        } else {
            eprintln!("{line}");
        }
    }

    /// No text beside the spinner.
    fn clear(&self) {
        if let Ok(mut latest) = self.latest.lock() {
            latest.clear();
        }
    }

    fn stop(self) {
        if let Some(ticker) = self.ticker {
            ticker.abort();
            eprint!("\r\x1b[K");
        }
    }
}

/// What a tool reported, on one short line: its text (a string, or a `message`, `text` or
/// `line` field), else its fields as `key=value` (nulls left out).
fn progress_line(data: &Value) -> String {
    let text = match data {
        Value::String(text) => text.clone(),
        Value::Object(fields) => ["message", "text", "line"]
            .iter()
            .find_map(|key| fields.get(*key).and_then(Value::as_str).map(str::to_owned))
            .unwrap_or_else(|| {
                let pairs: Vec<String> = fields
                    .iter()
                    .filter(|(_, value)| !value.is_null())
                    .map(|(key, value)| match value {
                        Value::String(text) => format!("{key}={text}"),
                        other => format!("{key}={other}"),
                    })
                    .collect();
                pairs.join(" ")
            }),
        Value::Null => String::new(),
        other => other.to_string(),
    };
    text.lines().last().unwrap_or("").chars().take(60).collect()
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::{Value, progress_line};

    #[test]
    fn progress_is_shown_as_its_text_or_its_fields_on_one_short_line() {
        assert_eq!(
            progress_line(&json!({"description": null, "pid": 42})),
            "pid=42"
        );
        assert_eq!(
            progress_line(&json!({"message": "step 2", "pid": 42})),
            "step 2"
        );
        assert_eq!(progress_line(&json!("one\ntwo")), "two");
        assert_eq!(progress_line(&json!("x".repeat(100))).len(), 60);
        assert_eq!(progress_line(&Value::Null), "");
    }
}
