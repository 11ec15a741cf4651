//! `sed` and `awk`: read-only only when their scripts, read here, cannot write or run anything.
//!
//! A `sed` script is parsed command by command; only printing, deleting-from-output,
//! substitution without the `w`/`e` flags and the other in-stream commands pass. An `awk`
//! program passes when it has no output redirection, pipe, `system()` or gawk directive. Both
//! are conservative: a script the reader does not understand is destructive.

use super::flags::may_have_flag;
use super::{Classification, Word};

const READ: Classification = Classification::READ;
const DESTRUCTIVE: Classification = Classification::DESTRUCTIVE;

/// `sed [options] script [files]`; `-i` edits files in place.
pub(crate) fn sed(args: &[Word]) -> Classification {
    let mut scripts: Vec<String> = Vec::new();
    let mut script_given = false;
    let mut sandbox = false;
    let mut index = 0;
    while index < args.len() {
        // A `$f` could be `-i`: GNU sed takes options anywhere.
        let Some(arg) = args[index].text() else {
            return DESTRUCTIVE;
        };
        if let Some(long) = arg.strip_prefix("--") {
            let (name, value) = long.split_once('=').unwrap_or((long, ""));
            match () {
                () if name.is_empty() => {}
                () if "in-place".starts_with(name) || "file".starts_with(name) => {
                    return DESTRUCTIVE;
                }
                () if "expression".starts_with(name) => {
                    script_given = true;
                    if long.contains('=') {
                        scripts.push(value.to_owned());
                    } else {
                        index += 1;
                        match args.get(index).and_then(Word::text) {
                            Some(script) => scripts.push(script.to_owned()),
                            None => return DESTRUCTIVE,
                        }
                    }
                }
                () if "sandbox".starts_with(name) => sandbox = true,
                () if "line-length".starts_with(name) && !long.contains('=') => index += 1,
                () => {}
            }
        } else if let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) {
            for (at, flag) in cluster.char_indices() {
                match flag {
                    'i' | 'f' => return DESTRUCTIVE,
                    'e' | 'l' => {
                        let attached = &cluster[at + 1..];
                        let value = if attached.is_empty() {
                            index += 1;
                            match args.get(index).and_then(Word::text) {
                                Some(value) => value.to_owned(),
                                None => return DESTRUCTIVE,
                            }
                        } else {
                            attached.to_owned()
                        };
                        if flag == 'e' {
                            script_given = true;
                            scripts.push(value);
                        }
                        break;
                    }
                    _ => {}
                }
            }
        } else if !script_given {
            script_given = true;
            scripts.push(arg.to_owned());
        }
        index += 1;
    }
    if sandbox || scripts.iter().all(|script| sed_script_is_read_only(script)) {
        READ
    } else {
        DESTRUCTIVE
    }
}

/// Whether a sed script only transforms the stream (no `w`, `W`, `e`, no `s///w` or `s///e`).
pub(crate) fn sed_script_is_read_only(script: &str) -> bool {
    let chars: Vec<char> = script.chars().collect();
    let mut at = 0;
    loop {
        while at < chars.len() && (chars[at].is_whitespace() || chars[at] == ';') {
            at += 1;
        }
        if at >= chars.len() {
            return true;
        }
        let Some(after_address) = skip_addresses(&chars, at) else {
            return false;
        };
        at = after_address;
        while at < chars.len() && (chars[at] == '!' || chars[at] == ' ') {
            at += 1;
        }
        let Some(&command) = chars.get(at) else {
            return false;
        };
        at += 1;
        let next = match command {
            'p' | 'P' | 'd' | 'D' | '=' | 'l' | 'n' | 'N' | 'g' | 'G' | 'h' | 'H' | 'x' | 'z'
            | 'F' | '{' | '}' => Some(at),
            'q' | 'Q' => Some(skip_while(&chars, at, |c| c.is_ascii_digit() || c == ' ')),
            's' => skip_substitution(&chars, at),
            'y' => skip_delimited(&chars, at, 2),
            // Labels, branches, appended text and files read into the stream run to the end
            // of the line.
            ':' | 'b' | 't' | 'T' | 'a' | 'i' | 'c' | 'r' | 'R' => {
                Some(skip_while(&chars, at, |c| c != '\n'))
            }
            _ => None,
        };
        let Some(next) = next else { return false };
        at = skip_while(&chars, next, |c| c == ' ' || c == '\t');
        match chars.get(at) {
            None | Some(';' | '\n' | '}') => {}
            Some(_) => return false,
        }
    }
}

fn skip_while(chars: &[char], mut at: usize, keep: impl Fn(char) -> bool) -> usize {
    while at < chars.len() && keep(chars[at]) {
        at += 1;
    }
    at
}

/// `N`, `$`, `first~step`, `/re/I`, `addr,addr`, `addr,+N`, `addr,~N`.
fn skip_addresses(chars: &[char], at: usize) -> Option<usize> {
    let at = skip_address(chars, at)?;
    if chars.get(at) != Some(&',') {
        return Some(at);
    }
    let at = at + 1;
    match chars.get(at) {
        Some('+' | '~') => Some(skip_while(chars, at + 1, |c| c.is_ascii_digit())),
        _ => skip_address(chars, at),
    }
}

fn skip_address(chars: &[char], at: usize) -> Option<usize> {
    match chars.get(at) {
        Some(c) if c.is_ascii_digit() => {
            let at = skip_while(chars, at, |c| c.is_ascii_digit());
            if chars.get(at) == Some(&'~') {
                Some(skip_while(chars, at + 1, |c| c.is_ascii_digit()))
            } else {
                Some(at)
            }
        }
        Some('$') => Some(at + 1),
        Some('/') => {
            let at = skip_delimited(chars, at, 1)?;
            Some(skip_while(chars, at, |c| c == 'I' || c == 'M'))
        }
        _ => Some(at),
    }
}

/// Skips `count` fields delimited by the character at `at` (`/a/b/` is two fields).
fn skip_delimited(chars: &[char], at: usize, count: usize) -> Option<usize> {
    let delimiter = *chars.get(at)?;
    if delimiter == '\\' || delimiter == '\n' {
        return None;
    }
    let mut at = at + 1;
    for _ in 0..count {
        loop {
            match chars.get(at)? {
                '\\' => at += 2,
                c if *c == delimiter => {
                    at += 1;
                    break;
                }
                _ => at += 1,
            }
        }
    }
    Some(at)
}

/// `s/re/replacement/flags`: flags may not include `w` (write a file) or `e` (execute).
fn skip_substitution(chars: &[char], at: usize) -> Option<usize> {
    let at = skip_delimited(chars, at, 2)?;
    let end = skip_while(chars, at, |c| "gpiImM0123456789".contains(c));
    Some(end)
}

/// `awk [options] 'program' [files]`.
pub(crate) fn awk(args: &[Word]) -> Classification {
    let mut program = None;
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let Some(arg) = arg.text() else {
            return DESTRUCTIVE;
        };
        match arg {
            "--" => {
                program = args.get(index + 1).map(|w| w.text().map(str::to_owned));
                break;
            }
            "-F" | "-v" => index += 1,
            // Program files, includes, extensions: code the classifier cannot see.
            _ if may_have_flag(
                &args[index..=index],
                "fiElh",
                &["file", "include", "load", "exec"],
            ) =>
            {
                return DESTRUCTIVE;
            }
            _ if arg.starts_with("-e") || arg.starts_with("--source") => return DESTRUCTIVE,
            _ if arg.starts_with('-') => {}
            _ => {
                program = Some(Some(arg.to_owned()));
                break;
            }
        }
        index += 1;
    }
    match program {
        Some(Some(program)) if awk_program_is_read_only(&program) => READ,
        None => READ,
        _ => DESTRUCTIVE,
    }
}

/// No `>`/`>>` redirection (comparisons are caught too: conservative), no pipe to or from a
/// command, no `system()`, no gawk `@` directive.
fn awk_program_is_read_only(program: &str) -> bool {
    !(program.contains('>')
        || program.contains('|')
        || program.contains('@')
        || program.contains("system"))
}
