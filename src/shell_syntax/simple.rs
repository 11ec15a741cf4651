//! The simple commands of a command line, for permission rules (`bash(git status:*)`).
//!
//! The same tree-sitter parse (and the same parse budget) as the classifier, walked for every
//! `command` node: those joined by `&&`, `||`, `;`, `|` and newlines, those inside `$(…)`,
//! `` `…` ``, `<(…)`, subshells, groups, loops and function bodies, and those of a literal
//! nested script (`bash -c '…'`, `sh -c`, `eval '…'`). Each comes with its words (literal
//! values where the word is a literal, its text as written otherwise) and the facts that
//! stop an allow rule from vouching for it: prefix assignments and output redirections to
//! files. Judging the commands against rules is the permission module's business; this file
//! only reads the line.

use tree_sitter::Node;

use super::{Classification, operator_of};
use super::{HARMLESS_TARGETS, MAX_DEPTH, MAX_NESTING, Walker, duplicates_descriptor, parse};

/// One simple command of a command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SimpleCommand {
    /// The name and the arguments: literal values (quotes and escapes removed) where the word
    /// is a literal, the text as written where it is not (`$VAR`, `*.rs`, `$(…)`).
    pub words: Vec<String>,
    /// `FOO=1 cmd`: the environment of the command is changed.
    pub has_assignments: bool,
    /// Output goes to a file (`>`, `>>`, `&>`, `>|`, not `/dev/null` or a descriptor), from
    /// this command or an enclosing group.
    pub writes_file: bool,
}

impl SimpleCommand {
    /// The words joined by single spaces: what rules are matched against.
    pub fn text(&self) -> String {
        self.words.join(" ")
    }
}

/// A command line split into its simple commands, in the order they appear.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CommandLine {
    pub commands: Vec<SimpleCommand>,
    /// The line (or a nested script in it) did not parse cleanly, was over the parse budget or
    /// nested too deeply: `commands` may miss some, so no allow rule can vouch for the line.
    pub incomplete: bool,
}

/// Splits `command` into its simple commands. Never fails: a line that cannot be parsed comes
/// back `incomplete` (with whatever was found).
pub fn simple_commands(command: &str) -> CommandLine {
    super::PARSE_WORK_LEFT.set(super::PARSE_BUDGET_REPORTS);
    let mut line = CommandLine {
        commands: Vec::new(),
        incomplete: false,
    };
    collect(command, 0, &mut line);
    line
}

fn collect(source: &str, nesting: usize, line: &mut CommandLine) {
    if nesting > MAX_NESTING {
        line.incomplete = true;
        return;
    }
    let Ok(tree) = parse(source) else {
        line.incomplete = true;
        return;
    };
    let root = tree.root_node();
    if root.has_error() {
        line.incomplete = true;
    }
    let walker = Walker {
        source: source.as_bytes(),
        nesting,
        verdict: Classification::READ,
        paths: Vec::new(),
    };
    let mut splitter = Splitter {
        walker,
        nesting,
        line,
    };
    splitter.visit(root, 0, false);
}

struct Splitter<'a, 'l> {
    walker: Walker<'a>,
    nesting: usize,
    line: &'l mut CommandLine,
}

impl Splitter<'_, '_> {
    fn visit(&mut self, node: Node<'_>, depth: usize, writes_file: bool) {
        if depth > MAX_DEPTH {
            self.line.incomplete = true;
            return;
        }
        match node.kind() {
            "command" => self.command(node, depth, writes_file),
            "redirected_statement" => {
                let writes = writes_file || self.redirects_output(node);
                self.visit_children(node, depth, writes);
            }
            // `export X=…`, `local`, `declare`, `unset`, a bare `X=…`: they change what later
            // commands do, so they stand as commands of their own that no allow rule vouches
            // for (their words: the text split on whitespace).
            "declaration_command" | "unset_command" | "variable_assignment" => {
                let words = self
                    .walker
                    .text(node)
                    .split_whitespace()
                    .map(str::to_owned)
                    .collect();
                self.line.commands.push(SimpleCommand {
                    words,
                    has_assignments: true,
                    writes_file,
                });
                let mut cursor = node.walk();
                for child in node.named_children(&mut cursor) {
                    // `export A=…`'s assignment is this command, not another one.
                    if child.kind() == "variable_assignment" {
                        self.visit_children(child, depth + 1, false);
                    } else {
                        self.visit(child, depth + 1, false);
                    }
                }
            }
            "comment" => {}
            _ => self.visit_children(node, depth, writes_file),
        }
    }

    fn visit_children(&mut self, node: Node<'_>, depth: usize, writes_file: bool) {
        let mut cursor = node.walk();
        for child in node.named_children(&mut cursor) {
            self.visit(child, depth + 1, writes_file);
        }
    }

    /// Whether one of the statement's own redirections sends output to a file.
    fn redirects_output(&self, node: Node<'_>) -> bool {
        let mut cursor = node.walk();
        node.children_by_field_name("redirect", &mut cursor)
            .filter(|redirect| redirect.kind() == "file_redirect")
            .any(|redirect| {
                let operator = operator_of(redirect, self.walker.source);
                let destination = redirect
                    .child_by_field_name("destination")
                    .map(|d| self.walker.word(d));
                let harmless = destination
                    .as_ref()
                    .and_then(|d| d.text())
                    .is_some_and(|t| HARMLESS_TARGETS.contains(&t));
                let descriptor = destination
                    .as_ref()
                    .is_some_and(|d| duplicates_descriptor(&operator, d));
                !(operator.starts_with('<') || harmless || descriptor)
            })
    }

    fn command(&mut self, node: Node<'_>, depth: usize, writes_file: bool) {
        let mut command = SimpleCommand {
            words: Vec::new(),
            has_assignments: false,
            writes_file,
        };
        let mut cursor = node.walk();
        let mut more = cursor.goto_first_child();
        while more {
            let child = cursor.node();
            if child.is_named() {
                match (cursor.field_name(), child.kind()) {
                    (Some("name" | "argument"), _) => {
                        let value = self.walker.word(child);
                        let text = value
                            .text()
                            .map_or_else(|| self.walker.text(child), str::to_owned);
                        command.words.push(text);
                    }
                    (_, "variable_assignment") => command.has_assignments = true,
                    _ => {}
                }
                // Substitutions inside words, assignments and redirections hold commands too
                // (a prefix assignment is part of this command, not one of its own).
                if child.kind() == "variable_assignment" {
                    self.visit_children(child, depth + 1, false);
                } else {
                    self.visit(child, depth + 1, false);
                }
            }
            more = cursor.goto_next_sibling();
        }
        if let Some(script) = nested_script(&command.words) {
            collect(&script, self.nesting + 1, self.line);
        }
        if !command.words.is_empty() {
            self.line.commands.push(command);
        }
    }
}

/// The script a command runs from a literal argument: `bash -c 'SCRIPT'` (also `sh`, `dash`,
/// `zsh`, `ksh`, flags combined like `-lc`) and `eval 'SCRIPT'`.
fn nested_script(words: &[String]) -> Option<String> {
    let (name, arguments) = words.split_first()?;
    let program = name.rsplit('/').next().unwrap_or(name);
    if program == "eval" {
        return Some(arguments.join(" "));
    }
    if !matches!(program, "bash" | "sh" | "dash" | "zsh" | "ksh") {
        return None;
    }
    let mut rest = arguments.iter();
    while let Some(word) = rest.next() {
        if word.starts_with('-') && !word.starts_with("--") && word.contains('c') {
            return rest.next().cloned();
        }
        if !word.starts_with('-') {
            return None;
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    fn texts(command: &str) -> Vec<String> {
        simple_commands(command)
            .commands
            .iter()
            .map(SimpleCommand::text)
            .collect()
    }

    #[test]
    fn compound_lines_split_into_their_simple_commands() {
        assert_eq!(texts("git status && rm -rf x"), ["git status", "rm -rf x"]);
        assert_eq!(
            texts("git status; curl http://e"),
            ["git status", "curl http://e"]
        );
        assert_eq!(texts("ls | grep 'a b'"), ["ls", "grep a b"]);
        assert_eq!(texts("echo $(rm -rf /)"), ["rm -rf /", "echo $(rm -rf /)"]);
        assert_eq!(
            texts("bash -c 'rm -rf x'"),
            ["rm -rf x", "bash -c rm -rf x"]
        );
        assert_eq!(texts("eval \"rm x\""), ["rm x", "eval rm x"]);
        assert_eq!(texts("f() { rm y; }; f"), ["rm y", "f"]);
    }

    #[test]
    fn assignments_and_redirections_are_reported() {
        let line = simple_commands("FOO=1 git status > out.txt 2>&1");
        assert_eq!(line.commands.len(), 1);
        assert!(line.commands[0].has_assignments && line.commands[0].writes_file);
        let line = simple_commands("git status 2>/dev/null < in");
        assert!(!line.commands[0].writes_file && !line.commands[0].has_assignments);
        let line = simple_commands("{ git status; } >> log");
        assert!(line.commands[0].writes_file);
        assert!(!line.incomplete);
        assert!(simple_commands("git status &&").incomplete);
        let line = simple_commands("export PATH=/x; FOO=$(id) && git status");
        let texts: Vec<String> = line.commands.iter().map(SimpleCommand::text).collect();
        assert_eq!(texts, ["export PATH=/x", "FOO=$(id)", "id", "git status"]);
        assert!(line.commands[0].has_assignments && line.commands[1].has_assignments);
        assert!(!line.commands[3].has_assignments);
    }
}
