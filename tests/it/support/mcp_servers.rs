//! The real MCP servers the bridge tests mount (issue 18), installed by `.ci/run`
//! (`.ci/mcp_servers.sh`): where node and the npm packages are (`TOOLD_TEST_NODE`,
//! `TOOLD_TEST_MCP_SERVERS`), `[[mcp_servers]]` entries written as TOML, server-everything
//! started over Streamable HTTP on a free loopback port, and `/proc` read to show which
//! processes are alive (a daemon's descendants, a process group's members).
//!
//! Without the variables the tests are skipped locally (as the Postgres tests are) and fail in
//! CI (`CI=true`), where `.ci/run` must have set them.

use std::fmt::Write as _;
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;

/// Node and the two reference servers' entry points.
pub struct McpServers {
    pub node: PathBuf,
    prefix: PathBuf,
}

/// Both servers' npm package names, under `@modelcontextprotocol/`.
const FILESYSTEM: &str = "server-filesystem";
const EVERYTHING: &str = "server-everything";

impl McpServers {
    /// The servers `.ci/run` installed. In CI a missing variable fails the test; elsewhere the
    /// test is skipped with a note naming `what` it would have checked.
    pub fn locate(what: &str) -> Option<McpServers> {
        let var = |name: &str| std::env::var_os(name).filter(|value| !value.is_empty());
        let (Some(prefix), Some(node)) = (var("TOOLD_TEST_MCP_SERVERS"), var("TOOLD_TEST_NODE"))
        else {
            super::skip_unless_ci(&format!(
                "TOOLD_TEST_MCP_SERVERS or TOOLD_TEST_NODE is not set (.ci/run installs the \
                 MCP reference servers; {what})"
            ));
            return None;
        };
        let servers = McpServers {
            node: PathBuf::from(node),
            prefix: PathBuf::from(prefix),
        };
        for package in [FILESYSTEM, EVERYTHING] {
            let entry = servers.entry(package);
            assert!(
                entry.is_file(),
                "no {} (TOOLD_TEST_MCP_SERVERS is set but {package} is not installed there; run .ci/run)",
                entry.display()
            );
        }
        assert!(
            servers.node.is_file(),
            "TOOLD_TEST_NODE {} is not a file",
            servers.node.display()
        );
        Some(servers)
    }

    fn entry(&self, package: &str) -> PathBuf {
        self.prefix
            .join("node_modules/@modelcontextprotocol")
            .join(package)
            .join("dist/index.js")
    }

    /// server-filesystem over stdio, serving `directory` (relative to its cwd, which is the
    /// session's workspace unless `cwd` is set).
    pub fn filesystem(&self, name: &str, directory: &str) -> ServerEntry {
        ServerEntry::stdio(
            name,
            &self.node,
            &[&self.entry(FILESYSTEM), Path::new(directory)],
        )
    }

    /// server-everything over stdio.
    pub fn everything(&self, name: &str) -> ServerEntry {
        ServerEntry::stdio(
            name,
            &self.node,
            &[&self.entry(EVERYTHING), Path::new("stdio")],
        )
    }

    /// server-everything over Streamable HTTP on a free loopback port, up and listening.
    pub fn start_everything_http(&self) -> HttpServer {
        let port = free_port();
        let mut child = Command::new(&self.node)
            .arg(self.entry(EVERYTHING))
            .arg("streamableHttp")
            .env("PORT", port.to_string())
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()
            .expect("server-everything starts");
        let address = SocketAddr::from(([127, 0, 0, 1], port));
        let deadline = Instant::now() + Duration::from_secs(20);
        while TcpStream::connect(address).is_err() {
            if let Some(status) = child.try_wait().expect("server-everything's status") {
                panic!("server-everything (streamableHttp, port {port}) exited: {status}");
            }
            assert!(
                Instant::now() < deadline,
                "server-everything does not listen on {address} after 20 s"
            );
            std::thread::sleep(Duration::from_millis(50));
        }
        HttpServer {
            child,
            url: format!("http://{address}/mcp"),
        }
    }
}

/// A port free when asked (the listener is closed again before the server binds it).
fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").expect("a free port");
    listener.local_addr().expect("its address").port()
}

/// server-everything over Streamable HTTP, killed when dropped.
pub struct HttpServer {
    child: Child,
    /// `http://127.0.0.1:PORT/mcp`.
    pub url: String,
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// One `[[mcp_servers]]` entry: its keys in order, each a TOML value.
#[derive(Clone)]
pub struct ServerEntry {
    keys: Vec<(String, Value)>,
}

impl ServerEntry {
    /// A stdio server: `command` with `args`.
    pub fn stdio(name: &str, command: &Path, args: &[&Path]) -> ServerEntry {
        let args: Vec<Value> = args
            .iter()
            .map(|arg| Value::from(arg.display().to_string()))
            .collect();
        ServerEntry::named(name)
            .set("command", command.display().to_string())
            .set("args", args)
    }

    /// A Streamable HTTP server at `url`.
    pub fn http(name: &str, url: &str) -> ServerEntry {
        ServerEntry::named(name).set("url", url)
    }

    /// An entry with only a name (for bad configurations: add what is wrong).
    pub fn named(name: &str) -> ServerEntry {
        ServerEntry { keys: Vec::new() }.set("name", name)
    }

    /// Sets `key` (replacing an earlier value).
    pub fn set(mut self, key: &str, value: impl Into<Value>) -> ServerEntry {
        self.keys.retain(|(existing, _)| existing != key);
        self.keys.push((key.to_owned(), value.into()));
        self
    }
}

/// A settings file: `head` (other tables, e.g. `[permissions]`) then one `[[mcp_servers]]`
/// table per entry.
pub fn settings(head: &str, entries: &[ServerEntry]) -> String {
    let mut toml = head.to_owned();
    for entry in entries {
        toml.push_str("\n[[mcp_servers]]\n");
        for (key, value) in &entry.keys {
            writeln!(toml, "{key} = {}", toml_value(value)).unwrap();
        }
    }
    toml
}

/// A settings file read back as JSON, as the daemon's settings loader (figment) reads it.
pub fn parse_settings(toml: &str) -> Value {
    use figment::providers::{Format, Toml};
    figment::Figment::from(Toml::string(toml))
        .extract()
        .unwrap_or_else(|err| panic!("{err}: {toml}"))
}

/// A JSON value as TOML: a JSON string's escapes are valid in a TOML basic string; objects
/// become inline tables with quoted keys. TOML has no null.
fn toml_value(value: &Value) -> String {
    match value {
        Value::String(_) | Value::Number(_) | Value::Bool(_) => value.to_string(),
        Value::Array(items) => {
            let items: Vec<String> = items.iter().map(toml_value).collect();
            format!("[{}]", items.join(", "))
        }
        Value::Object(map) => {
            let pairs: Vec<String> = map
                .iter()
                .map(|(key, value)| {
                    format!("{} = {}", Value::from(key.as_str()), toml_value(value))
                })
                .collect();
            format!("{{ {} }}", pairs.join(", "))
        }
        Value::Null => panic!("TOML has no null"),
    }
}

/// One line of `/proc/PID/stat`: what the process checks need.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Proc {
    pub pid: u32,
    pub parent: u32,
    pub group: u32,
    /// `R`, `S`, `Z` (a zombie: exited, not reaped) …
    pub state: char,
    pub name: String,
}

/// Every process in `/proc` now (zombies included: they are there until reaped).
pub fn processes() -> Vec<Proc> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .filter_map(|entry| entry.ok()?.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| parse_stat(&std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?))
        .collect()
}

/// `PID (NAME) STATE PPID PGRP …`; the name may hold spaces and parentheses, so the fields
/// after it are read from the last `)`.
fn parse_stat(line: &str) -> Option<Proc> {
    let (head, tail) = line.rsplit_once(')')?;
    let (pid, name) = head.split_once(" (")?;
    let mut fields = tail.split_whitespace();
    let state = fields.next()?.chars().next()?;
    Some(Proc {
        pid: pid.trim().parse().ok()?,
        name: name.to_owned(),
        state,
        parent: fields.next()?.parse().ok()?,
        group: fields.next()?.parse().ok()?,
    })
}

/// Every live process whose chain of parents includes `ancestor` (not `ancestor` itself).
pub fn descendants(ancestor: u32) -> Vec<Proc> {
    let all = processes();
    let parent_of = |pid: u32| all.iter().find(|p| p.pid == pid).map(|p| p.parent);
    all.iter()
        .filter(|proc| {
            let mut pid = proc.pid;
            // A chain ends at pid 0 or 1; a bound on steps guards against a pid reused mid-read.
            for _ in 0..64 {
                match parent_of(pid) {
                    Some(parent) if parent == ancestor => return true,
                    Some(parent) if parent > 1 => pid = parent,
                    _ => return false,
                }
            }
            false
        })
        .cloned()
        .collect()
}

/// Every process in process group `group`.
pub fn in_group(group: u32) -> Vec<Proc> {
    processes()
        .into_iter()
        .filter(|proc| proc.group == group)
        .collect()
}

/// Polls `find` until it returns nothing, failing after `within` with what is still there.
pub async fn wait_until_gone(what: &str, within: Duration, find: impl Fn() -> Vec<Proc>) {
    let deadline = Instant::now() + within;
    loop {
        let left = find();
        if left.is_empty() {
            return;
        }
        assert!(
            Instant::now() < deadline,
            "{what}: still there after {within:?}: {left:?}"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_stat_line_with_spaces_and_parentheses_in_the_name_parses() {
        let line = "4242 (node (x) y) S 17 4242 4242 0 -1 4194560 1 0 0 0";
        assert_eq!(
            parse_stat(line),
            Some(Proc {
                pid: 4242,
                parent: 17,
                group: 4242,
                state: 'S',
                name: "node (x) y".into()
            })
        );
    }

    #[test]
    fn an_entry_becomes_a_toml_table_figment_reads_back() {
        let entry = ServerEntry::stdio("fs", Path::new("/usr/bin/node"), &[Path::new("a \"b\"")])
            .set("env", serde_json::json!({"A_B": "x\ny"}))
            .set("defer", false)
            .set("tool_timeout_ms", 500)
            .set("scope", "session")
            .set("scope", "daemon");
        let toml = settings("[permissions]\ndeny = [\"x\"]\n", &[entry]);
        assert_eq!(
            parse_settings(&toml),
            serde_json::json!({
                "permissions": {"deny": ["x"]},
                "mcp_servers": [{"name": "fs", "command": "/usr/bin/node", "args": ["a \"b\""],
                                 "env": {"A_B": "x\ny"}, "defer": false,
                                 "tool_timeout_ms": 500, "scope": "daemon"}]
            })
        );
    }
}
