//! `toold mcp` over stdio, the real binary: newline-delimited JSON-RPC on its stdin and
//! stdout, one session created at start (from the flags) and closed when stdin ends, every
//! call through the one pipeline (the audit rows in the SQLite store show it), bad input
//! answered without ending the connection, progress notifications before a result
//! when the call asks for them, and nothing on stdout but the protocol.

use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, ExitStatus, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::{LEGACY, tool_names};
use crate::support::deadline::{OutputWithin, STEP};

const WAIT: Duration = Duration::from_secs(30);

/// A `toold mcp` child: its stdin, its stdout's lines as they come, its stderr when it ends.
struct StdioMcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
    /// Every stdout line, for the check that only protocol went there.
    seen: Vec<String>,
    stderr: Option<std::thread::JoinHandle<String>>,
    next_id: u64,
}

impl StdioMcp {
    /// `toold mcp` over `dir/data`, with `dir/ws` as the session's working directory.
    fn start(dir: &Path, mode: &str) -> StdioMcp {
        std::fs::create_dir_all(workspace(dir)).unwrap();
        let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
        command
            .arg("mcp")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--working-directory")
            .arg(workspace(dir))
            .args(["--permission-mode", mode])
            .args(crate::support::daemon::sandbox_flag());
        StdioMcp::spawn(command)
    }

    /// `command` (a `toold mcp`, whatever its flags) started with its stdio piped.
    fn spawn(mut command: Command) -> StdioMcp {
        // None of the caller's settings reach it; the logs are at the default level, info,
        // so the test sees that they stay off stdout.
        crate::support::daemon::without_settings(&mut command);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .expect("toold mcp starts");
        let stdout = child.stdout.take().unwrap();
        let (send, lines) = channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines() {
                let Ok(line) = line else { break };
                if send.send(line).is_err() {
                    break;
                }
            }
        });
        let mut stderr = child.stderr.take().unwrap();
        let stderr = std::thread::spawn(move || {
            let mut text = String::new();
            let _ = stderr.read_to_string(&mut text);
            text
        });
        StdioMcp {
            stdin: child.stdin.take(),
            child,
            lines,
            seen: Vec::new(),
            stderr: Some(stderr),
            next_id: 1,
        }
    }

    fn send_line(&mut self, line: &str) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        stdin.write_all(line.as_bytes()).unwrap();
        stdin.write_all(b"\n").unwrap();
        stdin.flush().unwrap();
    }

    /// The next line on stdout, parsed; panics after [`WAIT`].
    fn next_message(&mut self) -> Value {
        let line = match self.lines.recv_timeout(WAIT) {
            Ok(line) => line,
            Err(RecvTimeoutError::Timeout) => panic!("no answer within {WAIT:?}"),
            Err(RecvTimeoutError::Disconnected) => panic!("stdout closed"),
        };
        self.seen.push(line.clone());
        serde_json::from_str(&line)
            .unwrap_or_else(|err| panic!("not JSON on stdout: {line:?}: {err}"))
    }

    /// Sends a request and returns its answer (the first message with its id).
    fn request(&mut self, method: &str, params: Value) -> Value {
        self.request_with_notifications(method, params).1
    }

    /// Sends a request and returns the notifications that came before its answer, and the
    /// answer.
    fn request_with_notifications(&mut self, method: &str, params: Value) -> (Vec<Value>, Value) {
        let id = self.next_id;
        self.next_id += 1;
        let request = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        self.send_line(&request.to_string());
        let mut notifications = Vec::new();
        loop {
            let message = self.next_message();
            if message["id"] == id {
                return (notifications, message);
            }
            if message.get("id").is_none() {
                notifications.push(message);
            }
        }
    }

    fn notify(&mut self, method: &str) {
        self.send_line(&json!({"jsonrpc": "2.0", "method": method}).to_string());
    }

    fn initialize(&mut self) -> Value {
        let init = self.request(
            "initialize",
            json!({"protocolVersion": LEGACY, "capabilities": {},
                   "clientInfo": {"name": "toold-tests", "version": "1"}}),
        );
        self.notify("notifications/initialized");
        init
    }

    fn call_tool(&mut self, name: &str, arguments: Value) -> Value {
        self.request("tools/call", json!({"name": name, "arguments": arguments}))
    }

    /// Closes stdin and waits for the exit; the stdout lines left and stderr come back too.
    fn end(mut self) -> (ExitStatus, Vec<String>, String) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        let status = loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                break status;
            }
            assert!(
                Instant::now() < deadline,
                "toold mcp did not exit after EOF"
            );
            std::thread::sleep(Duration::from_millis(20));
        };
        let mut seen = std::mem::take(&mut self.seen);
        seen.extend(self.lines.try_iter());
        let stderr = self.stderr.take().unwrap().join().unwrap();
        (status, seen, stderr)
    }
}

impl Drop for StdioMcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn workspace(dir: &Path) -> PathBuf {
    dir.join("ws")
}

/// What the store holds after a run.
struct Stored {
    /// (id, closed), in creation order.
    sessions: Vec<(String, bool)>,
    /// (session id, requested tool name), in audit order.
    calls: Vec<(String, String)>,
}

fn stored(dir: &Path) -> Stored {
    let db = rusqlite::Connection::open(dir.join("data").join("toold.db")).unwrap();
    let mut sessions = db
        .prepare("SELECT id, closed_at IS NOT NULL FROM sessions ORDER BY ordinal")
        .unwrap();
    let sessions = sessions
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    let mut calls = db
        .prepare("SELECT session_id, requested_name FROM calls ORDER BY cursor")
        .unwrap();
    let calls = calls
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<Vec<_>, _>>()
        .unwrap();
    Stored { sessions, calls }
}

/// Every stdout line is one JSON-RPC 2.0 message.
fn assert_only_protocol(lines: &[String]) {
    assert!(!lines.is_empty());
    for line in lines {
        let message: Value = serde_json::from_str(line)
            .unwrap_or_else(|err| panic!("not JSON on stdout: {line:?}: {err}"));
        assert_eq!(message["jsonrpc"], "2.0", "{line}");
    }
}

#[test]
fn one_session_over_stdio_from_initialize_to_eof() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioMcp::start(dir.path(), "workspace_write");
    let init = mcp.initialize();
    assert_eq!(init["result"]["protocolVersion"], LEGACY, "{init}");
    assert_eq!(init["result"]["serverInfo"]["name"], "toold", "{init}");
    assert!(
        init["result"]["capabilities"]["tools"].is_object(),
        "{init}"
    );

    let listed = mcp.request("tools/list", json!({}));
    let names = tool_names(&listed["result"]);
    for name in ["read_file", "write_file", "bash"] {
        assert!(names.contains(&name.to_owned()), "{name}: {names:?}");
    }

    let wrote = mcp.call_tool(
        "write_file",
        json!({"file_path": "note.txt", "content": "hello over stdio\n"}),
    );
    assert_eq!(wrote["result"]["isError"], false, "{wrote}");
    // The session runs in the working directory the flag named.
    let on_disk = std::fs::read_to_string(workspace(dir.path()).join("note.txt")).unwrap();
    assert_eq!(on_disk, "hello over stdio\n");
    let read = mcp.call_tool("read_file", json!({"file_path": "note.txt"}));
    assert_eq!(read["result"]["isError"], false, "{read}");
    let text = read["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("hello over stdio"), "{read}");

    // An unknown tool is a JSON-RPC error, not a result.
    let unknown = mcp.call_tool("reed_file", json!({}));
    assert_eq!(unknown["error"]["code"], -32602, "{unknown}");
    assert!(unknown.get("result").is_none(), "{unknown}");
    // An unknown method too.
    let method = mcp.request("tools/frobnicate", json!({}));
    assert_eq!(method["error"]["code"], -32601, "{method}");

    // Params that do not fit the method are Invalid params.
    let nameless = mcp.request("tools/call", json!({"arguments": {}}));
    assert_eq!(nameless["error"]["code"], -32602, "{nameless}");
    let not_object = mcp.call_tool("read_file", json!(5));
    assert_eq!(not_object["error"]["code"], -32602, "{not_object}");

    // A line that is not one JSON-RPC message is answered (id null), and the connection goes
    // on: not JSON is a parse error, a batch, JSON that is not a JSON-RPC message and a line
    // with a BOM that is not JSON-RPC Invalid Request.
    let batch = r#"[{"jsonrpc":"2.0","id":90,"method":"ping"}]"#;
    let bad_lines = [
        ("{this is not json", -32700, "parse error"),
        (batch, -32600, "batch"),
        ("42", -32600, "not a number"),
        (r#"{"hello": "world"}"#, -32600, "\"jsonrpc\""),
        ("\u{feff}[]", -32600, "batch"),
    ];
    for (line, code, says) in bad_lines {
        mcp.send_line(line);
        let refused = mcp.next_message();
        assert_eq!(refused["error"]["code"], code, "{line}: {refused}");
        assert!(
            refused["error"]["message"].as_str().unwrap().contains(says),
            "{line}: {refused}"
        );
        assert_eq!(refused.get("id"), Some(&Value::Null), "{line}: {refused}");
    }
    // A blank line is no message and gets no answer: the next answer is the ping's.
    mcp.send_line("   ");
    let ping = mcp.request("ping", json!({}));
    assert_eq!(ping["result"], json!({}), "{ping}");
    let again = mcp.request("tools/list", json!({}));
    assert_eq!(tool_names(&again["result"]), names);

    let (status, lines, stderr) = mcp.end();
    assert!(status.success(), "{status}: {stderr}");
    assert_only_protocol(&lines);
    // The logs went to stderr.
    assert!(stderr.contains("serving one session on stdio"), "{stderr}");

    // The one session was closed at EOF, and its calls are in the audit log.
    let Stored { sessions, calls } = stored(dir.path());
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    let (session, closed) = &sessions[0];
    assert!(closed, "{sessions:?}");
    let tools: Vec<&str> = calls
        .iter()
        .filter(|(id, _)| id == session)
        .map(|(_, name)| name.as_str())
        .collect();
    assert!(tools.starts_with(&["write_file", "read_file"]), "{calls:?}");
}

#[test]
fn a_call_with_a_progress_token_gets_its_progress_over_stdio() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioMcp::start(dir.path(), "workspace_write");
    mcp.initialize();
    let arguments = json!({"command": "sleep 0.2; echo done"});
    let (notifications, answer) = mcp.request_with_notifications(
        "tools/call",
        json!({"name": "bash", "arguments": arguments, "_meta": {"progressToken": "stdio-1"}}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    let progress: Vec<&Value> = notifications
        .iter()
        .filter(|n| n["method"] == "notifications/progress")
        .collect();
    assert!(!progress.is_empty(), "{notifications:?}");
    assert_eq!(progress[0]["params"]["progressToken"], "stdio-1");
    assert_eq!(progress[0]["params"]["progress"].as_f64(), Some(1.0));

    let (notifications, answer) = mcp.request_with_notifications(
        "tools/call",
        json!({"name": "bash", "arguments": arguments}),
    );
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    assert!(notifications.is_empty(), "{notifications:?}");
    let (status, lines, stderr) = mcp.end();
    assert!(status.success(), "{status}: {stderr}");
    assert_only_protocol(&lines);
}

#[test]
fn a_read_only_session_refuses_a_write() {
    let dir = tempfile::tempdir().unwrap();
    let mut mcp = StdioMcp::start(dir.path(), "read_only");
    mcp.initialize();
    let denied = mcp.call_tool(
        "write_file",
        json!({"file_path": "note.txt", "content": "no\n"}),
    );
    assert_eq!(denied["result"]["isError"], true, "{denied}");
    assert_eq!(
        denied["result"]["_meta"]["dev.toold/errorKind"], "permission_denied",
        "{denied}"
    );
    assert!(!workspace(dir.path()).join("note.txt").exists());
    let (status, lines, stderr) = mcp.end();
    assert!(status.success(), "{status}: {stderr}");
    assert_only_protocol(&lines);
    let Stored { sessions, calls } = stored(dir.path());
    assert_eq!(sessions.len(), 1, "{sessions:?}");
    assert!(sessions[0].1, "{sessions:?}");
    assert_eq!(calls.len(), 1, "{calls:?}");
    assert_eq!(calls[0].1, "write_file");
}

#[test]
fn a_bad_permission_mode_is_refused_before_anything_starts() {
    let dir = tempfile::tempdir().unwrap();
    let output = Command::new(env!("CARGO_BIN_EXE_toold"))
        .arg("mcp")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .args(["--permission-mode", "sideways"])
        .stdin(Stdio::null())
        .output_within(STEP, "toold mcp")
        .unwrap();
    assert!(!output.status.success());
    assert!(output.stdout.is_empty());
    let stderr = String::from_utf8_lossy(&output.stderr);
    assert!(
        stderr.contains("unknown permission mode \"sideways\""),
        "{stderr}"
    );
    assert!(!dir.path().join("data").exists());
}

#[test]
fn toold_mcp_serves_the_directory_it_was_started_in_and_keeps_its_data_outside_it() {
    let dir = tempfile::tempdir().unwrap();
    let root = dir.path().join("code");
    let project = root.join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("README.txt"), "the project's readme\n").unwrap();
    std::fs::write(project.join("src/main.txt"), "fn main\n").unwrap();
    let state = dir.path().join("state");
    // No flag names a directory: the client starts it in the project, as `claude mcp add
    // toold -- toold mcp` does.
    let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
    command
        .arg("mcp")
        .arg("--allowed-root")
        .arg(&root)
        .current_dir(&project)
        .env("XDG_STATE_HOME", &state);
    let mut mcp = StdioMcp::spawn(command);
    mcp.initialize();

    let found = mcp.request(
        "tools/call",
        json!({"name": "glob_search", "arguments": {"pattern": "**/*.txt"}}),
    );
    let listing = found["result"]["content"][0]["text"].as_str().unwrap();
    assert_eq!(found["result"]["isError"], false, "{found}");
    assert!(listing.contains("README.txt"), "{listing}");
    assert!(listing.contains("main.txt"), "{listing}");
    let read = mcp.request(
        "tools/call",
        json!({"name": "read_file", "arguments": {"file_path": "README.txt"}}),
    );
    assert_eq!(read["result"]["isError"], false, "{read}");
    let text = read["result"]["content"][0]["text"].as_str().unwrap();
    assert!(text.contains("the project's readme"), "{text}");
    // A relative path is the project's too, for a shell.
    let wrote = mcp.request(
        "tools/call",
        json!({"name": "bash", "arguments": {"command": "pwd && echo made > made.txt"}}),
    );
    let pwd = wrote["result"]["content"][0]["text"].as_str().unwrap();
    let canonical = project.canonicalize().unwrap();
    assert!(pwd.contains(canonical.to_str().unwrap()), "{pwd}");
    assert_eq!(
        std::fs::read_to_string(project.join("made.txt")).unwrap(),
        "made\n"
    );

    let (status, _seen, stderr) = mcp.end();
    assert!(status.success(), "{status}: {stderr}");
    // The data went to $XDG_STATE_HOME/toold, nothing of it into the project.
    assert!(state.join("toold/toold.db").is_file());
    let mut entries: Vec<String> = std::fs::read_dir(&project)
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    entries.sort();
    assert_eq!(entries, ["README.txt", "made.txt", "src"]);
}
