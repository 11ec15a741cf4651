//! Several `toold mcp` processes on one data directory (two editor windows on one project):
//! the real binary over stdio, every call pipelined so both processes write at once. Every
//! answered call's audit row and events are stored, seqs and cursors are unique, and no
//! journal is left behind; both may start at the same moment on a new directory (the
//! migrations are serialised); a process killed with `kill -9` leaves its journal, which the
//! next process to open the directory replays.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, ChildStdin, Command, Stdio};
use std::sync::mpsc::{Receiver, RecvTimeoutError, channel};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::LEGACY;

/// The most any one wait in these tests may take.
const WAIT: Duration = Duration::from_secs(120);

/// A `toold mcp` child over `dir/data` with `dir/ws` as its workspace.
struct Mcp {
    child: Child,
    stdin: Option<ChildStdin>,
    lines: Receiver<String>,
}

impl Mcp {
    fn start(dir: &Path) -> Mcp {
        let mut command = Command::new(env!("CARGO_BIN_EXE_toold"));
        command
            .arg("mcp")
            .arg("--data-dir")
            .arg(dir.join("data"))
            .arg("--working-directory")
            .arg(dir.join("ws"));
        crate::support::daemon::without_settings(&mut command);
        let mut child = command
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
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
        Mcp {
            stdin: child.stdin.take(),
            child,
            lines,
        }
    }

    fn send(&mut self, message: &Value) {
        let stdin = self.stdin.as_mut().expect("stdin open");
        writeln!(stdin, "{message}").unwrap();
        stdin.flush().unwrap();
    }

    /// The next `count` answers (in any order), all before `deadline`.
    fn answers(&mut self, count: usize, deadline: Instant) -> Vec<Value> {
        let mut answers = Vec::new();
        while answers.len() < count {
            let left = deadline.saturating_duration_since(Instant::now());
            let line = match self.lines.recv_timeout(left) {
                Ok(line) => line,
                Err(RecvTimeoutError::Timeout) => {
                    panic!("{} of {count} answers before the deadline", answers.len())
                }
                Err(RecvTimeoutError::Disconnected) => panic!("stdout closed"),
            };
            let message: Value = serde_json::from_str(&line).unwrap();
            if message.get("id").is_some() {
                answers.push(message);
            }
        }
        answers
    }

    fn initialize(&mut self) {
        self.send(&json!({"jsonrpc": "2.0", "id": 0, "method": "initialize",
            "params": {"protocolVersion": LEGACY, "capabilities": {},
                       "clientInfo": {"name": "toold-tests", "version": "1"}}}));
        let init = self.answers(1, Instant::now() + WAIT).remove(0);
        assert!(init["result"]["protocolVersion"].is_string(), "{init}");
        self.send(&json!({"jsonrpc": "2.0", "method": "notifications/initialized"}));
    }

    /// Sends `count` `read_file` calls at once (ids 1..=count), without waiting in between.
    fn send_calls(&mut self, count: u64) {
        for id in 1..=count {
            self.send(&json!({"jsonrpc": "2.0", "id": id, "method": "tools/call",
                "params": {"name": "read_file", "arguments": {"file_path": "note.txt"}}}));
        }
    }

    /// Closes stdin and waits for a clean exit.
    fn end(mut self) {
        drop(self.stdin.take());
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                assert!(status.success(), "toold mcp exited with {status}");
                return;
            }
            assert!(
                Instant::now() < deadline,
                "toold mcp did not exit after EOF"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn kill_9(mut self) {
        self.child.kill().unwrap();
        self.child.wait().unwrap();
    }
}

impl Drop for Mcp {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

fn project(dir: &Path) {
    std::fs::create_dir_all(dir.join("ws")).unwrap();
    std::fs::write(dir.join("ws").join("note.txt"), "shared\n").unwrap();
}

fn database(dir: &Path) -> rusqlite::Connection {
    rusqlite::Connection::open(dir.join("data").join("toold.db")).unwrap()
}

fn number(db: &rusqlite::Connection, sql: &str) -> i64 {
    db.query_row(sql, [], |row| row.get(0)).unwrap()
}

/// The audit journal segments in the data directory.
fn journals(dir: &Path) -> Vec<PathBuf> {
    std::fs::read_dir(dir.join("data"))
        .unwrap()
        .filter_map(Result::ok)
        .filter(|entry| {
            entry
                .file_name()
                .to_str()
                .is_some_and(|name| name.starts_with("toold.db.audit."))
        })
        .map(|entry| entry.path())
        .collect()
}

/// Two processes started at the same moment on `dir` (new or not), `calls` calls each sent
/// at once; every call answered without an error.
fn two_at_once(dir: &Path, calls: u64) {
    let (mut a, mut b) = (Mcp::start(dir), Mcp::start(dir));
    // Each process is driven from its own thread, so both write at once.
    std::thread::scope(|scope| {
        for mcp in [&mut a, &mut b] {
            scope.spawn(move || {
                mcp.initialize();
                mcp.send_calls(calls);
                let answers = mcp.answers(calls as usize, Instant::now() + WAIT);
                for answer in &answers {
                    assert_eq!(answer["result"]["isError"], false, "{answer}");
                }
            });
        }
    });
    a.end();
    b.end();
}

#[test]
fn two_processes_on_one_new_directory_store_every_call_and_event() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    two_at_once(dir.path(), 200);

    let db = database(dir.path());
    // Two sessions, 200 rows each, cursors unique (the primary key) and without gaps.
    let per_session: Vec<(String, i64)> = db
        .prepare("SELECT session_id, count(*) FROM calls GROUP BY session_id ORDER BY 1")
        .unwrap()
        .query_map([], |row| Ok((row.get(0)?, row.get(1)?)))
        .unwrap()
        .collect::<Result<_, _>>()
        .unwrap();
    assert_eq!(per_session.len(), 2, "{per_session:?}");
    assert!(
        per_session.iter().all(|(_, rows)| *rows == 200),
        "{per_session:?}"
    );
    assert_eq!(number(&db, "SELECT count(*) FROM calls"), 400);
    assert_eq!(number(&db, "SELECT max(cursor) FROM calls"), 400);
    // Every call's events: each call was queued and finished in its own session's events.
    for (session, _) in &per_session {
        for event in ["tool:queued", "tool:post"] {
            let calls: i64 = db
                .query_row(
                    "SELECT count(DISTINCT call_id) FROM events WHERE session_id = ?1 AND type = ?2",
                    [session, event],
                    |row| row.get(0),
                )
                .unwrap();
            assert_eq!(calls, 200, "{session} {event}");
        }
    }
    // Seqs are unique (the primary key) and given without gaps: neither process's events
    // took the other's numbers.
    assert_eq!(
        number(&db, "SELECT count(*) FROM events"),
        number(&db, "SELECT max(seq) FROM events")
    );
    assert_eq!(journals(dir.path()), Vec::<PathBuf>::new());
}

#[test]
fn processes_starting_at_the_same_moment_on_new_directories_all_start() {
    for _ in 0..4 {
        let dir = tempfile::tempdir().unwrap();
        project(dir.path());
        two_at_once(dir.path(), 5);
        assert_eq!(
            number(&database(dir.path()), "SELECT count(*) FROM calls"),
            10
        );
        assert_eq!(journals(dir.path()), Vec::<PathBuf>::new());
    }
}

#[test]
fn the_journal_of_a_process_killed_with_kill_9_is_replayed_by_the_next() {
    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    let mut killed = Mcp::start(dir.path());
    killed.initialize();
    killed.send_calls(200);
    // Killed mid-run: half the calls answered, the rest in flight.
    let answered = killed.answers(100, Instant::now() + WAIT).len() as i64;
    killed.kill_9();
    let left = journals(dir.path());
    assert_eq!(
        left.len(),
        1,
        "the killed process's journal is left: {left:?}"
    );

    // The next process on the directory replays it as it opens the store.
    let mut next = Mcp::start(dir.path());
    next.initialize();
    let db = database(dir.path());
    let killed_session: String = db
        .query_row(
            "SELECT id FROM sessions ORDER BY ordinal LIMIT 1",
            [],
            |row| row.get(0),
        )
        .unwrap();
    let rows: i64 = db
        .query_row(
            "SELECT count(*) FROM calls WHERE session_id = ?1",
            [&killed_session],
            |row| row.get(0),
        )
        .unwrap();
    assert!(
        rows >= answered,
        "{rows} rows for {answered} answered calls"
    );
    assert!(rows <= 200, "{rows}");
    let now = journals(dir.path());
    assert!(
        !now.contains(&left[0]),
        "the dead journal was replayed and deleted: {now:?}"
    );
    next.send_calls(3);
    next.answers(3, Instant::now() + WAIT);
    next.end();
    assert_eq!(journals(dir.path()), Vec::<PathBuf>::new());
    assert_eq!(
        number(&db, "SELECT count(*) FROM calls"),
        rows + 3,
        "the next process's own rows follow"
    );
}

/// `command` spawned with its stderr piped, which must exit unsuccessfully before the
/// deadline; its stderr.
fn refused(mut command: Command) -> String {
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .expect("toold starts");
    let deadline = Instant::now() + WAIT;
    let status = loop {
        if let Some(status) = child.try_wait().unwrap() {
            break status;
        }
        if Instant::now() > deadline {
            let _ = child.kill();
            panic!("toold was not refused: still running at the deadline");
        }
        std::thread::sleep(Duration::from_millis(20));
    };
    let mut stderr = String::new();
    std::io::Read::read_to_string(&mut child.stderr.take().unwrap(), &mut stderr).unwrap();
    assert!(!status.success(), "{stderr}");
    stderr
}

/// A `toold serve` needs its data directory to itself (it restores its node's sessions and
/// numbers its events in its own bus): started beside a running `toold mcp` it is refused,
/// naming the holder, and the `toold mcp` goes on untouched; a `toold mcp` beside a daemon,
/// and a second daemon, are refused naming the daemon's pid.
#[test]
fn a_daemon_needs_its_directory_to_itself_and_says_who_holds_it() {
    use crate::support::daemon::{DaemonProcess, command};

    let dir = tempfile::tempdir().unwrap();
    project(dir.path());
    std::fs::create_dir_all(dir.path().join("projects")).unwrap();
    let mut mcp = Mcp::start(dir.path());
    mcp.initialize();
    mcp.send(&json!({"jsonrpc": "2.0", "id": 1, "method": "tools/call",
        "params": {"name": "bash", "arguments": {"command": "sleep 2"}}}));
    std::thread::sleep(Duration::from_millis(300));
    let stderr = refused(command(dir.path(), &[]));
    assert!(
        stderr.contains("is in use by toold mcp processes"),
        "{stderr}"
    );
    // The call that ran meanwhile finishes as it would have alone.
    let answer = mcp.answers(1, Instant::now() + WAIT).remove(0);
    assert_eq!(answer["result"]["isError"], false, "{answer}");
    mcp.send_calls(5);
    for answer in mcp.answers(5, Instant::now() + WAIT) {
        assert_eq!(answer["result"]["isError"], false, "{answer}");
    }
    mcp.end();
    let db = database(dir.path());
    assert_eq!(
        number(&db, "SELECT count(*) FROM calls WHERE interrupted = 1"),
        0
    );
    assert_eq!(number(&db, "SELECT count(*) FROM calls"), 6);
    drop(db);

    // With the MCP process gone the daemon starts; then it holds the directory.
    let daemon = DaemonProcess::start(dir.path(), &[]);
    let holder = format!("is in use by a toold serve, pid {}", daemon.pid());
    let stderr = refused(command(dir.path(), &[]));
    assert!(stderr.contains(&holder), "{stderr}");
    let mut mcp = Command::new(env!("CARGO_BIN_EXE_toold"));
    mcp.arg("mcp")
        .arg("--data-dir")
        .arg(dir.path().join("data"))
        .arg("--working-directory")
        .arg(dir.path().join("ws"));
    crate::support::daemon::without_settings(&mut mcp);
    let stderr = refused(mcp);
    assert!(stderr.contains(&holder), "{stderr}");
}
