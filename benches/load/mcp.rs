//! The MCP door's speed (issue 17): `tools/call read_file` on the 4 KiB file, one connection,
//! calls one after another, p50/p95 of
//!
//! - toold's HTTP batch (`POST /v1/sessions/{id}/batches`, one call), the same read without MCP;
//! - toold's MCP door over Streamable HTTP, 2026-07-28 era: a stateless request (`_meta` and
//!   the `MCP-Protocol-Version`/`Mcp-Method`/`Mcp-Name` headers) on `/v1/sessions/{id}/mcp`,
//!   answered as JSON;
//! - toold's MCP door, 2025-11-25 era: a legacy MCP session (`initialize`, then
//!   `Mcp-Session-Id`) on the same path, each answer an SSE stream (chunked);
//! - the MCP reference `@modelcontextprotocol/server-filesystem` (the version `.ci/run` pins
//!   in `.ci/mcp_servers.sh`, installed by this bench through that same script under the
//!   target directory) and its `read_text_file`, over stdio: newline-delimited JSON-RPC
//!   written and read by this bench, run with the Node 22 that `.ci/node22.sh` installs (both
//!   versions are printed).
//!
//! All four in alternating rounds in one run, so the machine's noise falls on each alike. The
//! budget: toold's MCP p50 at most a third of the reference's. Each subject's first answer is
//! checked (the file's text); after that only the status (HTTP) or the id (stdio).
//! A request's JSON-RPC id is new each time (a session must not reuse one), so each MCP
//! request is serialised per call, on both sides; the HTTP batch is serialised once, as in
//! `load.rs`.
//!
//! The bridge mode ([`measure_bridge`], issue 18) reuses the same subjects and rounds: toold's
//! HTTP batch calling `mcp__fs__read_text_file` (the same server-filesystem mounted through
//! the MCP bridge as a daemon-scoped, non-deferred, read-only server) beside this bench's own
//! stdio client on that server; budget: the bridge adds at most 150 µs p50. The built-in
//! `read_file` batch runs in the same rounds, to tell toold's HTTP path from the bridge's hop.

use std::io::{BufRead, BufReader, Write};
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, ChildStdout, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::client::{Connection, PreparedRequest, Response};

const STATELESS: &str = "2026-07-28";
const LEGACY: &str = "2025-11-25";
const BUDGET_RATIO: f64 = 1.0 / 3.0;
/// What the bridge may add to the direct stdio call's p50 (issue 18).
const BRIDGE_BUDGET: Duration = Duration::from_micros(150);

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
    let reference = Reference::install();
    let mut subjects = [
        Subject::batch(address, session, file).await,
        Subject::stateless(address, session, file).await,
        Subject::legacy(address, session, file).await,
        Subject::reference(&reference, projects, file),
    ];
    let mut samples = alternate(&mut subjects, plan).await;
    report(&subjects, &mut samples, &reference);
    // The batch, stateless and legacy subjects' calls, each audited in the session.
    McpFigures {
        toold_calls: 3 * (1 + warm_up + rounds * round),
    }
}

/// Each subject's answer checked, a warm-up of each, then `rounds` rounds of `round` calls
/// to each in turn; each subject's samples.
async fn alternate(subjects: &mut [Subject], plan: (usize, usize, usize)) -> Vec<Vec<Duration>> {
    let (warm_up, rounds, round) = plan;
    for subject in subjects.iter_mut() {
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
    samples
}

/// The bridge (issue 18): toold's HTTP batch calling `mcp__fs__read_text_file` in `session`
/// (the daemon mounts `reference`'s server-filesystem as `fs`) beside the same batch calling
/// the built-in `read_file` (toold's own path without the bridge) and a direct stdio client
/// of another server-filesystem process, in alternating rounds; the calls made through toold
/// (each audited).
pub async fn measure_bridge(
    (address, daemon_pid): (SocketAddr, u32),
    session: &str,
    reference: &Reference,
    projects: &Path,
    file: &str,
    plan: (usize, usize, usize),
) -> usize {
    let mut subjects = [
        Subject::bridged(address, session, &projects.join(file)).await,
        Subject::batch(address, session, file).await,
        Subject::reference(reference, projects, file),
    ];
    let (warm_up, rounds, round) = plan;
    println!(
        "mcp bridge read_text_file 4 KiB: one connection each, sequential calls, alternating \
         rounds of {round} calls ({rounds} rounds), server-filesystem {} on node {}",
        reference.version,
        reference.node_version()
    );
    println!("  unpinned:");
    print_bridge(alternate(&mut subjects, plan).await);
    // Placement fixed (see `traces.rs` for why on this 2-vCPU machine): the servers are the
    // daemon, its server-filesystem child and the directly called server-filesystem.
    let mut servers = super::placement::descendants(daemon_pid);
    servers.push(daemon_pid);
    if let Subject::Reference(direct) = &subjects[2] {
        servers.push(direct.child.id());
    }
    let pinned = super::placement::in_fixed_placements(&servers, async || {
        alternate(&mut subjects, (0, rounds, round)).await
    })
    .await;
    let runs = 1 + pinned.len();
    for (label, samples) in pinned {
        println!("  {label}:");
        print_bridge(samples);
    }
    // The bridged and the built-in batches, each audited in the session (each run checks
    // both answers once).
    2 * (warm_up + runs * (1 + rounds * round))
}

/// The three subjects' p50s and what the bridge adds.
fn print_bridge(mut samples: Vec<Vec<Duration>>) {
    let mut p50s = Vec::new();
    for (label, samples) in [
        "toold HTTP batch → mcp__fs__read_text_file (bridge, stdio)",
        "toold HTTP batch → read_file (built-in, no bridge)",
        "server-filesystem read_text_file, direct stdio",
    ]
    .iter()
    .zip(&mut samples)
    {
        samples.sort();
        let (p50, p99) = (
            samples[samples.len() / 2],
            samples[samples.len() * 99 / 100],
        );
        p50s.push(p50);
        println!(
            "    {label:<58} p50 {:>7.1} µs, p99 {:>7.1} µs",
            p50.as_secs_f64() * 1e6,
            p99.as_secs_f64() * 1e6
        );
    }
    let [bridged, built_in, direct] = [0, 1, 2].map(|i| p50s[i].as_secs_f64() * 1e6);
    let added = bridged - direct;
    println!(
        "    bridge adds p50 {added:.1} µs over direct stdio  (budget ≤ {} µs: {}); beyond the \
         built-in batch and the direct call together: {:.1} µs",
        BRIDGE_BUDGET.as_micros(),
        if added <= BRIDGE_BUDGET.as_secs_f64() * 1e6 {
            "met"
        } else {
            "NOT met"
        },
        bridged - built_in - direct
    );
}

fn report(subjects: &[Subject], samples: &mut [Vec<Duration>], reference: &Reference) {
    let node_version = reference.node_version();
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
                "server-filesystem {} read_text_file, stdio, node {node_version}",
                reference.version
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
    /// The batch calling server-filesystem's `read_text_file` through the bridge.
    Bridged(Connection, PreparedRequest),
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
        let (connection, request) =
            one_call(address, session, "read_file", json!({"file_path": file})).await;
        Subject::Batch(connection, request)
    }

    async fn bridged(address: SocketAddr, session: &str, path: &Path) -> Subject {
        let input = json!({"path": path});
        let (connection, request) =
            one_call(address, session, "mcp__fs__read_text_file", input).await;
        Subject::Bridged(connection, request)
    }

    async fn stateless(address: SocketAddr, session: &str, file: &str) -> Subject {
        Subject::Stateless(HttpMcp::open(address, session, file).await)
    }

    async fn legacy(address: SocketAddr, session: &str, file: &str) -> Subject {
        let mut mcp = HttpMcp::open(address, session, file).await;
        mcp.initialize().await;
        Subject::Legacy(mcp)
    }

    fn reference(reference: &Reference, projects: &Path, file: &str) -> Subject {
        Subject::Reference(StdioServer::start(
            &reference.node,
            &reference.filesystem,
            projects,
            file,
        ))
    }

    fn label(&self) -> &'static str {
        match self {
            Subject::Batch(..) => "toold HTTP batch (POST /v1/sessions/{id}/batches)",
            Subject::Bridged(..) => "toold HTTP batch, mcp__fs__read_text_file",
            Subject::Stateless(_) => "toold MCP 2026-07-28 stateless (JSON answer)",
            Subject::Legacy(_) => "toold MCP 2025-11-25 session (SSE answer)",
            Subject::Reference(_) => "server-filesystem",
        }
    }

    /// One call; panics on anything but a 200 (HTTP) or the request's answer (stdio).
    async fn call(&mut self) -> Vec<u8> {
        match self {
            Subject::Batch(connection, request) | Subject::Bridged(connection, request) => {
                ok(connection.send(request).await.expect("a batch")).body
            }
            Subject::Stateless(mcp) | Subject::Legacy(mcp) => mcp.call().await,
            Subject::Reference(server) => server.call(),
        }
    }

    /// The first answer holds the file's text (numbered by toold's read_file, as it is by
    /// server-filesystem, directly or through the bridge).
    async fn check_answer(&mut self) {
        let label = self.label();
        let body = self.call().await;
        let text = String::from_utf8_lossy(&body);
        let expected = if matches!(self, Subject::Reference(_) | Subject::Bridged(..)) {
            "63 abcdefghijklmnopqrstuvwxyz"
        } else {
            "64\\t63 abcdef"
        };
        let failed = text.contains("\"isError\":true") || text.contains("\"is_error\":true");
        assert!(
            text.contains(expected) && !failed,
            "{label}: the answer does not hold the file: {text}"
        );
    }
}

/// A connection to toold and a prepared batch of one call of `name`.
async fn one_call(
    address: SocketAddr,
    session: &str,
    name: &str,
    input: Value,
) -> (Connection, PreparedRequest) {
    let body = json!({"calls": [{"id": "c0", "name": name, "input": input}]});
    (
        Connection::open(address).await.expect("connects to toold"),
        PreparedRequest::post_json(address, &format!("/v1/sessions/{session}/batches"), &body),
    )
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

/// Node 22 and the MCP reference servers as `.ci/run` installs them (`.ci/node22.sh`, then
/// `.ci/mcp_servers.sh`: one pinned version, one install), under the bench's target directory.
pub struct Reference {
    pub node: PathBuf,
    /// server-filesystem's entry point (`dist/index.js`).
    pub filesystem: PathBuf,
    /// server-filesystem's version, from its package.json.
    pub version: String,
}

impl Reference {
    /// Installs what is missing with the CI scripts (once; reused while at their versions).
    pub fn install() -> Reference {
        // The bench's binary lives in `<target>/release/`.
        let target = Path::new(env!("CARGO_BIN_EXE_toold"))
            .parent()
            .and_then(Path::parent)
            .expect("the toold binary is under a target directory");
        let script = r#"
            source .ci/node22.sh >&2
            source .ci/mcp_servers.sh >&2
            printf '%s\n%s\n' "$TOOLD_TEST_NODE" "$TOOLD_TEST_MCP_SERVERS"
        "#;
        let output = Command::new("bash")
            .args(["-euo", "pipefail", "-c", script])
            .current_dir(env!("CARGO_MANIFEST_DIR"))
            .env("CARGO_TARGET_DIR", target)
            .stderr(Stdio::inherit())
            .output()
            .expect("bash runs");
        assert!(
            output.status.success(),
            "installing Node 22 and the MCP reference servers failed (see above)"
        );
        let stdout = String::from_utf8_lossy(&output.stdout);
        let mut lines = stdout.lines();
        let (Some(node), Some(prefix)) = (lines.next(), lines.next()) else {
            panic!("the install script did not name node and the servers: {stdout}");
        };
        let package =
            Path::new(prefix).join("node_modules/@modelcontextprotocol/server-filesystem");
        let filesystem = package.join("dist/index.js");
        assert!(filesystem.is_file(), "no {}", filesystem.display());
        let manifest: Value = serde_json::from_slice(
            &std::fs::read(package.join("package.json")).expect("server-filesystem's package.json"),
        )
        .expect("package.json is JSON");
        Reference {
            node: PathBuf::from(node),
            filesystem,
            version: manifest["version"].as_str().unwrap_or("?").to_owned(),
        }
    }

    fn node_version(&self) -> String {
        Command::new(&self.node)
            .arg("--version")
            .output()
            .map(|out| String::from_utf8_lossy(&out.stdout).trim().to_owned())
            .unwrap_or_default()
    }
}
