//! `[[mcp_servers]]` (DESIGN §8): the external MCP servers whose tools the bridge mounts, and
//! the checks that refuse a bad entry at start-up with a message naming the server and the key.
//!
//! An entry is read key by key ([`parse_servers`]) rather than by one `deny_unknown_fields`
//! derive, because serde's message for a wrong type or an unknown field names neither the
//! entry nor, for a wrong type, the key; an operator with ten servers needs both. Resolving what
//! an entry refers to outside the file (the command on `PATH`, the bearer token's variable)
//! needs the environment, which only `config` reads: it hands a lookup to [`check_servers`].

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::tool::PermissionLevel;

/// Where a server's process lives.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum McpScope {
    /// One instance per session that names the server, started in its workspace, stopped when
    /// it closes.
    #[default]
    Session,
    /// One instance for the daemon; its tools are in every session's pool.
    Daemon,
}

impl McpScope {
    pub fn as_str(self) -> &'static str {
        match self {
            McpScope::Session => "session",
            McpScope::Daemon => "daemon",
        }
    }
}

/// One `[[mcp_servers]]` entry.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct McpServerSettings {
    /// `[A-Za-z0-9_-]+` without `__` (the separator of bridged names).
    pub name: String,
    /// Stdio: the program (found on `PATH` unless it has a `/`), its arguments, its extra
    /// environment and its working directory (empty: the session's workspace for a
    /// session-scoped server, the daemon's for a daemon-scoped one).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub command: Option<String>,
    pub args: Vec<String>,
    pub env: BTreeMap<String, String>,
    pub cwd: String,
    /// Streamable HTTP: the endpoint, extra headers, and the variable holding a bearer token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    pub headers: BTreeMap<String, String>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bearer_token_env: Option<String>,
    pub scope: McpScope,
    pub startup_timeout_ms: u64,
    pub tool_timeout_ms: u64,
    /// Empty: every tool the server lists.
    pub enabled_tools: Vec<String>,
    pub disabled_tools: Vec<String>,
    /// What every tool of the server requires.
    pub permission: PermissionLevel,
    /// `true`: `readOnlyHint` makes a tool read-only and parallel-safe, `destructiveHint:
    /// false` makes it non-destructive. Off by default: a server's annotations are its claims.
    pub trust_annotations: bool,
    /// Tools wait for `tool_search` before they are offered.
    pub defer: bool,
    /// The token `bearer_token_env` names, read by `config` at start-up; never serialised.
    #[serde(skip)]
    pub bearer_token: Option<String>,
    /// `command` as found on `PATH` at start-up.
    #[serde(skip)]
    pub program: Option<PathBuf>,
    /// The daemon's variables a stdio server inherits ([`BASE_ENV`]), read by `config`.
    #[serde(skip)]
    pub base_env: BTreeMap<String, String>,
}

/// The daemon's environment variables a stdio server gets (besides its own `env`): what a
/// program needs to run, none of the daemon's secrets.
pub const BASE_ENV: &[&str] = &[
    "PATH", "HOME", "USER", "LOGNAME", "LANG", "LC_ALL", "LC_CTYPE", "TZ", "TMPDIR", "TERM",
    "SHELL",
];

impl Default for McpServerSettings {
    fn default() -> Self {
        McpServerSettings {
            name: String::new(),
            command: None,
            args: Vec::new(),
            env: BTreeMap::new(),
            cwd: String::new(),
            url: None,
            headers: BTreeMap::new(),
            bearer_token_env: None,
            scope: McpScope::Session,
            startup_timeout_ms: 10_000,
            tool_timeout_ms: 60_000,
            enabled_tools: Vec::new(),
            disabled_tools: Vec::new(),
            permission: PermissionLevel::WorkspaceWrite,
            trust_annotations: false,
            defer: true,
            bearer_token: None,
            program: None,
            base_env: BTreeMap::new(),
        }
    }
}

/// The keys an entry may have, in the order DESIGN §8 lists them.
const KEYS: &[&str] = &[
    "name",
    "command",
    "args",
    "env",
    "cwd",
    "url",
    "headers",
    "bearer_token_env",
    "scope",
    "startup_timeout_ms",
    "tool_timeout_ms",
    "enabled_tools",
    "disabled_tools",
    "permission",
    "trust_annotations",
    "defer",
];

/// A refused `[[mcp_servers]]` entry: which one (its name, or its index when it has no usable
/// name), which key, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub struct McpSettingsError {
    /// `"fs"` or `[2]`.
    pub server: String,
    /// Empty when the entry as a whole is wrong.
    pub key: String,
    pub problem: String,
}

/// `mcp_servers "fs": url: problem`, `mcp_servers[2]: name: problem`.
impl std::fmt::Display for McpSettingsError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let gap = if self.server.starts_with('[') {
            ""
        } else {
            " "
        };
        write!(f, "mcp_servers{gap}{}: ", self.server)?;
        if !self.key.is_empty() {
            write!(f, "{}: ", self.key)?;
        }
        f.write_str(&self.problem)
    }
}

impl McpSettingsError {
    fn new(server: &str, key: &str, problem: impl Into<String>) -> McpSettingsError {
        McpSettingsError {
            server: server.to_owned(),
            key: key.to_owned(),
            problem: problem.into(),
        }
    }
}

/// `mcp_servers` as serde reads it: through [`parse_servers`].
pub fn deserialize_servers<'de, D>(deserializer: D) -> Result<Vec<McpServerSettings>, D::Error>
where
    D: serde::Deserializer<'de>,
{
    let entries = Vec::<Value>::deserialize(deserializer)?;
    parse_servers(&entries).map_err(serde::de::Error::custom)
}

/// Reads each entry key by key, so that an error names the server and the key.
pub fn parse_servers(entries: &[Value]) -> Result<Vec<McpServerSettings>, McpSettingsError> {
    entries
        .iter()
        .enumerate()
        .map(|(index, entry)| parse_server(index, entry))
        .collect()
}

fn parse_server(index: usize, entry: &Value) -> Result<McpServerSettings, McpSettingsError> {
    let at_index = format!("[{index}]");
    let Some(table) = entry.as_object() else {
        return Err(McpSettingsError::new(
            &at_index,
            "",
            "an entry must be a table",
        ));
    };
    let who = match table.get("name").and_then(Value::as_str) {
        Some(name) if !name.is_empty() => format!("\"{name}\""),
        _ => at_index,
    };
    if let Some(unknown) = table.keys().find(|key| !KEYS.contains(&key.as_str())) {
        return Err(McpSettingsError::new(
            &who,
            unknown,
            format!("unknown key (known: {})", KEYS.join(", ")),
        ));
    }
    // Each key alone first: a wrong type is then blamed on its key.
    for (key, value) in table {
        let alone = Map::from_iter([(key.clone(), value.clone())]);
        if let Err(err) = serde_json::from_value::<McpServerSettings>(Value::Object(alone)) {
            return Err(McpSettingsError::new(&who, key, err.to_string()));
        }
    }
    let settings: McpServerSettings = serde_json::from_value(entry.clone())
        .map_err(|err| McpSettingsError::new(&who, "", err.to_string()))?;
    settings.check_shape(&who)?;
    Ok(settings)
}

impl McpServerSettings {
    /// What can be judged from the entry alone.
    fn check_shape(&self, who: &str) -> Result<(), McpSettingsError> {
        let fail = |key: &str, problem: String| Err(McpSettingsError::new(who, key, problem));
        if !is_valid_server_name(&self.name) {
            return fail(
                "name",
                format!(
                    "\"{}\" must match [A-Za-z0-9_-]{{1,{MAX_SERVER_NAME}}} and not contain \"__\"",
                    self.name
                ),
            );
        }
        let command = self.command.as_deref().filter(|c| !c.trim().is_empty());
        let url = self.url.as_deref().filter(|u| !u.trim().is_empty());
        match (command, url) {
            (Some(_), Some(_)) => return fail("url", "give command or url, not both".into()),
            (None, None) => return fail("command", "give command (stdio) or url (HTTP)".into()),
            (None, Some(url)) => {
                let parsed = url::Url::parse(url);
                if !parsed.is_ok_and(|u| matches!(u.scheme(), "http" | "https") && u.has_host()) {
                    return fail("url", format!("\"{url}\" is not an http or https URL"));
                }
                let stdio_only = [
                    ("args", !self.args.is_empty()),
                    ("env", !self.env.is_empty()),
                    ("cwd", !self.cwd.is_empty()),
                ];
                if let Some((key, _)) = stdio_only.iter().find(|(_, set)| *set) {
                    return fail(key, "only a stdio server (command) takes it".into());
                }
            }
            (Some(_), None) => {
                let http_only = [
                    ("headers", !self.headers.is_empty()),
                    ("bearer_token_env", self.bearer_token_env.is_some()),
                ];
                if let Some((key, _)) = http_only.iter().find(|(_, set)| *set) {
                    return fail(key, "only an HTTP server (url) takes it".into());
                }
            }
        }
        for (header, value) in &self.headers {
            let valid_name = !header.is_empty()
                && header
                    .bytes()
                    .all(|b| b.is_ascii_alphanumeric() || b"!#$%&'*+-.^_`|~".contains(&b));
            if !valid_name || value.bytes().any(|b| b < 0x20 && b != b'\t' || b == 0x7f) {
                return fail("headers", format!("\"{header}\" is not a valid header"));
            }
        }
        if let Some(key) = self
            .env
            .keys()
            .find(|k| k.is_empty() || k.contains(['=', '\0']))
        {
            return fail("env", format!("\"{key}\" is not a variable name"));
        }
        for (key, value) in [
            ("startup_timeout_ms", self.startup_timeout_ms),
            ("tool_timeout_ms", self.tool_timeout_ms),
        ] {
            if value == 0 {
                return fail(key, "must be at least 1".into());
            }
        }
        Ok(())
    }

    /// Stdio or HTTP, for the listing.
    pub fn transport(&self) -> &'static str {
        if self.url.is_some() { "http" } else { "stdio" }
    }
}

/// The longest server name: `mcp__{server}__` stays inside the part of a bridged name that
/// is never cut (55 characters), so a rule naming the whole server always matches.
pub const MAX_SERVER_NAME: usize = 32;

/// `[A-Za-z0-9_-]{1,32}` without `__`.
pub fn is_valid_server_name(name: &str) -> bool {
    !name.is_empty()
        && name.len() <= MAX_SERVER_NAME
        && !name.contains("__")
        && name
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b == b'_' || b == b'-')
}

/// What needs the whole list or the environment: unique names, the command on `PATH` (or the
/// server's own `PATH` in `env`), the bearer token's variable set. Fills in `program`,
/// `bearer_token` and `base_env`.
pub fn check_servers(
    servers: &mut [McpServerSettings],
    env: impl Fn(&str) -> Option<String>,
) -> Result<(), McpSettingsError> {
    let mut seen = BTreeSet::new();
    for server in servers.iter_mut() {
        let who = format!("\"{}\"", server.name);
        if !seen.insert(server.name.clone()) {
            return Err(McpSettingsError::new(
                &who,
                "name",
                "another server has this name",
            ));
        }
        if let Some(command) = server.command.clone() {
            let path = server.env.get("PATH").cloned().or_else(|| env("PATH"));
            let program = find_program(&command, path.as_deref()).ok_or_else(|| {
                McpSettingsError::new(
                    &who,
                    "command",
                    format!("\"{command}\" is not an executable file or on PATH"),
                )
            })?;
            server.program = Some(program);
        }
        server.base_env = BASE_ENV
            .iter()
            .filter_map(|name| Some(((*name).to_owned(), env(name)?)))
            .collect();
        if let Some(variable) = &server.bearer_token_env {
            let token = env(variable).filter(|t| !t.is_empty()).ok_or_else(|| {
                McpSettingsError::new(
                    &who,
                    "bearer_token_env",
                    format!("the variable \"{variable}\" is not set"),
                )
            })?;
            server.bearer_token = Some(token);
        }
    }
    Ok(())
}

/// `command` itself (made absolute) when it has a `/`, else the first executable of that name
/// in an absolute directory of `path`.
fn find_program(command: &str, path: Option<&str>) -> Option<PathBuf> {
    let executable = |candidate: &Path| {
        use std::os::unix::fs::PermissionsExt;
        candidate
            .metadata()
            .is_ok_and(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
    };
    // Absolute: the server runs in another directory (a session's workspace, which the agent
    // writes), where a relative path would name another file.
    if command.contains('/') {
        let candidate = std::path::absolute(command).ok()?;
        return executable(&candidate).then_some(candidate);
    }
    std::env::split_paths(path?)
        .filter(|dir| dir.is_absolute())
        .map(|dir| dir.join(command))
        .find(|candidate| executable(candidate))
}

#[cfg(test)]
#[path = "settings_tests.rs"]
mod tests;
