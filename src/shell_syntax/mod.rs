//! Bash syntax, read without running anything: is a command line read-only, concurrency-safe,
//! destructive (the `bash` tool's flags), and which simple commands it runs (what the
//! permission rules match). A module of its own, below both: it imports nothing of the crate.
//!
//! The command is parsed with tree-sitter-bash (a real parser, not string splitting) and every
//! node of the tree is judged: each simple command by its name and arguments
//! ([`commands`]), each redirection by its operator and target, and every command or process
//! substitution, heredoc body and nested script recursively. The verdict is the conjunction of
//! the parts: one write anywhere makes the whole line a write. It fails closed: a parse error,
//! an unknown command, a command name that is not a literal, or an argument the rules cannot
//! see through (a `$VAR` where a flag could hide) yields "not read-only, destructive".
//!
//! It also reports the words that may name files beyond the shell's directory
//! ([`path_words`]); judging *where* they lead (the workspace boundary) is `bash`'s, since it
//! needs the session. It runs nothing. Parsers are cached per thread, and the last few
//! analyses too, because the dispatcher asks for several flags of the same call.

mod commands;
mod flags;
mod git;
mod path_words;
mod simple;
mod text;

use std::cell::{Cell, RefCell};
use std::collections::HashSet;

use tree_sitter::{Node, ParseOptions, ParseState, Parser, Tree};

pub use path_words::PathWord;
pub use simple::{CommandLine, SimpleCommand, simple_commands};

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

/// A command line's verdict and the words in it that may name files outside the shell's
/// directory.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Analysis {
    pub classification: Classification,
    /// In order of appearance, without repeats.
    pub paths: Vec<PathWord>,
}

/// Nested scripts (`bash -c '…'`, `eval '…'`) deeper than this are not looked into.
const MAX_NESTING: usize = 4;
/// Tree depth past which the walk gives up (and says destructive) instead of recursing on.
const MAX_DEPTH: usize = 200;
/// The parse work allowed for one command line, nested scripts included, in tree-sitter's
/// progress reports (one per 100 parser operations). Work, not time, so the verdict on a
/// command does not depend on how loaded the machine is. Measured in a release build: an
/// ordinary shape costs 10–17 µs per report, so this is 15–25 ms; a 100 000-byte list of
/// words or 1 000 lines of script stay below it.
const PARSE_BUDGET_REPORTS: u32 = 1_500;
/// `|` characters allowed in a source (an upper bound on its pipeline stages, quoted ones
/// included). A long pipeline costs the grammar 30–50 µs per report, so the work budget alone
/// would let one run to 70 ms; 1 500 stages parse in about 10 ms.
const MAX_PIPE_CHARACTERS: usize = 1_500;
/// Path-like words resolved per command line; a line with more needs full access (each
/// costs the permission check a few system calls).
const MAX_PATH_WORDS: usize = 256;
/// Analyses remembered per thread.
const CACHE_ENTRIES: usize = 16;

thread_local! {
    static PARSER: RefCell<Option<Parser>> = const { RefCell::new(None) };
    /// What is left of [`PARSE_BUDGET_REPORTS`] for the command line being analysed.
    static PARSE_WORK_LEFT: Cell<u32> = const { Cell::new(0) };
    static CACHE: RefCell<Vec<(String, Analysis)>> = const { RefCell::new(Vec::new()) };
}

/// The verdict alone, for the tables.
#[cfg(test)]
fn classify(command: &str) -> Result<Classification, String> {
    analyze(command).map(|analysis| analysis.classification)
}

/// Classifies a command line and lists the words that may name files outside the shell's
/// directory. `Err` means the classifier failed (the parser could not be set up, or the line
/// is over the parse budget); a command that does not parse is `Ok` with the fail-closed
/// verdict.
pub fn analyze(command: &str) -> Result<Analysis, String> {
    let cached = CACHE.with(|cache| {
        cache
            .borrow()
            .iter()
            .find(|(text, _)| text == command)
            .map(|(_, analysis)| analysis.clone())
    });
    if let Some(analysis) = cached {
        return Ok(analysis);
    }
    PARSE_WORK_LEFT.set(PARSE_BUDGET_REPORTS);
    let analysis = analyze_nested(command, 0)?;
    CACHE.with(|cache| {
        let mut cache = cache.borrow_mut();
        if cache.len() >= CACHE_ENTRIES {
            cache.remove(0);
        }
        cache.push((command.to_owned(), analysis.clone()));
    });
    Ok(analysis)
}

/// Classifies a script found inside another (`bash -c`, `eval`, `trap`). Its paths are not
/// needed: a nested script is never read-only, so it needs full access anyway.
fn classify_nested(source: &str, nesting: usize) -> Result<Classification, String> {
    analyze_nested(source, nesting).map(|analysis| analysis.classification)
}

fn analyze_nested(source: &str, nesting: usize) -> Result<Analysis, String> {
    let fail_closed = Analysis {
        classification: Classification::DESTRUCTIVE,
        paths: Vec::new(),
    };
    if nesting > MAX_NESTING {
        return Ok(fail_closed);
    }
    let tree = parse(source)?;
    let root = tree.root_node();
    if root.has_error() {
        return Ok(fail_closed);
    }
    let mut walker = Walker {
        source: source.as_bytes(),
        nesting,
        verdict: Classification::READ,
        paths: Vec::new(),
    };
    walker.visit(root, 0);
    Ok(Analysis {
        classification: walker.verdict,
        paths: distinct_paths(walker.paths),
    })
}

/// `paths` without repeats; past [`MAX_PATH_WORDS`] the rest is one `Anywhere`.
fn distinct_paths(paths: Vec<PathWord>) -> Vec<PathWord> {
    let mut seen = HashSet::new();
    let mut distinct: Vec<PathWord> = paths
        .into_iter()
        .filter(|path| seen.insert(path.clone()))
        .collect();
    if distinct.len() > MAX_PATH_WORDS {
        let total = distinct.len();
        distinct.truncate(MAX_PATH_WORDS);
        distinct.push(PathWord::Anywhere(format!(
            "{total} path-like words (more than {MAX_PATH_WORDS} are not resolved)"
        )));
    }
    distinct
}

/// Parses with this thread's parser. The borrow ends before the tree is walked, so a nested
/// script can be parsed while its parent's tree is alive. A source with more than
/// [`MAX_PIPE_CHARACTERS`], or a parse that needs more work than is left of
/// [`PARSE_BUDGET_REPORTS`] (a pathological line), is refused with an error, so the caller
/// fails closed instead of holding its thread.
fn parse(source: &str) -> Result<Tree, String> {
    let too_complex = || {
        "the command is too complex to classify (over the parse budget); split it into several calls or put it in a script file".to_owned()
    };
    if source.bytes().filter(|b| *b == b'|').count() > MAX_PIPE_CHARACTERS {
        return Err(too_complex());
    }
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
        let budget = PARSE_WORK_LEFT.get();
        let mut reports = 0_u32;
        let mut over_budget = |_: &ParseState| {
            reports += 1;
            reports > budget
        };
        let tree = parser.parse_with_options(
            &mut |offset, _| bytes.get(offset..).unwrap_or_default(),
            None,
            Some(ParseOptions::new().progress_callback(&mut over_budget)),
        );
        PARSE_WORK_LEFT.set(budget.saturating_sub(reports));
        tree.ok_or_else(|| {
            // An abandoned parse leaves state behind that the next parse must not resume.
            parser.reset();
            too_complex()
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
    paths: Vec<PathWord>,
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
                let mut cursor = node.walk();
                for value in node.children_by_field_name("value", &mut cursor) {
                    let word = self.word(value);
                    path_words::argument(&word, &self.text(value), &mut self.paths);
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
        // Every word as written, the name first, for `cd` targets.
        let mut words = Vec::new();
        let mut cursor = node.walk();
        let mut more = cursor.goto_first_child();
        while more {
            let child = cursor.node();
            if child.is_named() {
                match cursor.field_name() {
                    Some("name") => {
                        let word = self.word(child);
                        words.push((word.clone(), self.text(child)));
                        name = Some(word);
                    }
                    Some("argument") => {
                        let word = self.word(child);
                        let raw = self.text(child);
                        path_words::argument(&word, &raw, &mut self.paths);
                        words.push((word.clone(), raw));
                        arguments.push(word);
                    }
                    _ => {}
                }
                // Substitutions inside the name or the arguments, prefix assignments and
                // redirections are judged on their own.
                self.visit(child, depth + 1);
            }
            more = cursor.goto_next_sibling();
        }
        path_words::directory_change(&words, &mut self.paths);
        let verdict = match name {
            Some(Word::Static(name)) => commands::simple_command(&name, &arguments, self.nesting),
            // `$cmd args`: which program runs is only known at run time.
            Some(Word::Dynamic) | None => Classification::DESTRUCTIVE,
        };
        self.mark(verdict);
    }

    fn file_redirect(&mut self, node: Node<'_>, depth: usize) {
        let operator = operator_of(node, self.source);
        let destination_node = node.child_by_field_name("destination");
        let destination = destination_node.map(|destination| self.word(destination));
        if let (Some(node), Some(word)) = (destination_node, &destination)
            && !duplicates_descriptor(&operator, word)
        {
            path_words::target(word, &self.text(node), &mut self.paths);
        }
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

/// `2>&1`, `<&3`, `3>&-`: the target is a descriptor, not a file.
fn duplicates_descriptor(operator: &str, destination: &Word) -> bool {
    let is_fd = destination
        .text()
        .is_some_and(|t| t == "-" || t.chars().all(|c| c.is_ascii_digit()));
    matches!(operator, "<&" | "<&-") || (matches!(operator, ">&" | ">&-") && is_fd)
}

fn redirect_verdict(operator: &str, destination: Option<&Word>) -> Classification {
    let target = destination.and_then(Word::text);
    let harmless = target.is_some_and(|t| HARMLESS_TARGETS.contains(&t));
    match operator {
        "<" => Classification::READ,
        // Duplicating or closing a descriptor (`2>&1`, `3>&-`); `>& file` is a file write.
        "<&" | "<&-" => Classification::READ,
        ">&" | ">&-" if destination.is_none_or(|d| duplicates_descriptor(operator, d)) => {
            Classification::READ
        }
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
