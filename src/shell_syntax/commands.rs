//! Simple commands: the verdict for one command name and its arguments.
//!
//! A command is read-only only when it is on the list below and none of its arguments can turn
//! it into a writer (`sort -o`, `find -delete`, `tree -o`). Wrappers (`sudo`, `timeout`,
//! `xargs`, `env`, `bash -c`, `eval`, `find -exec`) are judged by what they wrap. Every name not
//! listed is destructive: the classifier only calls something harmless when it knows it is.
//! `git` lives in [`super::git`], `sed` and `awk` scripts in [`super::text`].

use super::flags::{has_flag, may_have_flag};
use super::{Classification, Word, classify_nested, git, is_risky_variable, loop_variable, text};

const READ: Classification = Classification::READ;
const WRITE: Classification = Classification::WRITE;
const DESTRUCTIVE: Classification = Classification::DESTRUCTIVE;

/// The verdict for `name args…`. `nesting` counts the scripts this command sits inside.
pub(crate) fn simple_command(name: &str, args: &[Word], nesting: usize) -> Classification {
    match name {
        // Print, compare, search or summarise: no option of these writes a file, runs another
        // program or changes the shell.
        "cat" | "head" | "tail" | "wc" | "grep" | "egrep" | "fgrep" | "pwd" | "echo" | "which"
        | "type" | "whoami" | "id" | "groups" | "uname" | "stat" | "du" | "df" | "cut" | "tr"
        | "diff" | "cmp" | "comm" | "basename" | "dirname" | "realpath" | "readlink" | "true"
        | "false" | ":" | "test" | "[" | "sleep" | "nl" | "tac" | "rev" | "od" | "hexdump"
        | "seq" | "expr" | "printenv" | "column" | "fold" | "fmt" | "paste" | "join" | "expand"
        | "unexpand" | "strings" | "md5sum" | "sha1sum" | "sha224sum" | "sha256sum"
        | "sha384sum" | "sha512sum" | "b2sum" | "cksum" | "jq" | "whereis" | "nproc" | "free"
        | "uptime" | "ps" | "pgrep" | "arch" | "locale" | "tty" | "ls" | "exit" | "wait"
        | "getconf" => READ,
        "cd" | "pushd" | "popd" => Classification::CHANGES_CWD,
        // Read-only unless given the option that writes (or sets a variable).
        "printf" => forbid(args, "v", &[]),
        "date" => forbid(args, "s", &["set"]),
        "file" => forbid(args, "C", &["compile"]),
        "tree" => forbid(args, "o", &[]),
        "sort" => forbid(args, "o", &["output", "compress-program"]),
        "rg" => forbid(args, "", &["pre"]),
        "fd" | "fdfind" => forbid(args, "xX", &["exec", "exec-batch"]),
        "uniq" => uniq(args),
        "hostname" | "alias" if args.is_empty() => READ,
        "set" => set(args),
        "read" => read(args),
        "find" => find(args, nesting),
        "sed" => text::sed(args),
        "awk" | "gawk" | "mawk" | "nawk" => text::awk(args),
        "git" => git::git(args),
        "xargs" => xargs(args, nesting),
        "env" => env(args, nesting),
        // Wrappers that run their command with other limits: the command decides.
        "timeout" => wrapper(args, "sk", &["signal", "kill-after"], 1, nesting),
        "nice" => wrapper(args, "n", &["adjustment"], 0, nesting),
        "nohup" | "builtin" => wrapper(args, "", &[], 0, nesting),
        "stdbuf" => wrapper(args, "ioe", &["input", "output", "error"], 0, nesting),
        "time" => time(args, nesting),
        "command" => command(args, nesting),
        // Same command, more power, or a shell replaced: never read-only.
        "sudo" | "doas" => {
            wrapper(args, "ugCDhpRrtTU", &["user", "group"], 0, nesting).not_read_only()
        }
        "exec" => wrapper(args, "a", &[], 0, nesting).not_read_only(),
        "bash" | "sh" | "dash" | "zsh" | "ksh" => shell(args, nesting),
        "eval" => eval(args, nesting),
        "trap" => trap(args, nesting),
        "export" | "declare" | "local" | "readonly" | "typeset" | "unset" | "shopt" => WRITE,
        "mkdir" | "touch" => WRITE,
        "cp" | "mv" => no_clobber(args),
        "ln" => escalate(args, "f", &["force"], WRITE),
        "chmod" | "chown" | "chgrp" => escalate(args, "R", &["recursive"], WRITE),
        "tee" => tee(args),
        // Everything else, `rm`, `dd`, `truncate`, `shred`, `kill` and unknown programs
        // included, may destroy data.
        _ => DESTRUCTIVE,
    }
}

/// Read-only unless a writing option may be present; then destructive (the writers these
/// guard against truncate their output file or run a program).
fn forbid(args: &[Word], short: &str, long: &[&str]) -> Classification {
    escalate(args, short, long, READ)
}

/// `base` unless a dangerous option may be present.
fn escalate(args: &[Word], short: &str, long: &[&str], base: Classification) -> Classification {
    if may_have_flag(args, short, long) {
        DESTRUCTIVE
    } else {
        base
    }
}

/// `cp`/`mv` replace their target unless told not to clobber.
fn no_clobber(args: &[Word]) -> Classification {
    let all_literal = args.iter().all(|arg| arg.text().is_some());
    if all_literal && has_flag(args, "n", &["no-clobber"]) && !has_flag(args, "f", &["force"]) {
        WRITE
    } else {
        DESTRUCTIVE
    }
}

/// `uniq IN OUT` writes OUT.
fn uniq(args: &[Word]) -> Classification {
    let mut operands = 0;
    let mut skip_value = false;
    for arg in args {
        let Some(arg) = arg.text() else {
            return DESTRUCTIVE;
        };
        if skip_value {
            skip_value = false;
        } else if matches!(arg, "-f" | "-s" | "-w") {
            skip_value = true;
        } else if arg == "-" || !arg.starts_with('-') {
            operands += 1;
        }
    }
    if operands > 1 { DESTRUCTIVE } else { READ }
}

/// `tee` copies stdin to stdout and to its files.
fn tee(args: &[Word]) -> Classification {
    let mut files = 0;
    for arg in args {
        match arg.text() {
            None => return DESTRUCTIVE,
            Some(arg) if arg.starts_with('-') => {}
            Some(arg) if super::HARMLESS_TARGETS.contains(&arg) => {}
            Some(_) => files += 1,
        }
    }
    if files == 0 {
        READ
    } else if has_flag(args, "a", &["append"]) {
        WRITE
    } else {
        DESTRUCTIVE
    }
}

/// `set -euo pipefail` only changes how this shell reacts to errors; `set -k` would let
/// later arguments become environment assignments.
fn set(args: &[Word]) -> Classification {
    let literal = args.iter().all(|arg| arg.text().is_some());
    let keyword = args.iter().filter_map(Word::text).any(|arg| {
        arg == "keyword"
            || (arg.starts_with('-') || arg.starts_with('+'))
                && !arg.starts_with("--")
                && arg[1..].contains('k')
    });
    if literal && !keyword { READ } else { WRITE }
}

/// `read` assigns variables: judged like a loop variable (an option's value, `-p Prompt`,
/// is judged as a name too, which only errs on the safe side).
fn read(args: &[Word]) -> Classification {
    let mut verdict = READ;
    for arg in args {
        verdict = verdict.and(match arg.text() {
            None => WRITE,
            Some(flag) if flag.starts_with('-') => READ,
            Some(name) => loop_variable(name),
        });
    }
    verdict
}

/// `find` reads, except `-delete`, `-exec`/`-ok` (judged by the command they run, never
/// read-only) and `-fprint*`/`-fls` (which truncate a file).
fn find(args: &[Word], nesting: usize) -> Classification {
    let mut verdict = READ;
    let mut index = 0;
    while index < args.len() {
        // `find . $X` could be `-delete`.
        let Some(arg) = args[index].text() else {
            return DESTRUCTIVE;
        };
        match arg {
            "-delete" | "-fprint" | "-fprint0" | "-fprintf" | "-fls" => {
                verdict = verdict.and(DESTRUCTIVE);
            }
            "-exec" | "-execdir" | "-ok" | "-okdir" => {
                let start = index + 1;
                let end = args[start..]
                    .iter()
                    .position(|w| matches!(w.text(), Some(";" | "+")))
                    .map_or(args.len(), |offset| start + offset);
                verdict = verdict.and(run_with_dynamic(&args[start..end], "{}", nesting));
                index = end;
            }
            _ => {}
        }
        index += 1;
    }
    verdict
}

/// The verdict of a command line `words` whose arguments containing `placeholder` are
/// replaced at run time; never read-only (it runs a program per item).
fn run_with_dynamic(words: &[Word], placeholder: &str, nesting: usize) -> Classification {
    let Some((Word::Static(name), rest)) = words.split_first() else {
        return DESTRUCTIVE;
    };
    let rest: Vec<Word> = rest
        .iter()
        .map(|word| match word.text() {
            Some(text) if !text.contains(placeholder) => word.clone(),
            _ => Word::Dynamic,
        })
        .collect();
    simple_command(name, &rest, nesting).not_read_only()
}

/// Where a wrapper's command starts, after its options and `positionals` leading operands
/// (`timeout 5 cmd`). `Err` when an option is not literal.
fn command_start(
    args: &[Word],
    value_short: &str,
    value_long: &[&str],
    mut positionals: usize,
) -> Result<usize, ()> {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let arg = arg.text().ok_or(())?;
        if arg == "--" {
            return Ok(index + 1);
        }
        if let Some(name) = arg.strip_prefix("--") {
            let takes_value = !name.contains('=') && value_long.contains(&name);
            index += if takes_value { 2 } else { 1 };
        } else if let Some(cluster) = arg.strip_prefix('-').filter(|c| !c.is_empty()) {
            // In `-n5` the value is attached; in `-n 5` it is the next argument.
            let value_at = cluster.find(|c| value_short.contains(c));
            let next_is_value = value_at.is_some_and(|at| at + 1 == cluster.len());
            index += if next_is_value { 2 } else { 1 };
        } else if positionals > 0 {
            positionals -= 1;
            index += 1;
        } else {
            return Ok(index);
        }
    }
    Ok(args.len())
}

/// A wrapper whose verdict is its command's; with no command it does nothing harmful.
fn wrapper(
    args: &[Word],
    value_short: &str,
    value_long: &[&str],
    positionals: usize,
    nesting: usize,
) -> Classification {
    match command_start(args, value_short, value_long, positionals) {
        Ok(start) => wrapped(&args[start..], nesting),
        Err(()) => DESTRUCTIVE,
    }
}

fn wrapped(words: &[Word], nesting: usize) -> Classification {
    match words.split_first() {
        None => READ,
        Some((Word::Static(name), rest)) => simple_command(name, rest, nesting),
        Some((Word::Dynamic, _)) => DESTRUCTIVE,
    }
}

/// `time -p cmd` is the command; GNU time's `-o FILE` writes a file.
fn time(args: &[Word], nesting: usize) -> Classification {
    match command_start(args, "of", &["output", "format"], 0) {
        Ok(start) => {
            let options = &args[..start];
            let only_portable = options.iter().all(|o| o.text() == Some("-p"));
            if only_portable {
                wrapped(&args[start..], nesting)
            } else {
                DESTRUCTIVE
            }
        }
        Err(()) => DESTRUCTIVE,
    }
}

/// `command -v name` looks a name up; `command name args` runs it.
fn command(args: &[Word], nesting: usize) -> Classification {
    match args.first().and_then(Word::text) {
        Some("-v" | "-V") => READ,
        _ => wrapper(args, "", &[], 0, nesting),
    }
}

/// `xargs cmd args` runs `cmd args ITEMS…` with items from stdin: the command must be harmless
/// whatever its extra arguments are.
fn xargs(args: &[Word], nesting: usize) -> Classification {
    let value_long = &[
        "arg-file",
        "delimiter",
        "max-lines",
        "max-args",
        "max-procs",
        "max-chars",
        "process-slot-var",
    ];
    let Ok(start) = command_start(args, "adEILnPs", value_long, 0) else {
        return DESTRUCTIVE;
    };
    let replaces = has_flag(&args[..start], "Ii", &["replace"]);
    let mut words = args[start..].to_vec();
    if replaces {
        // `-I {}`: every argument may be an item.
        for word in words.iter_mut().skip(1) {
            *word = Word::Dynamic;
        }
    }
    words.push(Word::Dynamic);
    match words.first() {
        // Only the pushed item: `xargs` alone runs `echo`.
        Some(Word::Dynamic) if words.len() == 1 => READ,
        _ => wrapped(&words, nesting),
    }
}

/// `env [-i] [-u NAME] [NAME=VALUE…] [cmd args…]`.
fn env(args: &[Word], nesting: usize) -> Classification {
    let Ok(start) = command_start(args, "uC", &["unset", "chdir"], 0) else {
        return DESTRUCTIVE;
    };
    // `-S`/`--split-string` splits a string into a command line at run time.
    if may_have_flag(&args[..start], "S", &["split-string"]) {
        return DESTRUCTIVE;
    }
    let mut verdict = READ;
    let mut index = start;
    while let Some(Word::Static(text)) = args.get(index) {
        let Some((name, _)) = text.split_once('=') else {
            break;
        };
        verdict = verdict.and(if is_risky_variable(name) {
            DESTRUCTIVE
        } else {
            WRITE
        });
        index += 1;
    }
    if index == args.len() {
        // No command: `env` prints the environment.
        return READ;
    }
    wrapped(&args[index..], nesting)
        .and(verdict)
        .not_read_only()
}

/// `bash -c 'script'`: the script decides how destructive; a nested shell is never read-only.
/// Without `-c` it runs a script file (unknown); a login shell reads profile files (unknown).
fn shell(args: &[Word], nesting: usize) -> Classification {
    let mut script = None;
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let Some(arg) = arg.text() else {
            return DESTRUCTIVE;
        };
        match arg {
            "--login" | "--rcfile" | "--init-file" => return DESTRUCTIVE,
            "-o" | "+o" => index += 1,
            _ if arg.starts_with("--") => {}
            _ if arg.starts_with('-') || arg.starts_with('+') => {
                if arg.contains('l') {
                    return DESTRUCTIVE;
                }
                if arg.contains('c') {
                    script = args.get(index + 1).map(|w| w.text().map(str::to_owned));
                    break;
                }
            }
            _ => return DESTRUCTIVE,
        }
        index += 1;
    }
    match script {
        Some(Some(script)) => nested(&script, nesting).not_read_only(),
        _ => DESTRUCTIVE,
    }
}

/// `eval 'words'` runs its arguments, joined by spaces, as a script.
fn eval(args: &[Word], nesting: usize) -> Classification {
    let words: Option<Vec<&str>> = args.iter().map(Word::text).collect();
    match words {
        Some(words) => nested(&words.join(" "), nesting).not_read_only(),
        None => DESTRUCTIVE,
    }
}

/// `trap 'code' SIGNAL…` runs code later; `trap`, `trap -l`, `trap -p` only print.
fn trap(args: &[Word], nesting: usize) -> Classification {
    match args.first() {
        None => READ,
        Some(Word::Static(first)) if first == "-l" || first == "-p" => READ,
        Some(Word::Static(first)) if first == "-" => WRITE,
        Some(Word::Static(code)) => nested(code, nesting).not_read_only(),
        Some(Word::Dynamic) => DESTRUCTIVE,
    }
}

fn nested(script: &str, nesting: usize) -> Classification {
    classify_nested(script, nesting + 1).unwrap_or(DESTRUCTIVE)
}
