//! `git`: read-only subcommands (status, log, diff, show, listing forms of branch and tag, …),
//! writes that keep history (add, commit, fetch, push without force, …), and the ones that
//! can lose work (reset --hard, clean, push --force, checkout of paths, restore, stash drop).
//!
//! Global options that make git load configuration or programs (`-c`, `--exec-path`,
//! `--config-env`) are destructive: a config value can name a program to run.

use super::flags::{has_flag, may_have_flag};
use super::{Classification, Word};

const READ: Classification = Classification::READ;
const WRITE: Classification = Classification::WRITE;
const DESTRUCTIVE: Classification = Classification::DESTRUCTIVE;

pub(crate) fn git(args: &[Word]) -> Classification {
    let mut index = 0;
    while let Some(arg) = args.get(index) {
        let Some(arg) = arg.text() else {
            return DESTRUCTIVE;
        };
        match arg {
            "--version" | "--help" | "-v" | "-h" => return READ,
            "-C" | "--git-dir" | "--work-tree" | "--namespace" => index += 2,
            "--no-pager"
            | "-P"
            | "--paginate"
            | "-p"
            | "--bare"
            | "--no-replace-objects"
            | "--literal-pathspecs"
            | "--glob-pathspecs"
            | "--noglob-pathspecs"
            | "--icase-pathspecs"
            | "--no-optional-locks" => index += 1,
            _ if ["--git-dir=", "--work-tree=", "--namespace="]
                .iter()
                .any(|prefix| arg.starts_with(prefix)) =>
            {
                index += 1;
            }
            // `-c`, `--exec-path`, `--config-env` and anything unknown.
            _ if arg.starts_with('-') => return DESTRUCTIVE,
            _ => break,
        }
    }
    let Some(subcommand) = args.get(index) else {
        // `git` alone prints usage.
        return READ;
    };
    let Some(subcommand) = subcommand.text() else {
        return DESTRUCTIVE;
    };
    subcommand_verdict(subcommand, &args[index + 1..])
}

fn subcommand_verdict(subcommand: &str, rest: &[Word]) -> Classification {
    match subcommand {
        "status" | "rev-parse" | "ls-files" | "ls-tree" | "cat-file" | "blame" | "annotate"
        | "shortlog" | "describe" | "rev-list" | "merge-base" | "name-rev" | "count-objects"
        | "show-ref" | "ls-remote" | "var" | "check-ignore" | "check-attr" | "version"
        | "cherry" | "diff-tree" | "diff-files" | "diff-index" | "for-each-ref" | "whatchanged" => {
            READ
        }
        // `--output=FILE` writes the diff to a file.
        "log" | "diff" | "show" => escalate(rest, "", &["output"], READ),
        // `-O` opens the matches in a pager program.
        "grep" => escalate(rest, "O", &["open-files-in-pager"], READ),
        "branch" => branch(rest),
        "tag" => tag(rest),
        "remote" => remote(rest),
        "config" => config(rest),
        "stash" => stash(rest),
        "worktree" => by_action(
            rest,
            &["list"],
            &["add", "lock", "unlock", "move", "repair"],
        ),
        "submodule" => by_action(
            rest,
            &["status", "summary"],
            &["init", "update", "sync", "add"],
        ),
        "reflog" => by_action(rest, &["show", "exists"], &[]).or_listing(rest),
        "clean" if has_flag(rest, "n", &["dry-run"]) => READ,
        "reset" => escalate(rest, "", &["hard", "merge", "keep"], WRITE),
        "checkout" => checkout(rest),
        "switch" => escalate(
            rest,
            "fC",
            &["force", "discard-changes", "force-create"],
            WRITE,
        ),
        "restore" if has_flag(rest, "S", &["staged"]) && !has_flag(rest, "W", &["worktree"]) => {
            WRITE
        }
        "push" => push(rest),
        "rm" if has_flag(rest, "", &["cached"]) => WRITE,
        "gc" => escalate(rest, "", &["prune"], WRITE),
        "add" | "commit" | "fetch" | "pull" | "merge" | "rebase" | "cherry-pick" | "revert"
        | "am" | "apply" | "init" | "clone" | "mv" | "notes" | "bisect" => WRITE,
        // clean, restore of the worktree, rm, prune, filter-branch, update-ref and anything
        // unknown.
        _ => DESTRUCTIVE,
    }
}

fn escalate(args: &[Word], short: &str, long: &[&str], base: Classification) -> Classification {
    if may_have_flag(args, short, long) {
        DESTRUCTIVE
    } else {
        base
    }
}

/// The positional arguments (literal, not options), or `None` if one is not literal.
fn positionals(args: &[Word]) -> Option<Vec<&str>> {
    let mut found = Vec::new();
    for arg in args {
        let text = arg.text()?;
        if !text.starts_with('-') {
            found.push(text);
        }
    }
    Some(found)
}

/// `git branch` lists; with a name it creates, with `-d`/`-m`/`-c` it deletes, renames or
/// copies. `--list` makes the names patterns.
fn branch(args: &[Word]) -> Classification {
    // `-D`, `-M`, `-C`, `-f` force; `--edit-description` runs an editor.
    if may_have_flag(args, "DMCf", &["force", "edit-description"]) {
        return DESTRUCTIVE;
    }
    let changes = &[
        "delete",
        "move",
        "copy",
        "set-upstream-to",
        "unset-upstream",
        "track",
    ];
    if may_have_flag(args, "dmcut", changes) {
        return WRITE;
    }
    listing(args, LISTING_VALUES)
}

/// Options of `git branch`/`git tag` listings that take a value.
const LISTING_VALUES: &[&str] = &[
    "contains",
    "no-contains",
    "merged",
    "no-merged",
    "points-at",
    "sort",
    "format",
];

/// `git tag` lists; with a name it creates, `-d` deletes, `-f` replaces.
fn tag(args: &[Word]) -> Classification {
    if may_have_flag(args, "df", &["delete", "force"]) {
        return DESTRUCTIVE;
    }
    if may_have_flag(
        args,
        "asumF",
        &["annotate", "sign", "local-user", "message", "file"],
    ) {
        return WRITE;
    }
    listing(args, LISTING_VALUES)
}

/// A listing command: read-only when it has no positional argument except patterns after
/// `--list`/`-l` or values of the options that take one (`--contains X`).
fn listing(args: &[Word], value_options: &[&str]) -> Classification {
    if args.iter().any(|arg| arg.text().is_none()) {
        return DESTRUCTIVE;
    }
    if has_flag(args, "l", &["list"]) {
        return READ;
    }
    let mut index = 0;
    while let Some(arg) = args.get(index).and_then(Word::text) {
        if let Some(name) = arg.strip_prefix("--") {
            if !name.contains('=') && value_options.contains(&name) {
                index += 1;
            }
        } else if !arg.starts_with('-') {
            // A name: creates a branch or tag.
            return WRITE;
        }
        index += 1;
    }
    READ
}

/// `git remote [-v]`, `show`, `get-url` read; `add`, `rename`, `set-url` write; `remove`,
/// `prune` delete.
fn remote(args: &[Word]) -> Classification {
    let Some(positional) = positionals(args) else {
        return DESTRUCTIVE;
    };
    match positional.first().copied() {
        None | Some("show" | "get-url") => READ,
        Some("add" | "rename" | "set-url" | "set-head" | "set-branches" | "update") => WRITE,
        _ => DESTRUCTIVE,
    }
}

/// `git config --get/--list/NAME` reads; `NAME VALUE`, `--add`, `--unset`, `--edit` write.
fn config(args: &[Word]) -> Classification {
    let Some(positional) = positionals(args) else {
        return DESTRUCTIVE;
    };
    if may_have_flag(args, "e", &["edit"]) {
        // Runs an editor.
        return DESTRUCTIVE;
    }
    if may_have_flag(
        args,
        "",
        &["unset", "unset-all", "remove-section", "rename-section"],
    ) {
        return DESTRUCTIVE;
    }
    if may_have_flag(args, "", &["add", "replace-all"]) {
        return WRITE;
    }
    let reads = has_flag(
        args,
        "l",
        &["get", "get-all", "get-regexp", "list", "get-urlmatch"],
    );
    match positional.first().copied() {
        Some("get" | "list") => READ,
        Some("set") => WRITE,
        Some("unset" | "remove-section" | "rename-section" | "edit") => DESTRUCTIVE,
        _ if reads || positional.len() <= 1 => READ,
        _ => WRITE,
    }
}

/// `git stash list/show` read; `push`, `apply`, `pop` write; `drop`, `clear` lose stashes.
fn stash(args: &[Word]) -> Classification {
    match args.first().map(Word::text) {
        None => WRITE,
        Some(None) => DESTRUCTIVE,
        Some(Some("list" | "show")) => READ,
        Some(Some("drop" | "clear")) => DESTRUCTIVE,
        Some(Some("push" | "save" | "apply" | "pop" | "branch" | "create" | "store")) => WRITE,
        Some(Some(flag)) if flag.starts_with('-') => WRITE,
        Some(Some(_)) => DESTRUCTIVE,
    }
}

/// A subcommand with actions: the first positional decides.
fn by_action(args: &[Word], reads: &[&str], writes: &[&str]) -> Classification {
    match args.first().map(Word::text) {
        Some(Some(action)) if reads.contains(&action) => READ,
        Some(Some(action)) if writes.contains(&action) => WRITE,
        _ => DESTRUCTIVE,
    }
}

trait OrListing {
    fn or_listing(self, args: &[Word]) -> Classification;
}

impl OrListing for Classification {
    /// `git reflog` and `git reflog --oneline` list like `reflog show`.
    fn or_listing(self, args: &[Word]) -> Classification {
        let listing = match args.first().map(Word::text) {
            None => true,
            Some(Some(first)) => first.starts_with('-'),
            Some(None) => false,
        };
        if listing { READ } else { self }
    }
}

/// `git checkout -b NAME` creates a branch; any other form may overwrite local changes
/// (`git checkout -- .`, `git checkout FILE`, and a name that is a branch cannot be told
/// from a path without the repository).
fn checkout(args: &[Word]) -> Classification {
    if may_have_flag(args, "fBp", &["force", "patch", "ours", "theirs", "merge"]) {
        return DESTRUCTIVE;
    }
    let creates = has_flag(args, "b", &["orphan"]);
    let paths = args.iter().any(|arg| arg.text() == Some("--"));
    if creates && !paths {
        WRITE
    } else {
        DESTRUCTIVE
    }
}

/// `git push` without force; `--force`, `-f`, `--force-with-lease`, `--delete`, `--mirror`,
/// `--prune` and `+ref`/`:ref` refspecs can drop remote history.
fn push(args: &[Word]) -> Classification {
    let forced = may_have_flag(
        args,
        "fd",
        &[
            "force",
            "force-with-lease",
            "force-if-includes",
            "delete",
            "mirror",
            "prune",
        ],
    );
    let Some(positional) = positionals(args) else {
        return DESTRUCTIVE;
    };
    let forcing_refspec = positional
        .iter()
        .skip(1)
        .any(|refspec| refspec.starts_with('+') || refspec.starts_with(':'));
    if forced || forcing_refspec {
        DESTRUCTIVE
    } else {
        WRITE
    }
}
