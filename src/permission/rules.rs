//! The rule grammar: `Tool`, `Tool(specifier)`, `mcp__server__tool`, `mcp__server__*`.
//!
//! A rule is parsed once per session (path specifiers are relative to the session's
//! workspace, so they are compiled against it) into a [`Rule`]: its text as written, its kind
//! (`deny`, `ask`, `allow`), where it came from (the server's settings, the session, or an
//! approval remembered for the rest of the session), the tool it names (aliases resolved to
//! the tool) and its specifier, interpreted by the tool's family:
//! - `bash`: `git status` exact, `npm run test:*` prefix, `git * main` wildcard;
//! - file and search tools: a gitignore-style path relative to the workspace (`./secrets/**`,
//!   `*.pem`, `build/`), `//absolute/**`, or `~/relative-to-home/**`;
//! - `web_fetch`: `domain:example.org` or `domain:*.example.org`.
//!
//! Matching a rule against a call is [`super::matcher`]'s; this file only reads rules.

use std::collections::HashMap;
use std::fmt;
use std::path::Path;

use globset::{Glob, GlobBuilder, GlobMatcher};
use serde::{Deserialize, Serialize};

use crate::tool::{closest, is_valid_tool_name};

/// What a matching rule decides.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleKind {
    Deny,
    Ask,
    Allow,
}

impl RuleKind {
    pub fn as_str(self) -> &'static str {
        match self {
            RuleKind::Deny => "deny",
            RuleKind::Ask => "ask",
            RuleKind::Allow => "allow",
        }
    }
}

/// Where a rule came from; recorded with the decision in the audit row.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RuleSource {
    /// `[permissions]` in the server's settings.
    Server,
    /// The create-session request's `rules`.
    Session,
    /// An approval resolved with `remember: true`.
    Remembered,
}

impl fmt::Display for RuleSource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            RuleSource::Server => "server",
            RuleSource::Session => "session",
            RuleSource::Remembered => "remembered",
        })
    }
}

/// A rule that cannot be used, and why.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("permission rule \"{rule}\": {problem}")]
pub struct RuleError {
    pub rule: String,
    pub problem: String,
}

/// The tools' names and aliases, for resolving the tool a rule names.
#[derive(Clone, Debug, Default)]
pub struct ToolNames {
    /// Every name and alias, to its tool's canonical name.
    canonical: HashMap<String, String>,
}

impl ToolNames {
    /// `names` (canonical names) and `aliases` (alias, target).
    pub fn new<'a>(
        names: impl IntoIterator<Item = &'a str>,
        aliases: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> ToolNames {
        let mut canonical: HashMap<String, String> = names
            .into_iter()
            .map(|name| (name.to_owned(), name.to_owned()))
            .collect();
        for (alias, target) in aliases {
            canonical.insert(alias.to_owned(), target.to_owned());
        }
        ToolNames { canonical }
    }

    fn resolve(&self, name: &str) -> Option<&str> {
        self.canonical.get(name).map(String::as_str)
    }

    /// Every name and alias a rule may name, sorted.
    pub fn all(&self) -> Vec<&str> {
        let mut names: Vec<&str> = self.canonical.keys().map(String::as_str).collect();
        names.sort_unstable();
        names
    }

    fn suggestion(&self, name: &str) -> String {
        closest(name, self.all())
            .map(|near| format!("; did you mean \"{near}\"?"))
            .unwrap_or_default()
    }
}

/// What a rule's relative paths mean: the session's workspace and the daemon's home.
#[derive(Clone, Copy, Debug)]
pub struct RuleContext<'a> {
    pub workspace: &'a Path,
    pub home: Option<&'a Path>,
    pub tools: &'a ToolNames,
}

/// Which tools a rule names.
#[derive(Clone, Debug)]
pub(crate) enum ToolTarget {
    /// One tool, by its canonical name.
    Named(String),
    /// Every tool of an MCP server: names starting with `mcp__server__`.
    McpServer(String),
}

/// How a `bash` specifier matches one simple command's words.
#[derive(Clone, Debug)]
pub(crate) enum CommandPattern {
    Exact(String),
    /// `prefix:*`.
    Prefix(String),
    /// `*` matches any run of characters within one simple command.
    Wildcard(regex::Regex),
}

/// A path specifier, compiled against the session: an absolute glob, matched against a path
/// and each of its ancestors (gitignore: a matched directory covers what is inside).
#[derive(Clone, Debug)]
pub(crate) struct PathPattern {
    pub(crate) glob: GlobMatcher,
}

/// `domain:host` or `domain:*.host`.
#[derive(Clone, Debug)]
pub(crate) enum DomainPattern {
    Exact(String),
    /// Any subdomain of this (not the domain itself).
    Subdomains(String),
}

#[derive(Clone, Debug)]
pub(crate) enum Specifier {
    Command(CommandPattern),
    Path(PathPattern),
    Domain(DomainPattern),
}

/// A parsed rule.
#[derive(Clone, Debug)]
pub struct Rule {
    pub text: String,
    pub kind: RuleKind,
    pub source: RuleSource,
    pub(crate) tool: ToolTarget,
    pub(crate) specifier: Option<Specifier>,
}

/// Tools whose specifier is a path, and the input field holding it.
pub(crate) const PATH_TOOLS: &[(&str, &str)] = &[
    ("read_file", "file_path"),
    ("write_file", "file_path"),
    ("edit_file", "file_path"),
    ("str_replace_based_edit_tool", "path"),
    ("notebook_edit", "notebook_path"),
    ("glob_search", "path"),
    ("grep_search", "path"),
];

pub(crate) const BASH: &str = "bash";
pub(crate) const WEB_FETCH: &str = "web_fetch";
const MCP_PREFIX: &str = "mcp__";

impl Rule {
    /// Parses `text` as a rule of `kind` from `source`.
    pub fn parse(
        text: &str,
        kind: RuleKind,
        source: RuleSource,
        context: &RuleContext<'_>,
    ) -> Result<Rule, RuleError> {
        let fail = |problem: String| RuleError {
            rule: text.to_owned(),
            problem,
        };
        let trimmed = text.trim();
        let (name, specifier) = match trimmed.find('(') {
            None => (trimmed, None),
            Some(open) => {
                let inner = trimmed[open + 1..]
                    .strip_suffix(')')
                    .ok_or_else(|| fail("a specifier must end with \")\"".to_owned()))?;
                if inner.trim().is_empty() {
                    return Err(fail(
                        "the specifier is empty; write the tool name alone to match every call"
                            .to_owned(),
                    ));
                }
                (&trimmed[..open], Some(inner.trim()))
            }
        };
        let tool = tool_target(name, context.tools).map_err(fail)?;
        let specifier = match (&tool, specifier) {
            (_, None) => None,
            (ToolTarget::McpServer(_), Some(_)) => {
                return Err(fail("MCP tools take no specifier".to_owned()));
            }
            (ToolTarget::Named(tool), Some(spec)) => {
                Some(specifier_for(tool, spec, context).map_err(fail)?)
            }
        };
        Ok(Rule {
            text: trimmed.to_owned(),
            kind,
            source,
            tool,
            specifier,
        })
    }

    /// A `bash` rule matching exactly `line` (whitespace runs as one space), whatever
    /// characters it holds: an answer remembered for one command line.
    pub fn exact_command(text: &str, line: &str, kind: RuleKind, source: RuleSource) -> Rule {
        Rule {
            text: text.to_owned(),
            kind,
            source,
            tool: ToolTarget::Named(BASH.to_owned()),
            specifier: Some(Specifier::Command(CommandPattern::Exact(normalise_words(
                line,
            )))),
        }
    }

    /// Whether the rule names `tool` (a canonical name), whatever its specifier says.
    pub(crate) fn names_tool(&self, tool: &str) -> bool {
        match &self.tool {
            ToolTarget::Named(name) => name == tool,
            ToolTarget::McpServer(prefix) => tool.starts_with(prefix.as_str()),
        }
    }
}

/// The name prefix every tool of an MCP server has, when `rule` names the whole server
/// (`mcp__fs` or `mcp__fs__*`): what the pool leaves out for such a deny.
pub fn mcp_server_prefix(rule: &str) -> Option<String> {
    let rest = rule.strip_prefix(MCP_PREFIX)?;
    let (server, tool) = rest.split_once("__").unwrap_or((rest, "*"));
    (tool == "*" && !server.is_empty() && is_valid_tool_name(server))
        .then(|| format!("{MCP_PREFIX}{server}__"))
}

fn tool_target(name: &str, tools: &ToolNames) -> Result<ToolTarget, String> {
    if let Some(prefix) = mcp_server_prefix(name) {
        return Ok(ToolTarget::McpServer(prefix));
    }
    if let Some(rest) = name.strip_prefix(MCP_PREFIX) {
        // `mcp__server__tool`, `mcp__server__*`, or `mcp__server` (every tool of the server).
        let (server, tool) = rest.split_once("__").unwrap_or((rest, "*"));
        let plain = |part: &str| !part.is_empty() && is_valid_tool_name(part);
        if !plain(server) {
            return Err(format!(
                "\"{name}\" is not mcp__SERVER__TOOL or mcp__SERVER__*"
            ));
        }
        return match tool {
            "*" => Ok(ToolTarget::McpServer(format!("{MCP_PREFIX}{server}__"))),
            tool if plain(tool) && is_valid_tool_name(name) => {
                Ok(ToolTarget::Named(name.to_owned()))
            }
            _ => Err(format!(
                "\"{name}\" is not mcp__SERVER__TOOL or mcp__SERVER__*"
            )),
        };
    }
    if !is_valid_tool_name(name) {
        return Err(format!(
            "\"{name}\" is not a tool name (letters, digits, _ and -, at most 64)"
        ));
    }
    if crate::tool::is_external_tool_name(name) {
        // A provided tool (`{provider}__{tool}`), which may connect after the rule is read.
        return Ok(ToolTarget::Named(name.to_owned()));
    }
    tools
        .resolve(name)
        .map(|canonical| ToolTarget::Named(canonical.to_owned()))
        .ok_or_else(|| format!("unknown tool \"{name}\"{}", tools.suggestion(name)))
}

fn specifier_for(tool: &str, spec: &str, context: &RuleContext<'_>) -> Result<Specifier, String> {
    if tool == BASH {
        return command_pattern(spec).map(Specifier::Command);
    }
    if tool == WEB_FETCH {
        return domain_pattern(spec).map(Specifier::Domain);
    }
    if PATH_TOOLS.iter().any(|(name, _)| *name == tool) {
        return path_pattern(spec, context).map(Specifier::Path);
    }
    Err(format!(
        "\"{tool}\" takes no specifier (only bash, web_fetch and the file and search tools do)"
    ))
}

/// Whitespace runs become one space, as the command's words are joined.
fn normalise_words(text: &str) -> String {
    text.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn command_pattern(spec: &str) -> Result<CommandPattern, String> {
    if let Some(prefix) = spec.strip_suffix(":*") {
        let prefix = normalise_words(prefix);
        if prefix.is_empty() {
            return Err(
                "the prefix before \":*\" is empty; write \"bash\" to match every command"
                    .to_owned(),
            );
        }
        return Ok(CommandPattern::Prefix(prefix));
    }
    let words = normalise_words(spec);
    if !words.contains('*') {
        return Ok(CommandPattern::Exact(words));
    }
    let body: Vec<String> = words.split('*').map(regex::escape).collect();
    regex::Regex::new(&format!("^(?s:{})$", body.join(".*")))
        .map(CommandPattern::Wildcard)
        .map_err(|err| format!("the pattern does not compile: {err}"))
}

fn domain_pattern(spec: &str) -> Result<DomainPattern, String> {
    let host = spec
        .strip_prefix("domain:")
        .ok_or_else(|| "web_fetch rules take \"domain:HOST\" or \"domain:*.HOST\"".to_owned())?
        .trim()
        .trim_end_matches('.')
        .to_ascii_lowercase();
    let valid = |host: &str| {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '.' | ':' | '[' | ']'))
    };
    match host.strip_prefix("*.") {
        Some(parent) if valid(parent) => Ok(DomainPattern::Subdomains(parent.to_owned())),
        None if valid(&host) => Ok(DomainPattern::Exact(host)),
        _ => Err(format!("\"{host}\" is not a host name")),
    }
}

/// A gitignore-style path made absolute: `//x` from `/`, `~/x` from home, `./x`, `/x` and any
/// pattern with an inner `/` from the workspace; a pattern without a `/` (`*.pem`, `secrets`)
/// matches at any depth of the workspace. A trailing `/` is dropped (directories match with
/// everything inside anyway).
fn path_pattern(spec: &str, context: &RuleContext<'_>) -> Result<PathPattern, String> {
    if spec.contains('\0') {
        return Err("the path contains a NUL byte".to_owned());
    }
    let under = |base: &Path, rest: &str| -> Result<String, String> {
        let base = base
            .to_str()
            .ok_or_else(|| format!("\"{}\" is not valid UTF-8", base.display()))?;
        Ok(format!(
            "{}/{}",
            globset::escape(base.trim_end_matches('/')),
            rest
        ))
    };
    let pattern = if let Some(rest) = spec.strip_prefix("//") {
        format!("/{rest}")
    } else if let Some(rest) = spec.strip_prefix("~/") {
        let home = context
            .home
            .ok_or_else(|| "\"~/\" needs a home directory and the daemon has none".to_owned())?;
        under(home, rest)?
    } else if spec == "~" || spec.starts_with('~') {
        return Err("only \"~/\" is expanded (not \"~user\")".to_owned());
    } else {
        let rest = spec.strip_prefix("./").unwrap_or(spec);
        let rest = rest.strip_prefix('/').unwrap_or(rest);
        let anchored = rest.trim_end_matches('/').contains('/') || spec.starts_with(['.', '/']);
        if anchored {
            under(context.workspace, rest)?
        } else {
            under(context.workspace, &format!("**/{rest}"))?
        }
    };
    let pattern = pattern.trim_end_matches('/');
    let pattern = if pattern.is_empty() { "/" } else { pattern };
    if pattern.split('/').any(|part| part == "..") {
        return Err(
            "\"..\" is not allowed in a path rule; name the directory it leads to".to_owned(),
        );
    }
    let glob: Glob = GlobBuilder::new(pattern)
        .literal_separator(true)
        .backslash_escape(true)
        .build()
        .map_err(|err| format!("the path pattern does not compile: {err}"))?;
    Ok(PathPattern {
        glob: glob.compile_matcher(),
    })
}

/// The server's or the session's rules, in the order written: deny, ask, allow.
#[derive(Clone, Debug, Default)]
pub struct RuleSet {
    pub rules: Vec<Rule>,
}

impl RuleSet {
    /// Parses every rule; the first bad one is the error.
    pub fn parse(
        allow: &[String],
        deny: &[String],
        ask: &[String],
        source: RuleSource,
        context: &RuleContext<'_>,
    ) -> Result<RuleSet, RuleError> {
        let mut rules = Vec::with_capacity(allow.len() + deny.len() + ask.len());
        for (kind, texts) in [
            (RuleKind::Deny, deny),
            (RuleKind::Ask, ask),
            (RuleKind::Allow, allow),
        ] {
            for text in texts {
                rules.push(Rule::parse(text, kind, source, context)?);
            }
        }
        Ok(RuleSet { rules })
    }

    pub fn of_kind(&self, kind: RuleKind) -> impl Iterator<Item = &Rule> {
        self.rules.iter().filter(move |rule| rule.kind == kind)
    }

    pub fn is_empty(&self) -> bool {
        self.rules.is_empty()
    }
}

/// The rules a session's calls are judged by: the server's, then the session's own.
#[derive(Clone, Debug, Default)]
pub struct SessionRules {
    pub server: RuleSet,
    pub session: RuleSet,
}

impl SessionRules {
    /// The rules of `kind`, the server's first (so a server rule is the one recorded when
    /// both match).
    pub fn of_kind(&self, kind: RuleKind) -> impl Iterator<Item = &Rule> {
        self.server.of_kind(kind).chain(self.session.of_kind(kind))
    }
}

/// An approval's answer kept for the rest of the session (saved with the session's state).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RememberedRule {
    /// `allow` or `deny`.
    pub kind: RuleKind,
    /// The rule text, in the grammar above.
    pub rule: String,
    /// The approval whose answer this is.
    pub approval_id: String,
}
