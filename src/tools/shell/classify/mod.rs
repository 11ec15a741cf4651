//! The shell command classifier: is a command line read-only, concurrency-safe, destructive?
//!
//! The command is parsed with tree-sitter-bash (a real parser, not string splitting) and every
//! node of the tree is judged: each simple command by its name and arguments
//! ([`commands`]), each redirection by its operator and target, and every command or process
//! substitution, heredoc body and nested script recursively. The verdict is the conjunction of
//! the parts: one write anywhere makes the whole line a write. It fails closed: a parse error,
//! an unknown command, a command name that is not a literal, or an argument the rules cannot
//! see through (a `$VAR` where a flag could hide) yields "not read-only, destructive".
//!
//! It does not judge *where* a read-only command reads (paths outside the workspace are not
//! checked; the sandbox, a later issue, confines the shell) and it does not run anything.
//! Parsers are cached per thread, and the last few verdicts too, because the dispatcher asks
//! for several flags of the same call.

mod commands;
mod git;
mod text;

use std::cell::RefCell;
use std::time::{Duration, Instant};

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree};

/// What a command line may do, as far as the classifier can tell.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Classification {
    /// Changes nothing outside the shell process itself (no file, no other process).
    pub read_only: bool,
    /// May run in parallel with other calls: read-only and leaves no session state behind.
    pub concurrency_safe: bool,
    /// May destroy data: delete, overwrite or truncate files, discard work, kill processes.
    pub destructive: bool,
}

impl Classification {
    /// Reads only.
    pub const READ: Classification = Classification {
        read_only: true,
        concurrency_safe: true,
        destructive: false,
    };
    /// Reads only but moves the shell's working directory, which persists to the next call:
    /// two such calls in parallel would leave the session's cwd to whichever finished last.
    pub const CHANGES_CWD: Classification = Classification {
        read_only: true,
        concurrency_safe: false,
        destructive: false,
    };
    /// Writes, but does not destroy (creates, appends, changes shell state).
    pub const WRITE: Classification = Classification {
        read_only: false,
        concurrency_safe: false,
        destructive: false,
    };
    /// May destroy data, or cannot be classified (the fail-closed verdict).
    pub const DESTRUCTIVE: Classification = Classification {
        read_only: false,
        concurrency_safe: false,
        destructive: true,
    };

    /// Both parts run: read-only and safe only if both are, destructive if either is.
    #[must_use]
    pub fn and(self, other: Classification) -> Classification {
        Classification {
            read_only: self.read_only && other.read_only,
            concurrency_safe: self.concurrency_safe && other.concurrency_safe,
            destructive: self.destructive || other.destructive,
        }
    }

    /// The same effect, but never read-only (a wrapper such as `sudo`, `eval` or `exec`).
    #[must_use]
    pub fn not_read_only(self) -> Classification {
        self.and(Classification::WRITE)
    }
}

/// Nested scripts (`bash -c '…'`, `eval '…'`) deeper than this are not looked into.
const MAX_NESTING: usize = 4;
/// Tree depth past which the walk gives up (and says destructive) instead of recursing on.
const MAX_DEPTH: usize = 200;
/// The longest a parse may take before the classifier gives up (and the call fails closed).
const PARSE_BUDGET: Duration = Duration::from_millis(100);
/// Verdicts remembered per thread.
const CACHE_ENTRIES: usize = 16;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
    static CACHE: RefCell<Vec<(String, Classification)>> = const { RefCell::new(Vec::new()) };
}

/// Classifies a command line. `Err` means the classifier itself failed (the parser could not
/// be set up); a command that does not parse is `Ok` with the fail-closed verdict.
pub fn classify(command: &str) -> Result<Classification, String> {
    let cached = CACHE.with(|cache| {
        cache
            .borrow()
            .iter()
            .find(|(text, _)| text == command)
            .map(|(_, verdict)| *verdict)
    });
    if let Some(verdict) = cached {
        return Ok(verdict);
    }
    let verdict = classify_nested(command, 0)?;
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE_ENTRIES {
            cache.remove(0);
        }
        cache.push((command.to_owned(), verdict));
    });
    Ok(verdict)
}

/// Classifies a script found inside another (`bash -c`, `eval`, `trap`).
fn classify_nested(source: &str, nesting: usize) -> Result<Classification, String> {
    if nesting > MAX_NESTING {
        return Ok(Classification::DESTRUCTIVE);
    }
    let tree = parse(source)?;
    let root = tree.root_node();
    if root.has_error() {
        return Ok(Classification::DESTRUCTIVE);
    }
    let mut walker = Walker {
        source: source.as_bytes(),
        nesting,
        verdict: Classification::READ,
    };
    walker.visit(root, 0);
    Ok(walker.verdict)
}

/// Parses with this thread's parser. The borrow ends before the tree is walked, so a nested
/// script can be parsed while its parent's tree is alive. A parse that takes longer than
/// [`PARSE_BUDGET`] (a pathological line; the grammar is slow on long pipelines) is abandoned
/// and reported as an error, so the caller fails closed instead of holding its thread.
fn parse(source: &str) -> Result<Tree, String> {
    PARSER.with(|cell| {
        let mut slot = cell.borrow_mut();
        if slot.is_none() {
            let mut parser = Parser::new();
            parser
                .set_language(&tree_sitter_bash::LANGUAGE.into())
                .map_err(|err| format!("the bash grammar could not be loaded: {err}"))?;
            *slot = Some(parser);
        }
        let parser = slot.as_mut().ok_or_else(|| "no bash parser".to_owned())?;
        let bytes = source.as_bytes();
        let deadline = Instant::now() + PARSE_BUDGET;
        let mut over_budget = |_: &ParseState| Instant::now() > deadline;
        let tree = parser.parse_with_options(
            &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut over_budget)),
        );
        tree.ok_or_else(|| {
            // An abandoned parse leaves state behind that the next parse must not resume.
            parser.reset();
            format!(
                "the command could not be parsed within {} ms",
                PARSE_BUDGET.as_millis()
            )
        })
    })
}

/// A word of the command line: its text when it is a literal, or `Dynamic` when its value is
/// only known when the shell runs (expansions, substitutions, unquoted globs and braces).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Word {
    Static(String),
    Dynamic,
}

impl Word {
    pub(crate) fn text(&self) -> Option<&str> {
        match self {
            Word::Static(text) => Some(text),
            Word::Dynamic => None,
        }
    }
}

/// `for NAME in …` and `read NAME` set a shell variable. A lower-case name is a local by
/// convention and changes no program's behaviour; any other name might be an exported
/// variable (`HOME`, `RIPGREP_CONFIG_PATH`) that does.
pub(crate) fn loop_variable(name: &str) -> Classification {
    if is_risky_variable(name) {
        Classification::DESTRUCTIVE
    } else if name.chars().any(|c| c.is_ascii_uppercase()) {
        Classification::WRITE
    } else {
        Classification::READ
    }
}

/// Variables whose value changes what other commands do (which program a name runs, which
/// code a shell or git loads): assigning one makes a line destructive, not merely a write.
fn is_risky_variable(name: &str) -> bool {
    const EXACT: &[&str] = &[
        "PATH",
        "ENV",
        "IFS",
        "SHELLOPTS",
        "BASHOPTS",
        "PROMPT_COMMAND",
        "PS4",
        "PAGER",
        "MANPAGER",
        "EDITOR",
        "VISUAL",
        "LESSOPEN",
        "LESSCLOSE",
        "CDPATH",
    ];
    EXACT.contains(&name)
        || name.starts_with("LD_")
        || name.starts_with("GIT_")
        || name.starts_with("BASH_")
}

struct Walker<'a> {
    source: &'a [u8],
    nesting: usize,
    verdict: Classification,
}

impl Walker<'_> {
    fn mark(&mut self, verdict: Classification) {
        self.verdict = self.verdict.and(verdict);
    }

    fn visit(&mut self, node: Node<'_>, depth: usize) {
        if depth > MAX_DEPTH {
            self.mark(Classification::DESTRUCTIVE);
            return;
        }
        match node.kind() {
            "command" => self.command(node, depth),
            "file_redirect" => self.file_redirect(node, depth),
            "variable_assignment" => {
                self.assignment(node);
                self.visit_children(node, depth);
            }
            // export, declare, local, readonly, typeset: shell state, never read-only.
            "declaration_command" | "unset_command" => {
                self.mark(Classification::WRITE);
                self.visit_children(node, depth);
            }
            // A function can shadow any command name, so names stop meaning what they say.
            "function_definition" => self.mark(Classification::DESTRUCTIVE),
            "for_statement" => {
                if let Some(variable) = node.child_by_field_name("variable") {
                    self.mark(loop_variable(&self.text(variable)));
                }
                self.visit_children(node, depth);
            }
            "comment" => {}
            "ERROR" => self.mark(Classification::DESTRUCTIVE),
            _ => self.visit_children(node, depth),
        }
    }

    fn visit_children(&mut self, node: Node<'_>, depth: usize) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.visit(child, depth + 1);
        }
    }

    fn text(&self, node: Node<'_>) -> String {
        String::from_utf8_lossy(&self.source[node.byte_range()]).into_owned()
    }

    fn assignment(&mut self, node: Node<'_>) {
        let name = node
            .child_by_field_name("name")
            .map(|name| self.text(name))
            .unwrap_or_default();
        self.assign_to(name);
    }

    /// Any assignment can change what later commands do, so the line is no longer read-only.
    fn assign_to(&mut self, name: String) {
        let name = name.split('[').next().unwrap_or_default();
        if is_risky_variable(name) {
            self.mark(Classification::DESTRUCTIVE);
        } else {
            self.mark(Classification::WRITE);
        }
    }

    fn command(&mut self, node: Node<'_>, depth: usize) {
        let mut name = None;
        let mut arguments = Vec::new();
        let mut cursor = node.walk();
        let mut more = cursor.goto_first_child();
        while more {
            let child = cursor.node();
            if child.is_named() {
                match cursor.field_name() {
                    Some("name") => name = Some(self.word(child)),
                    Some("argument") => arguments.push(self.word(child)),
                    _ => {}
                }
                // Substitutions inside the name or the arguments, prefix assignments and
                // redirections are judged on their own.
                self.visit(child, depth + 1);
            }
            more = cursor.goto_next_sibling();
        }
        let verdict = match name {
            Some(Word::Static(name)) => commands::simple_command(&name, &arguments, self.nesting),
            // `$cmd args`: which program runs is only known at run time.
            Some(Word::Dynamic) | None => Classification::DESTRUCTIVE,
        };
        self.mark(verdict);
    }

    fn file_redirect(&mut self, node: Node<'_>, depth: usize) {
        let operator = operator_of(node, self.source);
        let destination = node
            .child_by_field_name("destination")
            .map(|destination| self.word(destination));
        self.mark(redirect_verdict(&operator, destination.as_ref()));
        self.visit_children(node, depth);
    }

    /// The value of a word-like node, if it is a literal.
    fn word(&self, node: Node<'_>) -> Word {
        match node.kind() {
            "command_name" => match node.named_child(0) {
                Some(inner) => self.word(inner),
                None => Word::Dynamic,
            },
            "word" => unescape_word(&self.text(node)),
            "number" => Word::Static(self.text(node)),
            "raw_string" => {
                let text = self.text(node);
                let inner = text
                    .strip_prefix('\'')
                    .and_then(|t| t.strip_suffix('\''))
                    .unwrap_or(&text);
                Word::Static(inner.to_owned())
            }
            "string" => {
                let mut value = String::new();
                let mut cursor = node.walk();
                for part in node.named_children(&mut cursor) {
                    if part.kind() != "string_content" {
                        return Word::Dynamic;
                    }
                    value.push_str(&unescape_double_quoted(&self.text(part)));
                }
                Word::Static(value)
            }
            "concatenation" => {
                let mut value = String::new();
                let mut cursor = node.walk();
                for part in node.named_children(&mut cursor) {
                    match self.word(part) {
                        Word::Static(text) => value.push_str(&text),
                        Word::Dynamic => return Word::Dynamic,
                    }
                }
                // Braces split a concatenation into parts: `{a,b}` expands at run time.
                if is_brace_expansion(&self.text(node)) {
                    return Word::Dynamic;
                }
                Word::Static(value)
            }
            _ => Word::Dynamic,
        }
    }
}

/// The redirection operator (`>`, `>>`, `<`, `&>`, `>&`, `2>&1`'s `>&`, …): the first
/// anonymous child of a `file_redirect`.
fn operator_of(node: Node<'_>, source: &[u8]) -> String {
    let mut cursor = node.walk();
    node.children(&mut cursor)
        .find(|child| !child.is_named())
        .map(|child| String::from_utf8_lossy(&source[child.byte_range()]).into_owned())
        .unwrap_or_default()
}

/// Targets that are not files on disk: writing to them changes nothing.
const HARMLESS_TARGETS: &[&str] = &["/dev/null", "/dev/stdout", "/dev/stderr", "/dev/tty"];

fn redirect_verdict(operator: &str, destination: Option<&Word>) -> Classification {
    let target = destination.and_then(Word::text);
    let harmless = target.is_some_and(|t| HARMLESS_TARGETS.contains(&t));
    let is_fd =
        |t: Option<&str>| t.is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
    match operator {
        "<" => Classification::READ,
        // Duplicating or closing a descriptor (`2>&1`, `3>&-`); `>& file` is a file write.
        "<&" | "<&-" => Classification::READ,
        ">&" | ">&-" if destination.is_none() || is_fd(target) => Classification::READ,
        _ if harmless => Classification::READ,
        ">>" | "&>>" | "<>" => Classification::WRITE,
        // `>`, `>|`, `&>`, `>& file` truncate their target.
        _ => Classification::DESTRUCTIVE,
    }
}

/// Whether `text` holds a brace expansion (`{a,b}`, `{1..3}`); a lone `{}` is literal.
fn is_brace_expansion(text: &str) -> bool {
    text.match_indices('{').any(|(open, _)| {
        text[open..].find('}').is_some_and(|close| {
            let inside = &text[open + 1..open + close];
            inside.contains(',') || inside.contains("..")
        })
    })
}

/// An unquoted word's value: backslashes escape the next character. Unquoted glob characters
/// and brace expansions make it `Dynamic` (a file named `-delete` would match `*`).
fn unescape_word(text: &str) -> Word {
    if is_brace_expansion(text) {
        return Word::Dynamic;
    }
    let mut value = String::with_capacity(text.len());
    let mut chars = text.chars();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('\n') | None => {}
                Some(escaped) => value.push(escaped),
            },
            '*' | '?' | '[' | '$' | '`' => return Word::Dynamic,
            _ => value.push(c),
        }
    }
    Word::Static(value)
}

/// Inside double quotes a backslash escapes only `$`, `` ` ``, `"`, `\` and a newline.
fn unescape_double_quoted(text: &str) -> String {
    let mut value = String::with_capacity(text.len());
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '\\' {
            match chars.peek() {
                Some('$' | '`' | '"' | '\\') => {
                    if let Some(escaped) = chars.next() {
                        value.push(escaped);
                    }
                    continue;
                }
                Some('\n') => {
                    chars.next();
                    continue;
                }
                _ => {}
            }
        }
        value.push(c);
    }
    value
}

#[cfg(test)]
#[path = "table_tests.rs"]
mod tests;
