//! The MCP door's speed (issue 17): `tools/call read_file` on the 4 KiB file, one connection,
//! calls one after another, p50/p95 of
//!
//! - toold's HTTP batch (`POST /v1/sessions/{id}/batches`, one call), the same read without MCP;
//! - toold's MCP door over Streamable HTTP, 2026-07-28 era: a stateless request (`_meta` and
//!   the `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers) on `/v1/sessions/{id}/mcp`,
//!   answered as JSON;
//! - toold's MCP door, 2025-11-25 era: a legacy MCP session (`initialize`, then
//!   `Mcp-Session-Id`) on the same path, each answer an SSE stream (chunked);
//! - the MCP reference `@modelcontextprotocol/server-filesystem` ([`REFERENCE_VERSION`],
//!   installed by this bench under the target directory with npm) and its `read_text_file`,
//!   over stdio: newline-delimited JSON-RPC written and read by this bench, run with the Node
//!   22 that `.ci/node22.sh` installs (the version is printed).
//!
//! All four in alternating rounds in one run, so the machine's noise falls on each alike. The
//! budget: toold's MCP p50 at most a third of the reference's. Each subject's first answer is
//! checked (the file's text); after that only the status (HTTP) or the id (stdio).
//! A request's JSON-RPC id is new each time (a session must not reuse one), so each MCP
//! request is serialised per call, on both sides; the HTTP batch is serialised once, as in
//! `load.rs`.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Connection, PreparedRequest, Response};

/// The server-filesystem version measured (the npm registry's latest when this was written).
const REFERENCE_VERSION: &str = "2026.8.31";
const STATELESS: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const BUDGET_RATIO: f64 = 1.0 / 3.0;

/// What the rounds did to toold's session: calls made (for the audit check).
pub struct McpFigures {
    pub toold_calls: usize,
}

/// Runs the four subjects in `session` (whose workspace holds `file`); `plan` is (warm-up
/// calls, rounds, calls per round) for each.
pub async fn measure(
    address: SocketAddr,
    session: &str,
    projects: &Path,
    file: &str,
    plan: (usize, usize, usize),
) -> McpFigures {
    let (warm_up, rounds, round) = plan;
    let (node, reference) = install_reference();
    let mut subjects = [
        Subject::batch(address, session, file).await,
        Subject::stateless(address, session, file).await,
        Subject::legacy(address, session, file).await,
        Subject::reference(&node, &reference, projects, file),
    ];
    for subject in &mut subjects {
        subject.check_answer().await;
        for _ in 0..warm_up {
            subject.call().await;
        }
    }
    let mut samples: Vec<Vec<Duration>> = vec![Vec::new(); subjects.len()];
    for _ in 0..rounds {
        for (subject, samples) in subjects.iter_mut().zip(&mut samples) {
            for _ in 0..round {
                let started = Instant::now();
                subject.call().await;
                samples.push(started.elapsed());
            }
        }
    }
    report(&subjects, &mut samples, &node);
    // The batch, stateless and legacy subjects' calls, each audited in the session.
    McpFigures {
        toold_calls: 3 * (1 + warm_up + rounds * round),
    }
}

fn report(subjects: &[Subject], samples: &mut [Vec<Duration>], node: &Path) {
    let node_version = Command::new(node)
        .arg("--version")
        .output()
        .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
        .unwrap_or_default();
    println!(
        "mcp read_file 4 KiB: one connection each, sequential calls, alternating rounds of {} calls",
        samples[0].len()
    );
    let mut p50s = Vec::new();
    for (subject, samples) in subjects.iter().zip(samples.iter_mut()) {
        samples.sort();
        let (p50, p95) = (
            samples[samples.len() / 2],
            samples[samples.len() * 95 / 100],
        );
        p50s.push(p50.as_secs_f64());
        let label = match subject {
            Subject::Reference(_) => format!(
                "server-filesystem {REFERENCE_VERSION} read_text_file, stdio, node {node_version}"
            ),
            other => other.label().to_owned(),
        };
        println!(
            "  {:<58} p50 {:>7.1} µs, p95 {:>7.1} µs",
            label,
            p50.as_secs_f64() * 1e6,
            p95.as_secs_f64() * 1e6
        );
    }
    let [batch, stateless, legacy, reference] = p50s[..] else {
        unreachable!("four subjects")
    };
    let verdict = |met: bool| if met { "met" } else { "NOT met" };
    println!(
        "  toold MCP / reference p50: {:.2} (2026 stateless), {:.2} (2025 session)  (budget ≤ 0.33: {})",
        stateless / reference,
        legacy / reference,
        verdict(stateless.max(legacy) / reference <= BUDGET_RATIO)
    );
    println!(
        "  toold MCP / HTTP batch p50: {:.2}× (2026 stateless), {:.2}× (2025 session)",
        stateless / batch,
        legacy / batch
    );
}

/// One way of making the call, with its connection.
enum Subject {
    Batch(Connection, PreparedRequest),
    Stateless(HttpMcp),
    Legacy(HttpMcp),
    Reference(StdioServer),
}

/// toold's MCP door over one kept-alive connection.
struct HttpMcp {
    connection: Connection,
    address: SocketAddr,
    path: String,
    file: String,
    /// `Some` in the legacy era: the MCP session's id.
    mcp_session: Option<String>,
    next_id: u64,
}

impl Subject {
    async fn batch(address: SocketAddr, session: &str, file: &str) -> Subject {
        let body =
            json!({"calls": [{"id": "c0", "name": "read_file", "input": {"file_path": file}}]});
        Subject::Batch(
            Connection::open(address).await.expect("connects to toold"),
            PreparedRequest::post_json(address, &format!("/v1/sessions/{session}/batches"), &body),
        )
    }

    async fn stateless(address: SocketAddr, session: &str, file: &str) -> Subject {
        Subject::Stateless(HttpMcp::open(address, session, file).await)
    }

    async fn legacy(address: SocketAddr, session: &str, file: &str) -> Subject {
        let mut mcp = HttpMcp::open(address, session, file).await;
        mcp.initialize().await;
        Subject::Legacy(mcp)
    }

    fn reference(node: &Path, script: &Path, projects: &Path, file: &str) -> Subject {
        Subject::Reference(StdioServer::start(node, script, projects, file))
    }

    fn label(&self) -> &'static str {
        match self {
            Subject::Batch(..) => "toold HTTP batch (POST /v1/sessions/{id}/batches)",
            Subject::Stateless(_) => "toold MCP 2026-07-28 stateless (JSON answer)",
            Subject::Legacy(_) => "toold MCP 2025-11-25 session (SSE answer)",
            Subject::Reference(_) => "server-filesystem",
        }
    }

    /// One call; panics on anything but a 200 (HTTP) or the request's answer (stdio).
    async fn call(&mut self) -> Vec<u8> {
        match self {
            Subject::Batch(connection, request) => {
                ok(connection.send(request).await.expect("a batch")).body
            }
            Subject::Stateless(mcp) | Subject::Legacy(mcp) => mcp.call().await,
            Subject::Reference(server) => server.call(),
        }
    }

    /// The first answer holds the file's text (numbered by toold, as it is by the reference).
    async fn check_answer(&mut self) {
        let label = self.label();
        let body = self.call().await;
        let text = String::from_utf8_lossy(&body);
        let expected = if matches!(self, Subject::Reference(_)) {
            "63 abcdefghijklmnopqrstuvwxyz"
        } else {
            "64\\t63 abcdef"
        };
        assert!(
            text.contains(expected) && !text.contains("\"isError\":true"),
            "{label}: the answer does not hold the file: {text}"
        );
    }
}

fn ok(response: Response) -> Response {
    assert_eq!(
        response.status,
        200,
        "{}",
        String::from_utf8_lossy(&response.body)
    );
    response
}

impl HttpMcp {
    async fn open(address: SocketAddr, session: &str, file: &str) -> HttpMcp {
        HttpMcp {
            connection: Connection::open(address).await.expect("connects to toold"),
            address,
            path: format!("/v1/sessions/{session}/mcp"),
            file: file.to_owned(),
            mcp_session: None,
            next_id: 1,
        }
    }

    /// The legacy handshake: `initialize` (its answer names the MCP session), `initialized`.
    async fn initialize(&mut self) {
        let body = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "toold-load-bench", "version": "1"}}});
        let answer = ok(self.post(&body, &[]).await);
        self.mcp_session = Some(
            answer
                .mcp_session_id
                .expect("initialize names the MCP session"),
        );
        let initialized = json!({"jsonrpc": "2.0", "method": "notifications/initialized"});
        let answer = self.post(&initialized, &[]).await;
        assert_eq!(answer.status, 202, "notifications/initialized");
    }

    async fn call(&mut self) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        let arguments = json!({"file_path": self.file});
        let body = if self.mcp_session.is_some() {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "read_file", "arguments": arguments}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                   "params": {"name": "read_file", "arguments": arguments, "_meta": {
                       "io.modelcontextprotocol/protocolVersion": STATELESS,
                       "io.modelcontextprotocol/clientCapabilities": {}}}})
        };
        let headers: &[(&str, &str)] = if self.mcp_session.is_some() {
            &[]
        } else {
            &[("mcp-method", "tools/call"), ("mcp-name", "read_file")]
        };
        ok(self.post(&body, headers).await).body
    }

    async fn post(&mut self, body: &Value, extra: &[(&str, &str)]) -> Response {
        let mut headers = vec![("accept", "application/json, text/event-stream")];
        match &self.mcp_session {
            Some(session) => {
                headers.push(("mcp-session-id", session));
                headers.push(("mcp-protocol-version", LEGACY));
            }
            None if body["method"] != "initialize" => {
                headers.push(("mcp-protocol-version", STATELESS));
            }
            None => {}
        }
        headers.extend_from_slice(extra);
        let bytes = serde_json::to_vec(body).expect("JSON");
        let request =
            PreparedRequest::with_headers("POST", self.address, &self.path, &headers, &bytes);
        self.connection.send(&request).await.expect("an MCP answer")
    }
}

/// The reference server as a child process, spoken to in JSON-RPC lines.
struct StdioServer {
    child: Child,
    stdin: ChildStdin,
    stdout: BufReader<ChildStdout>,
    path: String,
    next_id: u64,
}

impl StdioServer {
    /// Starts `node script projects` and does the handshake.
    fn start(node: &Path, script: &Path, projects: &Path, file: &str) -> StdioServer {
        let mut child = Command::new(node)
            .arg(script)
            .arg(projects)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("server-filesystem starts");
        let stdin = child.stdin.take().expect("stdin is piped");
        let stdout = BufReader::new(child.stdout.take().expect("stdout is piped"));
        let mut server = StdioServer {
            child,
            stdin,
            stdout,
            path: projects.join(file).display().to_string(),
            next_id: 1,
        };
        let initialize = json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "toold-load-bench", "version": "1"}}});
        server.send(&initialize);
        let answer = server.answer(0);
        assert!(
            answer.contains("protocolVersion"),
            "server-filesystem initialize: {answer}"
        );
        server.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
        server
    }

    fn call(&mut self) -> Vec<u8> {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
            "params": {"name": "read_text_file", "arguments": {"path": self.path}}});
        self.send(&request);
        self.answer(id).into_bytes()
    }

    fn send(&mut self, message: &Value) {
        let mut line = serde_json::to_vec(message).expect("JSON");
        line.push(b'\n');
        self.stdin
            .write_all(&line)
            .and_then(|()| self.stdin.flush())
            .expect("writes to server-filesystem");
    }

    /// Lines up to the answer to `id` (the SDK writes `"id":N` last); any other message (a
    /// notification, a request to the client) is skipped.
    fn answer(&mut self, id: u64) -> String {
        let tail = format!("\"id\":{id}}}");
        loop {
            let mut line = String::new();
            let read = self
                .stdout
                .read_line(&mut line)
                .expect("reads server-filesystem");
            assert!(read > 0, "server-filesystem closed its stdout");
            let trimmed = line.trim_end();
            if trimmed.ends_with(&tail)
                || serde_json::from_str::<Value>(trimmed).is_ok_and(|m| m["id"] == id)
            {
                return line;
            }
        }
    }
}

impl Drop for StdioServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Node 22 (`.ci/node22.sh`, installed under the target directory if missing) and
/// server-filesystem's entry point, installed with npm under `<target>/server-filesystem`
/// unless that version is there already.
fn install_reference() -> (PathBuf, PathBuf) {
    // The bench's binary lives in `<target>/release/`.
    let target = Path::new(env!("CARGO_BIN_EXE_toold"))
        .parent()
        .and_then(Path::parent)
        .expect("the toold binary is under a target directory");
    let prefix = target.join("server-filesystem");
    let script = r#"
        source .ci/node22.sh >&2
        package="$PREFIX/node_modules/@modelcontextprotocol/server-filesystem/package.json"
        if ! grep -q "\"version\": \"$VERSION\"" "$package" 2>/dev/null; then
          rm -rf "$PREFIX"
          npm install --prefix "$PREFIX" --no-save --no-audit --no-fund --silent \
            "@modelcontextprotocol/server-filesystem@$VERSION" >&2
        fi
        command -v node
    "#;
    let output = Command::new("bash")
        .args(["-euo", "pipefail", "-c", script])
        .current_dir(env!("CARGO_MANIFEST_DIR"))
        .env("CARGO_TARGET_DIR", target)
        .env("PREFIX", &prefix)
        .env("VERSION", REFERENCE_VERSION)
        .stderr(Stdio::inherit())
        .output()
        .expect("bash runs");
    assert!(
        output.status.success(),
        "installing Node 22 and server-filesystem {REFERENCE_VERSION} failed (see above)"
    );
    let node = PathBuf::from(String::from_utf8_lossy(&output.stdout).trim());
    let entry = prefix.join("node_modules/@modelcontextprotocol/server-filesystem/dist/index.js");
    assert!(entry.is_file(), "no {}", entry.display());
    (node, entry)
}
