//! Which words of a command line may name files beyond the shell's directory: what `bash`
//! resolves to decide whether a read-only command stays inside the workspace.
//!
//! Reported, for every simple command: arguments that are absolute paths, start with `~` or
//! have a `..` component (also as the value of `--opt=VALUE`, `NAME=VALUE` or `-fVALUE`),
//! `cd`/`pushd` targets and redirection targets whatever their form, and `for` loop values.
//! A word whose value is only known at run time is reported as [`PathWord::Anywhere`] when it
//! may lead out: an environment variable (`$HOME/.ssh`), a complex `${…}`, ANSI-C quoting
//! (`$'\057etc'`), a dynamic `..` or `cd` target. Lower-case variables are locals by
//! convention (the words that set them are judged themselves) and command substitutions are
//! judged by the commands inside them.
//!
//! Deliberately not followed: data that becomes a path at run time (piped into `xargs`,
//! printed by a read-only command inside `$(…)`, a path inside a `sed`/`awk` script) and
//! plain relative words that lead out through a symlink. Static analysis cannot confine a
//! shell; the sandbox (`tools/shell/sandbox`) does. Device files (`/dev/null`, …) are not reported.

use super::Word;

/// A word that may name a file outside the shell's directory.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
pub enum PathWord {
    /// A literal path as written; a relative one is relative to the shell's directory.
    Literal(String),
    /// A path only known when the shell runs, which may be anywhere: `~` (HOME is not
    /// expanded here), an environment variable, `cd` without a target, `cd -`.
    Anywhere(String),
}

/// Devices a command may read or write without touching a file of the host.
const DEVICES: &[&str] = &[
    "/dev/null",
    "/dev/zero",
    "/dev/random",
    "/dev/urandom",
    "/dev/stdin",
    "/dev/stdout",
    "/dev/stderr",
    "/dev/tty",
];

/// Characters that make an unquoted word's value a run-time matter.
const DYNAMIC_CHARS: &[char] = &['*', '?', '[', '{', '$', '`'];

/// The paths an argument (or a `for` value) may name. `raw` is the word as written.
pub(crate) fn argument(value: &Word, raw: &str, found: &mut Vec<PathWord>) {
    match value {
        Word::Static(text) => {
            for candidate in candidates(text) {
                if let Some(path) = literal(candidate) {
                    found.push(path);
                }
            }
        }
        Word::Dynamic => {
            if expands_environment(raw) {
                found.push(PathWord::Anywhere(raw.to_owned()));
                return;
            }
            let pattern = unquote(raw);
            for candidate in candidates(&pattern) {
                if let Some(path) = pattern_path(candidate) {
                    found.push(path);
                }
            }
        }
    }
}

/// A `cd`/`pushd` target or a redirection target: a path whatever its form.
pub(crate) fn target(value: &Word, raw: &str, found: &mut Vec<PathWord>) {
    match value {
        Word::Static(text) if text.starts_with('~') => {
            found.push(PathWord::Anywhere(text.clone()));
        }
        Word::Static(text) if text.is_empty() || DEVICES.contains(&text.as_str()) => {}
        Word::Static(text) => found.push(PathWord::Literal(text.clone())),
        Word::Dynamic => found.push(PathWord::Anywhere(raw.to_owned())),
    }
}

/// The targets of `cd`/`pushd` in `words` (the command name first), looking through
/// `builtin` and `command`, which run the builtin. Empty for any other command.
pub(crate) fn directory_change(words: &[(Word, String)], found: &mut Vec<PathWord>) {
    let mut rest = words;
    while let Some(((Word::Static(name), _), tail)) = rest.split_first()
        && (name == "builtin" || name == "command")
    {
        rest = tail;
    }
    let Some(((Word::Static(name), _), operands)) = rest.split_first() else {
        return;
    };
    let pushd = match name.as_str() {
        "cd" => false,
        "pushd" => true,
        _ => return,
    };
    let mut targets = 0;
    let mut options_done = false;
    for (value, raw) in operands {
        let text = value.text();
        if !options_done && text == Some("--") {
            options_done = true;
            continue;
        }
        let stack_position = pushd && text.is_some_and(is_stack_position);
        let option = text.is_some_and(|t| t.starts_with('-') && t != "-");
        if option && !options_done && !stack_position {
            continue;
        }
        targets += 1;
        match text {
            // `cd -` goes to $OLDPWD, which may be inherited from the daemon.
            Some("-") if !pushd => found.push(PathWord::Anywhere("-".to_owned())),
            // `pushd +N`/`-N` rotate the stack, which holds only what this line pushed.
            _ if stack_position => {}
            _ => target(value, raw, found),
        }
    }
    if targets == 0 && !pushd {
        // `cd` alone goes to $HOME.
        found.push(PathWord::Anywhere("~".to_owned()));
    }
}

fn is_stack_position(text: &str) -> bool {
    text.strip_prefix(['+', '-'])
        .is_some_and(|n| !n.is_empty() && n.chars().all(|c| c.is_ascii_digit()))
}

/// The word itself, the value after the first `=`, and the value attached to a short option
/// (`-f/etc/x`).
fn candidates(text: &str) -> Vec<&str> {
    let mut found = vec![text];
    if let Some((_, value)) = text.split_once('=') {
        found.push(value);
    }
    if let Some(attached) = text.strip_prefix('-').filter(|t| !t.starts_with('-'))
        && let Some(first) = attached.chars().next()
    {
        found.push(&attached[first.len_utf8()..]);
    }
    found
}

/// A literal word that is a path leaving (or that may leave) the shell's directory.
fn literal(text: &str) -> Option<PathWord> {
    if DEVICES.contains(&text) {
        None
    } else if text.starts_with('~') {
        Some(PathWord::Anywhere(text.to_owned()))
    } else if text.starts_with('/') || has_parent_component(text) {
        Some(PathWord::Literal(text.to_owned()))
    } else {
        None
    }
}

/// A word with globs or braces: an absolute one is judged by the directory before its first
/// pattern character; a `..` or `~` may lead anywhere.
fn pattern_path(pattern: &str) -> Option<PathWord> {
    if pattern.starts_with('~') || has_parent_component(pattern) {
        return Some(PathWord::Anywhere(pattern.to_owned()));
    }
    if !pattern.starts_with('/') {
        return None;
    }
    let dynamic_at = pattern.find(DYNAMIC_CHARS).unwrap_or(pattern.len());
    let directory_end = pattern[..dynamic_at].rfind('/').map_or(1, |at| at.max(1));
    Some(PathWord::Literal(pattern[..directory_end].to_owned()))
}

fn has_parent_component(text: &str) -> bool {
    text.split('/').any(|component| component == "..")
}

/// Whether `raw` expands something that may hold any path: a variable whose name is not all
/// lower case (the environment's), a `${…}` other than a plain `${name}`, or `$'…'`.
fn expands_environment(raw: &str) -> bool {
    let bytes = raw.as_bytes();
    let is_name = |b: u8| b.is_ascii_alphanumeric() || b == b'_';
    let mut at = 0;
    while let Some(offset) = raw[at..].find('$') {
        at += offset + 1;
        match bytes.get(at) {
            Some(b'\'') => return true,
            Some(b'{') => {
                let start = at + 1;
                let end = start + raw[start..].bytes().take_while(|b| is_name(*b)).count();
                let name = &raw[start..end];
                let plain = bytes.get(end) == Some(&b'}') && !name.is_empty();
                if !plain || is_environment_name(name) {
                    return true;
                }
            }
            Some(b) if b.is_ascii_alphabetic() || *b == b'_' => {
                let end = at + raw[at..].bytes().take_while(|b| is_name(*b)).count();
                if is_environment_name(&raw[at..end]) {
                    return true;
                }
            }
            // `$(…)` and `$((…))` are judged by what they contain; `$1`, `$@`, `$$`, `$?`
            // are this shell's own.
            _ => {}
        }
    }
    false
}

/// Names with an upper-case letter are the environment's by convention (`HOME`, `PWD`).
fn is_environment_name(name: &str) -> bool {
    !name.starts_with(|c: char| c.is_ascii_digit()) && name.chars().any(|c| c.is_ascii_uppercase())
}

/// `raw` without quote characters and backslashes: the shape the shell expands.
fn unquote(raw: &str) -> String {
    raw.chars()
        .filter(|c| !matches!(c, '"' | '\'' | '\\'))
        .collect()
}
