//! The real daemon (`support::daemon`) spoken to over HTTP and SSE.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use futures::StreamExt;
use reqwest::StatusCode;
use serde_json::Value;

use crate::support::daemon::DaemonProcess;
use crate::support::deadline::within;

/// The longest a request may take to be answered in full (some tests run batches that take
/// a while on purpose: drains, timeouts).
pub const REQUEST: Duration = Duration::from_secs(120);
/// The longest [`SseReader::next`] waits for a frame with data.
pub const FRAME: Duration = Duration::from_secs(45);

pub struct Toold {
    /// `None` for a client of a daemon (or a load balancer) this test did not start.
    process: Option<DaemonProcess>,
    pub base: String,
    pub client: reqwest::Client,
    pub dir: Arc<tempfile::TempDir>,
    pub token: Option<String>,
}

/// A response: status, headers and the body as JSON (`Null` when it is not JSON).
pub struct Reply {
    pub status: StatusCode,
    pub headers: reqwest::header::HeaderMap,
    pub body: Value,
}

impl Toold {
    pub fn start() -> Toold {
        Toold::start_with(Arc::new(tempfile::tempdir().unwrap()), &[])
    }

    /// The daemon over `dir` (`data/` and an allowed root `projects/`), with extra flags.
    pub fn start_with(dir: Arc<tempfile::TempDir>, extra: &[&str]) -> Toold {
        Toold::start_with_env(dir, extra, &[])
    }

    /// [`Toold::start_with`] with `env` added to the daemon's environment.
    pub fn start_with_env(
        dir: Arc<tempfile::TempDir>,
        extra: &[&str],
        env: &[(&str, &str)],
    ) -> Toold {
        let process = DaemonProcess::start_with_env(dir.path(), extra, env);
        let token = extra
            .windows(2)
            .find(|w| w[0] == "--auth-token")
            .map(|w| w[1].to_owned());
        Toold {
            base: process.base.clone(),
            process: Some(process),
            client: reqwest::Client::new(),
            dir,
            token,
        }
    }

    /// A client of whatever answers at `base` (a load balancer in front of daemons): the
    /// request helpers work, the process ones panic.
    pub fn at(base: &str, dir: Arc<tempfile::TempDir>) -> Toold {
        Toold {
            process: None,
            base: base.to_owned(),
            client: reqwest::Client::new(),
            dir,
            token: None,
        }
    }

    fn process(&self) -> &DaemonProcess {
        self.process.as_ref().expect("a daemon this test started")
    }

    fn process_mut(&mut self) -> &mut DaemonProcess {
        self.process.as_mut().expect("a daemon this test started")
    }

    /// The daemon with a settings file holding `toml`, passed with `--config`.
    pub fn start_with_config(toml: &str) -> Toold {
        let dir = Arc::new(tempfile::tempdir().unwrap());
        let file = dir.path().join("toold.toml");
        std::fs::write(&file, toml).unwrap();
        let file = file.to_str().unwrap().to_owned();
        Toold::start_with(dir, &["--config", &file])
    }

    /// The working directory of a session.
    pub async fn workspace(&self, session: &str) -> PathBuf {
        let reply = self.get(&format!("/v1/sessions/{session}")).await;
        PathBuf::from(reply.body["working_directory"].as_str().unwrap())
    }

    /// The daemon's process id.
    pub fn pid(&self) -> u32 {
        self.process().pid()
    }

    /// Sends SIGTERM without waiting for the exit.
    pub fn signal_terminate(&self) {
        self.process().signal_terminate();
    }

    /// Waits for the process to exit.
    pub fn wait(&mut self) -> std::process::ExitStatus {
        self.process_mut().wait()
    }

    /// Stops this daemon with `kill -9` and waits for it.
    pub fn kill(&mut self) {
        self.process_mut().kill();
    }

    /// Stops this daemon with `kill -9` and starts another over the same directory.
    pub fn kill_and_restart(mut self) -> Toold {
        self.kill();
        Toold::start_with(self.dir.clone(), &[])
    }

    /// Stops this daemon with SIGTERM (a graceful stop) and starts another over the same
    /// directory on the same address, with the same flags `extra` (a client configured with
    /// the old URL reaches the new daemon).
    pub fn terminate_and_restart(mut self, extra: &[&str]) -> Toold {
        self.process().signal_terminate();
        assert!(
            self.process_mut().wait().success(),
            "a graceful stop exits 0"
        );
        self.start_again(extra)
    }

    /// Another daemon over this one's directory, on its address, with the flags `extra`
    /// (this one must have exited).
    pub fn start_again(&self, extra: &[&str]) -> Toold {
        let listen = self.base.trim_start_matches("http://").to_owned();
        let process = DaemonProcess::start_on(self.dir.path(), &listen, extra);
        Toold {
            base: process.base.clone(),
            process: Some(process),
            client: reqwest::Client::new(),
            dir: self.dir.clone(),
            token: self.token.clone(),
        }
    }

    /// SIGTERM; returns the exit status.
    pub fn terminate(mut self) -> std::process::ExitStatus {
        self.process().signal_terminate();
        self.process_mut().wait()
    }

    pub fn projects(&self) -> PathBuf {
        self.dir.path().join("projects").canonicalize().unwrap()
    }

    pub fn request(&self, method: reqwest::Method, path: &str) -> reqwest::RequestBuilder {
        self.request_as(self.token.as_deref(), method, path)
    }

    /// A request with `token` (none: no `Authorization`), whatever the daemon's own token.
    pub fn request_as(
        &self,
        token: Option<&str>,
        method: reqwest::Method,
        path: &str,
    ) -> reqwest::RequestBuilder {
        let builder = self.client.request(method, format!("{}{path}", self.base));
        match token {
            Some(token) => builder.bearer_auth(token),
            None => builder,
        }
    }

    /// Sends the request and reads the whole answer, failing the test after [`REQUEST`].
    pub async fn send(&self, builder: reqwest::RequestBuilder) -> Reply {
        within(REQUEST, "an HTTP answer", async {
            let response = builder.send().await.expect("request sent");
            let status = response.status();
            let headers = response.headers().clone();
            let bytes = response.bytes().await.unwrap();
            Reply {
                status,
                headers,
                body: serde_json::from_slice(&bytes).unwrap_or(Value::Null),
            }
        })
        .await
    }

    /// The raw text of a GET (for non-JSON bodies).
    pub async fn get_text(&self, path: &str) -> (StatusCode, String) {
        within(REQUEST, "an HTTP answer", async {
            let response = self
                .request(reqwest::Method::GET, path)
                .send()
                .await
                .expect("request sent");
            (response.status(), response.text().await.unwrap())
        })
        .await
    }

    pub async fn get(&self, path: &str) -> Reply {
        self.send(self.request(reqwest::Method::GET, path)).await
    }

    pub async fn delete(&self, path: &str) -> Reply {
        self.send(self.request(reqwest::Method::DELETE, path)).await
    }

    pub async fn post(&self, path: &str, body: &Value) -> Reply {
        self.post_bytes(path, serde_json::to_vec(body).unwrap())
            .await
    }

    /// One call in a batch of its own in `session`; its result (`results[0]`).
    pub async fn call_one(&self, session: &str, name: &str, input: Value) -> Value {
        let reply = self
            .post(
                &format!("/v1/sessions/{session}/batches"),
                &serde_json::json!({"calls": [{"id": "c1", "name": name, "input": input}]}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body["results"][0].clone()
    }

    pub async fn post_bytes(&self, path: &str, body: Vec<u8>) -> Reply {
        let builder = self
            .request(reqwest::Method::POST, path)
            .header("content-type", "application/json")
            .body(body);
        self.send(builder).await
    }

    /// A new session in a fresh workspace; its id.
    pub async fn session(&self) -> String {
        self.session_with(&serde_json::json!({})).await
    }

    /// A new session created with `body`; its id.
    pub async fn session_with(&self, body: &Value) -> String {
        let reply = self.post("/v1/sessions", body).await;
        assert_eq!(reply.status, StatusCode::CREATED, "{}", reply.body);
        reply.body["id"].as_str().unwrap().to_owned()
    }

    /// Runs `calls` (the toold shape's array) as one batch in `session`; the answer's body.
    pub async fn run_batch(&self, session: &str, calls: Value) -> Value {
        let reply = self
            .post(
                &format!("/v1/sessions/{session}/batches"),
                &serde_json::json!({"calls": calls}),
            )
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
        reply.body
    }

    /// Opens an SSE stream (POST when `body` is given) with optional `Last-Event-ID`.
    pub async fn sse(
        &self,
        path: &str,
        body: Option<&Value>,
        last_event_id: Option<u64>,
    ) -> SseReader {
        self.sse_as(self.token.as_deref(), path, body, last_event_id)
            .await
    }

    /// [`Toold::sse`] with `token`.
    pub async fn sse_as(
        &self,
        token: Option<&str>,
        path: &str,
        body: Option<&Value>,
        last_event_id: Option<u64>,
    ) -> SseReader {
        let mut builder = match body {
            Some(body) => self
                .request_as(token, reqwest::Method::POST, path)
                .body(serde_json::to_vec(body).unwrap()),
            None => self.request_as(token, reqwest::Method::GET, path),
        }
        .header("accept", "text/event-stream");
        if let Some(id) = last_event_id {
            builder = builder.header("last-event-id", id.to_string());
        }
        let response = within(REQUEST, "an event stream's head", builder.send())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        SseReader::new(response)
    }
}

pub use crate::support::daemon::command;

/// One SSE frame.
#[derive(Debug, Clone, Default)]
pub struct Frame {
    pub id: Option<String>,
    pub event: String,
    pub data: Value,
}

pub struct SseReader {
    pub headers: reqwest::header::HeaderMap,
    stream: std::pin::Pin<Box<dyn futures::Stream<Item = reqwest::Result<Vec<u8>>> + Send>>,
    buffer: String,
}

impl SseReader {
    /// The frames of a response already received (its status checked by the caller).
    pub fn new(response: reqwest::Response) -> SseReader {
        SseReader {
            headers: response.headers().clone(),
            stream: Box::pin(
                response
                    .bytes_stream()
                    .map(|chunk| chunk.map(|b| b.to_vec())),
            ),
            buffer: String::new(),
        }
    }

    /// The next frame with data (keep-alive comments skipped); `None` when the stream ends.
    pub async fn next(&mut self) -> Option<Frame> {
        self.try_next().await.expect("the stream does not fail")
    }

    /// As [`Self::next`], with a stream that fails (its connection cut) as an error.
    ///
    /// Fails the test when no frame with data came within [`FRAME`]: keep-alive comments
    /// arrive every 15 s, so only a deadline over the whole wait ends a stream whose
    /// frames never come (a broken feature).
    pub async fn try_next(&mut self) -> reqwest::Result<Option<Frame>> {
        let deadline = tokio::time::Instant::now() + FRAME;
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let raw: String = self.buffer.drain(..end + 2).collect();
                let mut frame = Frame::default();
                let mut data = String::new();
                for line in raw.lines() {
                    if let Some(v) = line.strip_prefix("id:") {
                        frame.id = Some(v.trim().to_owned());
                    } else if let Some(v) = line.strip_prefix("event:") {
                        frame.event = v.trim().to_owned();
                    } else if let Some(v) = line.strip_prefix("data:") {
                        data.push_str(v.trim_start());
                    }
                }
                if data.is_empty() {
                    continue;
                }
                frame.data = serde_json::from_str(&data).unwrap_or(Value::String(data));
                return Ok(Some(frame));
            }
            let Some(chunk) = tokio::time::timeout_at(deadline, self.stream.next())
                .await
                .unwrap_or_else(|_| panic!("no SSE frame with data within {FRAME:?}"))
            else {
                return Ok(None);
            };
            self.buffer.push_str(&String::from_utf8_lossy(&chunk?));
        }
    }
}
