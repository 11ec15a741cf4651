//! Matching rules against a call: the broad reading for `deny` and `ask`, the narrow one for
//! `allow`.
//!
//! A deny or ask rule matches when it matches *any* part of the call: any simple command of
//! a bash line (also under a wrapper like `sudo` or `env`, or named by its full path), the
//! path as written (with `..` applied lexically) or as it resolves through symlinks. An allow
//! rule must vouch for the *whole* call: every simple command of the line matched by some
//! allow rule, none of them with prefix assignments or output redirected to a file, the line
//! parsed completely; the path as it really resolves. So a rule reads generously when it
//! refuses and strictly when it permits, and anything the parser cannot see through falls to
//! the mode.

use std::cell::OnceCell;
use std::path::{Component, Path, PathBuf};

use serde_json::Value;
use url::Url;

use super::PermissionSession;
use super::rules::{
    BASH, CommandPattern, DomainPattern, PATH_TOOLS, PathPattern, Rule, Specifier, WEB_FETCH,
};
use crate::shell_syntax::{CommandLine, SimpleCommand, simple_commands};
use crate::tool::paths;

/// A call as the rules see it; each family's facts are worked out once, on first use.
pub struct CallFacts<'a> {
    tool: &'a str,
    input: &'a Value,
    session: &'a dyn PermissionSession,
    line: OnceCell<Option<CommandLine>>,
    paths: OnceCell<Option<CallPaths>>,
    host: OnceCell<Option<String>>,
}

/// A file tool's path: as resolved (symlinks followed, as the tool will open it) and as
/// written (made absolute, `.`/`..` applied without following links).
struct CallPaths {
    resolved: Option<PathBuf>,
    lexical: PathBuf,
    /// A search root: what lies below it is read too.
    directory: bool,
}

impl<'a> CallFacts<'a> {
    pub fn new(
        tool: &'a str,
        input: &'a Value,
        session: &'a dyn PermissionSession,
    ) -> CallFacts<'a> {
        CallFacts {
            tool,
            input,
            session,
            line: OnceCell::new(),
            paths: OnceCell::new(),
            host: OnceCell::new(),
        }
    }

    pub fn tool(&self) -> &str {
        self.tool
    }

    pub fn input(&self) -> &Value {
        self.input
    }

    /// The bash command line, split; `None` when the input has no `command` string.
    pub fn command_line(&self) -> Option<&CommandLine> {
        self.line
            .get_or_init(|| {
                let command = self.input.get("command")?.as_str()?;
                Some(simple_commands(command))
            })
            .as_ref()
    }

    fn raw_command(&self) -> Option<String> {
        let command = self.input.get("command")?.as_str()?;
        Some(command.split_whitespace().collect::<Vec<_>>().join(" "))
    }

    fn paths(&self) -> Option<&CallPaths> {
        self.paths
            .get_or_init(|| {
                let (_, field) = PATH_TOOLS.iter().find(|(name, _)| *name == self.tool)?;
                let workspace = self.session.working_directory();
                let directory = matches!(self.tool, "glob_search" | "grep_search");
                let raw = match self.input.get(*field) {
                    Some(Value::String(raw)) => raw.as_str(),
                    // A search without a path searches the working directory.
                    None | Some(Value::Null) if directory => ".",
                    _ => return None,
                };
                let resolved = paths::resolve(raw, field, workspace, workspace)
                    .ok()
                    .map(|r| r.path);
                Some(CallPaths {
                    resolved,
                    lexical: lexical(&workspace.join(raw)),
                    directory,
                })
            })
            .as_ref()
    }

    fn host(&self) -> Option<&str> {
        self.host
            .get_or_init(|| {
                web_fetch_host(self.input)
                    .map(|host| host.trim_end_matches('.').to_ascii_lowercase())
            })
            .as_deref()
    }
}

/// The host a `web_fetch` input targets (`web_fetch(domain:x.org)` rules match it), or
/// `None` when the input has no parseable http(s) URL. It lives with the rules that read it.
pub fn web_fetch_host(input: &Value) -> Option<String> {
    let url = Url::parse(input.get("url")?.as_str()?).ok()?;
    matches!(url.scheme(), "http" | "https")
        .then(|| url.host_str().map(str::to_owned))
        .flatten()
}

/// `path` with `.` and `..` applied textually (a `..` at the root stays at the root).
fn lexical(path: &Path) -> PathBuf {
    let mut out = PathBuf::from("/");
    for component in path.components() {
        match component {
            Component::ParentDir => {
                out.pop();
            }
            Component::Normal(part) => out.push(part),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
    out
}

/// Deny and ask: the rule matches some part of the call.
pub fn matches_broadly(rule: &Rule, facts: &CallFacts<'_>) -> bool {
    if !rule.names_tool(facts.tool) {
        return false;
    }
    let Some(specifier) = &rule.specifier else {
        return true;
    };
    match specifier {
        Specifier::Command(pattern) => {
            let whole = facts
                .raw_command()
                .is_some_and(|line| command_matches(pattern, &line));
            whole
                || facts.command_line().is_some_and(|line| {
                    line.commands
                        .iter()
                        .flat_map(broad_texts)
                        .any(|text| command_matches(pattern, &text))
                })
        }
        Specifier::Path(pattern) => facts.paths().is_some_and(|paths| {
            paths
                .resolved
                .iter()
                .chain(std::iter::once(&paths.lexical))
                .any(|path| path_matches(pattern, path, paths.directory))
        }),
        Specifier::Domain(pattern) => facts.host().is_some_and(|h| domain_matches(pattern, h)),
    }
}

/// Allow: the rules that together vouch for the whole call (in rule order, without repeats),
/// or `None` if they do not.
pub fn allowing<'r>(rules: &[&'r Rule], facts: &CallFacts<'_>) -> Option<Vec<&'r Rule>> {
    let relevant: Vec<&Rule> = rules
        .iter()
        .copied()
        .filter(|rule| rule.names_tool(facts.tool))
        .collect();
    if let Some(rule) = relevant.iter().find(|rule| rule.specifier.is_none()) {
        return Some(vec![rule]);
    }
    if facts.tool == BASH {
        return allowing_line(&relevant, facts);
    }
    let rule = relevant
        .iter()
        .copied()
        .find(|rule| match &rule.specifier {
            Some(Specifier::Path(pattern)) => facts.paths().is_some_and(|paths| {
                paths
                    .resolved
                    .as_deref()
                    .is_some_and(|path| path_matches(pattern, path, false))
            }),
            Some(Specifier::Domain(pattern)) => {
                facts.tool == WEB_FETCH && facts.host().is_some_and(|h| domain_matches(pattern, h))
            }
            Some(Specifier::Command(_)) | None => false,
        })?;
    Some(vec![rule])
}

/// Every simple command of the line allowed by some rule, or the whole line named exactly.
fn allowing_line<'r>(rules: &[&'r Rule], facts: &CallFacts<'_>) -> Option<Vec<&'r Rule>> {
    let pattern = |rule: &&'r Rule| match &rule.specifier {
        Some(Specifier::Command(pattern)) => Some(pattern),
        _ => None,
    };
    if let Some(line) = facts.raw_command() {
        let exact = rules.iter().find(
            |rule| matches!(pattern(rule), Some(CommandPattern::Exact(text)) if *text == line),
        );
        if let Some(rule) = exact {
            return Some(vec![rule]);
        }
    }
    let line = facts.command_line()?;
    if line.incomplete || line.commands.is_empty() {
        return None;
    }
    let mut used: Vec<&'r Rule> = Vec::new();
    for command in &line.commands {
        if command.has_assignments || command.writes_file {
            return None;
        }
        let text = command.text();
        let rule = rules
            .iter()
            .copied()
            .find(|rule| pattern(rule).is_some_and(|p| command_matches(p, &text)))?;
        if !used.iter().any(|seen| std::ptr::eq(*seen, rule)) {
            used.push(rule);
        }
    }
    Some(used)
}

/// A prefix matches whole words: `git status:*` matches `git status` and `git status -s`,
/// not `git statusx`.
fn command_matches(pattern: &CommandPattern, text: &str) -> bool {
    match pattern {
        CommandPattern::Exact(exact) => text == exact,
        CommandPattern::Prefix(prefix) => text
            .strip_prefix(prefix.as_str())
            .is_some_and(|rest| rest.is_empty() || rest.starts_with(' ')),
        CommandPattern::Wildcard(regex) => regex.is_match(text),
    }
}

/// Programs that run the rest of their arguments as a command.
const WRAPPERS: &[&str] = &[
    "sudo", "doas", "env", "nohup", "nice", "ionice", "time", "command", "builtin", "exec",
    "timeout", "xargs", "stdbuf", "setsid", "chrt", "taskset", "watch",
];

/// The texts a deny or ask rule is tried against: the command, its program by base name
/// (`/bin/rm` as `rm`), and what runs under each wrapper (`sudo -n rm -rf x` as `rm -rf x`).
fn broad_texts(command: &SimpleCommand) -> Vec<String> {
    let mut texts = Vec::new();
    let mut words: &[String] = &command.words;
    while let Some((name, rest)) = words.split_first() {
        texts.push(words.join(" "));
        let base = name.rsplit('/').next().unwrap_or(name);
        if base != name {
            let mut short = vec![base.to_owned()];
            short.extend(rest.iter().cloned());
            texts.push(short.join(" "));
        }
        if !WRAPPERS.contains(&base) {
            break;
        }
        // Skip the wrapper's options, assignments and numbers (`-n 5`, `FOO=1`, `10s`).
        let skip = rest
            .iter()
            .take_while(|word| {
                word.starts_with('-')
                    || word.contains('=')
                    || word.chars().next().is_some_and(|c| c.is_ascii_digit())
            })
            .count();
        words = &rest[skip..];
    }
    texts
}

/// The pattern matches the path or one of its ancestors (gitignore: a matched directory
/// covers everything inside). For a search root, also what lies directly below it.
fn path_matches(pattern: &PathPattern, path: &Path, directory: bool) -> bool {
    if path.ancestors().any(|p| pattern.glob.is_match(p)) {
        return true;
    }
    directory && pattern.glob.is_match(path.join("\u{1}"))
}

fn domain_matches(pattern: &DomainPattern, host: &str) -> bool {
    match pattern {
        DomainPattern::Exact(exact) => host == exact,
        DomainPattern::Subdomains(parent) => host
            .strip_suffix(parent.as_str())
            .is_some_and(|rest| rest.ends_with('.') && rest.len() > 1),
    }
}
