//! Command-line options as the classifier reads them: whether a flag is, or may be, present
//! among a command's arguments. Shared by the per-command rules ([`super::commands`],
//! [`super::git`], [`super::text`]), so it sits below all three.

use super::Word;

/// Whether an option (a short letter in a cluster like `-rf`, or a long name, abbreviations
/// included) may be present. A dynamic argument may be anything, so it counts as present.
pub(crate) fn may_have_flag(args: &[Word], short: &str, long: &[&str]) -> bool {
    for arg in args {
        let Some(arg) = arg.text() else { return true };
        if arg == "--" {
            return false;
        }
        if matches_flag(arg, short, long) {
            return true;
        }
    }
    false
}

/// Whether an option is certainly present (literal arguments only).
pub(crate) fn has_flag(args: &[Word], short: &str, long: &[&str]) -> bool {
    args.iter()
        .filter_map(Word::text)
        .take_while(|arg| *arg != "--")
        .any(|arg| matches_flag(arg, short, long))
}

fn matches_flag(arg: &str, short: &str, long: &[&str]) -> bool {
    if let Some(name) = arg.strip_prefix("--") {
        let name = name.split('=').next().unwrap_or_default();
        // getopt accepts any unambiguous prefix of a long option (`--out` for `--output`).
        !name.is_empty() && long.iter().any(|l| l.starts_with(name))
    } else if let Some(cluster) = arg.strip_prefix('-') {
        cluster.chars().any(|c| short.contains(c))
    } else {
        false
    }
}
