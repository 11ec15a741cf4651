//! One connection to an MCP server through rmcp's client: a child process over stdio, or a
//! Streamable HTTP endpoint; and the client handler that routes what the server sends unasked
//! (progress, `tools/list_changed`).
//!
//! - **Era.** The bridge speaks 2025-11-25 (`initialize`) to every server: every server in the
//!   field does, toold's own door does, and its notifications (progress, list changes,
//!   cancellation) arrive without a `listen` subscription. rmcp re-initialises an HTTP session
//!   the server forgot (a 404) once by itself (`reinit_on_expired_session`).
//! - **A stdio child** runs in its own process group, with `PR_SET_PDEATHSIG` so it dies with
//!   toold even after `kill -9`; its environment is only the base variables `config` read
//!   (`PATH`, `HOME`, …) plus the server's `env`, so the daemon's secrets (`TOOLD_AUTH_TOKENS`)
//!   never reach a third-party program. Its stderr is logged a line at a time (each cut to
//!   1 KiB, at most 50 a second) and its last 4 KiB kept for the error a crash reports.
//! - **Size.** A message up to 64 MiB is read and a larger result offloaded like any tool's.
//!   A larger stdio line is dropped, and its call failed, by [`super::stdio`]; a larger HTTP
//!   body fails the call with rmcp's error.
//! - **Stdio** goes through toold's own transport ([`super::stdio::StdioTransport`], issue 18's
//!   overhead), HTTP through rmcp's; both under rmcp's client.

use std::collections::{HashMap, VecDeque};
use std::path::Path;
use std::process::Stdio;
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use rmcp::ClientHandler;
use rmcp::model::{
    ClientCapabilities, ClientConfig, Implementation, ProgressNotificationParam, ProgressToken,
    ProtocolVersion,
};
use rmcp::service::{NotificationContext, RoleClient, RunningService, ServiceExt};
use rmcp::transport::streamable_http_client::{
    StreamableHttpClientTransport, StreamableHttpClientTransportConfig,
};
use serde_json::{Value, json};
use tokio::io::{AsyncBufReadExt, AsyncReadExt};
use tokio::sync::Notify;

use super::settings::McpServerSettings;
use crate::tool::ProgressSink;

/// The largest message read from a server.
pub const MAX_MESSAGE_BYTES: usize = 64 * 1024 * 1024;
/// How much of a stdio server's stderr is kept for a crash's error.
const STDERR_TAIL_BYTES: usize = 4096;
/// The longest stderr line logged.
const STDERR_LINE_BYTES: usize = 1024;
/// The most stderr lines a server gets logged per second.
const STDERR_LINES_PER_SECOND: usize = 50;

/// What the server sends unasked, routed to whoever waits for it.
#[derive(Default)]
pub struct Routes {
    /// Running calls' progress sinks, by the progress token their request carried (with the
    /// route's own number, so a stale route never removes a newer call's).
    progress: Mutex<HashMap<ProgressToken, (u64, ProgressSink)>>,
    next_route: AtomicU64,
    /// Progress that came before its call's route: rmcp sends the request before it hands
    /// back the token, so a fast server's first report can win the race.
    unrouted: Mutex<VecDeque<(ProgressToken, Value, Instant)>>,
    /// Fired on `notifications/tools/list_changed`.
    pub list_changed: Notify,
    /// How many stdio messages were over [`MAX_MESSAGE_BYTES`] (discarded as they arrive): a call
    /// that then goes unanswered says why.
    pub oversized: AtomicU64,
    /// The ids (as JSON text) of discarded answers whose id came early in the message, and
    /// the signal that one was added: their calls fail at once rather than at their timeout.
    oversized_answers: Mutex<Vec<String>>,
    pub oversized_answer: Notify,
    /// Progress is read off the stdio stream by [`super::stdio::StdioTransport`], in order and
    /// before the answer that follows it (rmcp hands each notification to a task of its own,
    /// so they can pass each other and the answer); the handler then leaves it alone.
    pub(super) progress_read_in_order: AtomicBool,
}

/// How many early reports are kept, and for how long.
const UNROUTED_KEPT: usize = 64;
const UNROUTED_FOR: Duration = Duration::from_secs(5);

impl Routes {
    /// Sends `token`'s progress to `sink` until the guard is dropped (reports that came
    /// before it first).
    pub fn route_progress(self: &Arc<Self>, token: ProgressToken, sink: ProgressSink) -> Route {
        let number = self.next_route.fetch_add(1, Ordering::Relaxed);
        let mut early = Vec::new();
        {
            let mut progress = lock(&self.progress);
            progress.insert(token.clone(), (number, sink.clone()));
            let mut unrouted = lock(&self.unrouted);
            unrouted.retain(|(for_token, report, _)| {
                let mine = *for_token == token;
                if mine {
                    early.push(report.clone());
                }
                !mine
            });
        }
        for report in early {
            sink.report(report);
        }
        Route {
            routes: self.clone(),
            token,
            number,
        }
    }

    pub(super) fn deliver_progress(&self, params: ProgressNotificationParam) {
        let report = json!({
            "progress": params.progress,
            "total": params.total,
            "message": params.message,
        });
        self.deliver(params.progress_token, report);
    }

    fn deliver(&self, token: ProgressToken, report: Value) {
        let progress = lock(&self.progress);
        if let Some((_, sink)) = progress.get(&token) {
            sink.report(report);
            return;
        }
        let mut unrouted = lock(&self.unrouted);
        let now = Instant::now();
        unrouted.retain(|(_, _, at)| now.duration_since(*at) < UNROUTED_FOR);
        if unrouted.len() >= UNROUTED_KEPT {
            unrouted.pop_front();
        }
        unrouted.push_back((token, report, now));
    }
}

impl Routes {
    /// Whether the answer to request `id` (as JSON text) was discarded for its size; forgets it.
    pub fn take_oversized(&self, id: &str) -> bool {
        let mut answers = lock(&self.oversized_answers);
        let found = answers.iter().position(|answer| answer == id);
        found.map(|at| answers.swap_remove(at)).is_some()
    }

    /// A message over the limit began: counted.
    pub(super) fn discarded(&self) {
        self.oversized.fetch_add(1, Ordering::AcqRel);
    }

    /// The discarded message was the answer to `id`: its call fails now.
    pub(super) fn discarded_answer(&self, id: String) {
        let mut answers = lock(&self.oversized_answers);
        if answers.len() >= UNROUTED_KEPT {
            answers.remove(0);
        }
        answers.push(id);
        drop(answers);
        self.oversized_answer.notify_waiters();
    }
}

fn lock<T>(mutex: &Mutex<T>) -> std::sync::MutexGuard<'_, T> {
    // Only whole entries are inserted or removed under these locks.
    mutex.lock().unwrap_or_else(|p| p.into_inner())
}

/// A call's progress route; removed when dropped.
pub struct Route {
    routes: Arc<Routes>,
    token: ProgressToken,
    number: u64,
}

impl Drop for Route {
    fn drop(&mut self) {
        let mut progress = lock(&self.routes.progress);
        if progress
            .get(&self.token)
            .is_some_and(|(n, _)| *n == self.number)
        {
            progress.remove(&self.token);
        }
    }
}

/// rmcp's client handler: declares no client capabilities (toold answers no sampling,
/// elicitation or roots requests from a server) and routes notifications.
pub struct Handler {
    pub routes: Arc<Routes>,
}

impl ClientHandler for Handler {
    async fn on_progress(
        &self,
        params: ProgressNotificationParam,
        _context: NotificationContext<RoleClient>,
    ) {
        // Over stdio the transport delivered it already, in order (see `super::stdio`).
        if !self.routes.progress_read_in_order.load(Ordering::Acquire) {
            self.routes.deliver_progress(params);
        }
    }

    async fn on_tool_list_changed(&self, _context: NotificationContext<RoleClient>) {
        self.routes.list_changed.notify_one();
    }

    fn get_info(&self) -> ClientConfig {
        ClientConfig::new(
            ClientCapabilities::default(),
            Implementation::new("toold", env!("CARGO_PKG_VERSION")),
        )
        .with_protocol_version(ProtocolVersion::V_2025_11_25)
    }
}

/// A live client.
pub type Client = RunningService<RoleClient, Handler>;

/// A stdio server's process: its group is signalled, and it is reaped, by whoever stops it.
pub struct ChildProcess {
    pub child: tokio::process::Child,
    pub pid: u32,
    /// The end of its stderr, for the error a crash reports.
    pub stderr_tail: Arc<Mutex<String>>,
    /// [`ChildProcess::stop`] ran: the group is gone.
    stopped: bool,
}

impl Drop for ChildProcess {
    /// A start abandoned half-way (a stop, the startup timeout) drops the process unstopped:
    /// the whole group gets SIGKILL, not only the leader (tokio's `kill_on_drop` kills and
    /// reaps that one), so an `npx`'s grandchildren go too.
    fn drop(&mut self) {
        if !self.stopped {
            signal_group(self.pid, libc::SIGKILL);
        }
    }
}

impl ChildProcess {
    /// SIGTERM to the group, SIGKILL after `grace`, then reaped; a group member that outlived
    /// the leader gets the SIGKILL too.
    pub async fn stop(&mut self, grace: std::time::Duration) {
        signal_group(self.pid, libc::SIGTERM);
        if tokio::time::timeout(grace, self.child.wait())
            .await
            .is_err()
        {
            signal_group(self.pid, libc::SIGKILL);
            let _ = self.child.wait().await;
        }
        signal_group(self.pid, libc::SIGKILL);
        self.stopped = true;
    }

    /// The last lines it wrote to stderr.
    pub fn stderr_tail(&self) -> String {
        self.stderr_tail
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .trim()
            .to_owned()
    }
}

fn signal_group(pid: u32, signal: libc::c_int) {
    if let Ok(pid) = libc::pid_t::try_from(pid) {
        // SAFETY: kill(2) with a negative pid signals that process group; no memory involved.
        unsafe {
            libc::kill(-pid, signal);
        }
    }
}

/// Why a connection could not be made.
#[derive(Debug, thiserror::Error)]
pub enum ConnectError {
    #[error("cannot start \"{program}\": {source}")]
    Spawn {
        program: String,
        #[source]
        source: std::io::Error,
    },
    #[error("the handshake failed: {0}")]
    Handshake(String),
}

/// Starts `settings`' program in `cwd` and makes the handshake over its stdio.
pub async fn connect_stdio(
    settings: &McpServerSettings,
    cwd: &Path,
    routes: Arc<Routes>,
) -> Result<(Client, ChildProcess), ConnectError> {
    let program = settings
        .program
        .clone()
        .or_else(|| settings.command.clone().map(Into::into))
        .unwrap_or_default();
    let mut command = tokio::process::Command::new(&program);
    command
        .args(&settings.args)
        .env_clear()
        .envs(&settings.base_env)
        .envs(&settings.env)
        .current_dir(cwd)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .process_group(0)
        .kill_on_drop(true);
    let daemon = std::process::id() as libc::pid_t;
    // SAFETY: prctl and getppid are async-signal-safe and touch no memory of the parent. The
    // parent-death signal only covers a death after the prctl; a child whose daemon died
    // since the fork has been re-parented, and gives up.
    unsafe {
        command.pre_exec(move || {
            libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL);
            if libc::getppid() != daemon {
                return Err(std::io::Error::from_raw_os_error(libc::ESRCH));
            }
            Ok(())
        });
    }
    let mut child = command.spawn().map_err(|source| ConnectError::Spawn {
        program: program.display().to_string(),
        source,
    })?;
    let pid = child.id().unwrap_or_default();
    let stderr_tail = Arc::new(Mutex::new(String::new()));
    if let Some(stderr) = child.stderr.take() {
        tokio::spawn(log_stderr(
            settings.name.clone(),
            stderr,
            stderr_tail.clone(),
        ));
    }
    let (Some(stdout), Some(stdin)) = (child.stdout.take(), child.stdin.take()) else {
        unreachable!("stdin and stdout were piped");
    };
    let mut process = ChildProcess {
        child,
        pid,
        stderr_tail,
        stopped: false,
    };
    let transport = super::stdio::StdioTransport::new(stdout, stdin, routes.clone());
    let handler = Handler { routes };
    match handler.serve(transport).await {
        Ok(client) => Ok((client, process)),
        Err(err) => {
            process.stop(std::time::Duration::from_millis(200)).await;
            let tail = process.stderr_tail();
            let mut message = err.to_string();
            if !tail.is_empty() {
                message = format!("{message}; its stderr ends: {tail}");
            }
            Err(ConnectError::Handshake(message))
        }
    }
}

/// Makes the handshake with `settings`' Streamable HTTP endpoint.
pub async fn connect_http(
    settings: &McpServerSettings,
    routes: Arc<Routes>,
) -> Result<Client, ConnectError> {
    let url = settings.url.clone().unwrap_or_default();
    let mut config = StreamableHttpClientTransportConfig::with_uri(url);
    config.max_json_response_size = MAX_MESSAGE_BYTES;
    config.max_sse_event_size = MAX_MESSAGE_BYTES;
    if let Some(token) = &settings.bearer_token {
        config.auth_header = Some(token.clone());
    }
    for (name, value) in &settings.headers {
        // Checked at start-up (settings::check_shape); a failure here would be a bug there.
        let (Ok(name), Ok(value)) = (name.parse(), value.parse()) else {
            return Err(ConnectError::Handshake(format!(
                "the header \"{name}\" is not valid"
            )));
        };
        config.custom_headers.insert(name, value);
    }
    let transport = StreamableHttpClientTransport::from_config(config);
    let handler = Handler { routes };
    handler
        .serve(transport)
        .await
        .map_err(|err| ConnectError::Handshake(err.to_string()))
}

/// Logs `server`'s stderr a line at a time (at most [`STDERR_LINES_PER_SECOND`]; the rest are
/// counted and the count logged) and keeps its end.
async fn log_stderr(server: String, stderr: tokio::process::ChildStderr, tail: Arc<Mutex<String>>) {
    let mut lines = tokio::io::BufReader::new(stderr);
    let mut line = Vec::new();
    let mut window = Instant::now();
    let (mut logged, mut dropped) = (0usize, 0usize);
    loop {
        line.clear();
        // A line longer than this is taken in pieces, so memory stays bounded.
        let mut piece = (&mut lines).take(STDERR_LINE_BYTES as u64);
        match piece.read_until(b'\n', &mut line).await {
            Ok(0) | Err(_) => return,
            Ok(_) => {}
        }
        let text = String::from_utf8_lossy(&line);
        let text = text.trim_end();
        if window.elapsed() >= Duration::from_secs(1) {
            if dropped > 0 {
                tracing::info!(mcp_server = %server, "stderr: {dropped} more lines not logged");
            }
            (window, logged, dropped) = (Instant::now(), 0, 0);
        }
        if logged < STDERR_LINES_PER_SECOND {
            logged += 1;
            tracing::info!(mcp_server = %server, "stderr: {text}");
        } else {
            dropped += 1;
        }
        let mut kept = tail.lock().unwrap_or_else(|p| p.into_inner());
        kept.push_str(text);
        kept.push('\n');
        if kept.len() > STDERR_TAIL_BYTES {
            let mut from = kept.len() - STDERR_TAIL_BYTES;
            while !kept.is_char_boundary(from) {
                from += 1;
            }
            kept.drain(..from);
        }
    }
}
