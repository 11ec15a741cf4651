//! The exact-string replacement both `edit_file` and `str_replace_based_edit_tool` perform.
//!
//! The match is exact; the only normalisation is of line breaks, because a model writes `\n`
//! whatever the file uses: when the text is not found as given in a CRLF file, it is looked
//! for with CRLF breaks, and the replacement always takes the file's dominant convention. An
//! edit that reaches the end of the file keeps whether the file ended with a line break. A
//! miss names the nearest line of the file; several matches (when only one is allowed) give
//! the count and the lines. Reading and writing the file is the callers' business.

use std::borrow::Cow;
use std::path::Path;

use super::text::{LineEnding, line_of};
use crate::tool::ToolError;

/// How the calling tool names its fields in messages.
#[derive(Clone, Copy, Debug)]
pub struct Wording {
    /// The field holding the text to find (`old_string`, `old_str`).
    pub old_field: &'static str,
    /// What to suggest when the text matches more than once.
    pub several_hint: &'static str,
}

/// The outcome of a replacement.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Replaced {
    pub text: String,
    pub replacements: usize,
    /// The lines of the new text the replacements span (1-based, inclusive).
    pub first_line: usize,
    pub last_line: usize,
}

/// Line numbers listed in a "several matches" message before "…".
const LISTED_LINES: usize = 20;
/// Lines of the file compared when looking for the nearest line.
const NEAREST_SCAN_LINES: usize = 20_000;
/// Characters of a line compared when looking for the nearest line.
const NEAREST_LINE_CHARS: usize = 300;
/// Similarity (0..1) below which no line is offered as "nearest".
const NEAREST_CUTOFF: f32 = 0.5;

/// Replaces `old` (non-empty) by `new` in `content`: exactly one match, or every match when
/// `replace_all`.
pub fn replace(
    content: &str,
    old: &str,
    new: &str,
    replace_all: bool,
    wording: Wording,
    path: &Path,
) -> Result<Replaced, ToolError> {
    let ending = LineEnding::detect(content);
    let mut target: Cow<'_, str> = Cow::Borrowed(old);
    let mut starts = match_starts(content, &target);
    if starts.is_empty()
        && let Some(ending) = ending
    {
        let converted = ending.apply(old);
        if converted != old {
            starts = match_starts(content, &converted);
            target = converted;
        }
    }
    if starts.is_empty() {
        return Err(not_found(content, old, wording, path));
    }
    if starts.len() > 1 && !replace_all {
        return Err(several(content, &starts, wording, path));
    }
    let new = match ending {
        Some(ending) => ending.apply(new),
        None => Cow::Borrowed(new),
    };
    let mut text = String::with_capacity(content.len() + starts.len() * new.len());
    let mut copied = 0;
    let mut first_offset = 0;
    for (index, &start) in starts.iter().enumerate() {
        text.push_str(&content[copied..start]);
        if index == 0 {
            first_offset = text.len();
        }
        text.push_str(&new);
        copied = start + target.len();
    }
    let last_end = text.len();
    text.push_str(&content[copied..]);
    if copied == content.len() {
        keep_final_break(content, &mut text, ending);
    }
    let first_line = line_of(&text, first_offset);
    // The last line the replacement text occupies (a trailing break ends it, not the next).
    let last_line = line_of(&text, last_end.saturating_sub(1)).max(first_line);
    Ok(Replaced {
        text,
        replacements: starts.len(),
        first_line,
        last_line,
    })
}

/// Byte offsets of the non-overlapping matches of `target`.
fn match_starts(content: &str, target: &str) -> Vec<usize> {
    content.match_indices(target).map(|(at, _)| at).collect()
}

/// After an edit that reached the end of the file: the file ends with a line break exactly
/// when it did before (an emptied file stays empty).
fn keep_final_break(before: &str, after: &mut String, ending: Option<LineEnding>) {
    let had = before.ends_with('\n');
    let has = after.ends_with('\n');
    if had && !has && !after.is_empty() {
        after.push_str(ending.unwrap_or(LineEnding::Lf).as_str());
    } else if !had && has {
        after.pop();
        if after.ends_with('\r') {
            after.pop();
        }
    }
}

fn not_found(content: &str, old: &str, wording: Wording, path: &Path) -> ToolError {
    let mut message = format!(
        "{} was not found in \"{}\"; it must match the file exactly, including whitespace and indentation",
        wording.old_field,
        path.display()
    );
    match nearest_line(content, old) {
        Some((number, line)) => {
            let shown: String = line.chars().take(NEAREST_LINE_CHARS).collect();
            message.push_str(&format!(
                ". The nearest matching line is line {number}: \"{shown}\""
            ));
        }
        None if content.is_empty() => message.push_str(". The file is empty"),
        None => message.push_str(". No line of the file is close to it; read the file again"),
    }
    ToolError::Validation(message)
}

fn several(content: &str, starts: &[usize], wording: Wording, path: &Path) -> ToolError {
    let mut lines: Vec<String> = starts
        .iter()
        .take(LISTED_LINES)
        .map(|&at| line_of(content, at).to_string())
        .collect();
    if starts.len() > LISTED_LINES {
        lines.push("…".into());
    }
    ToolError::Validation(format!(
        "{} matches {} times in \"{}\" (at lines {}); {}",
        wording.old_field,
        starts.len(),
        path.display(),
        lines.join(", "),
        wording.several_hint
    ))
}

/// The line of `content` most like the first line of `old` that the file does not contain
/// verbatim (or its first line when each line is there and only their combination is not).
fn nearest_line<'a>(content: &'a str, old: &str) -> Option<(usize, &'a str)> {
    let probes: Vec<&str> = old
        .lines()
        .map(str::trim)
        .filter(|line| !line.is_empty())
        .collect();
    let probe = probes
        .iter()
        .find(|line| !content.contains(**line))
        .or(probes.first())?;
    let probe = clip(probe);
    let lines: Vec<&str> = content
        .lines()
        .take(NEAREST_SCAN_LINES)
        .map(|line| clip(line.trim()))
        .collect();
    // Whitespace is the most common miss; an exact trimmed match beats any ratio.
    if let Some(index) = lines.iter().position(|line| *line == probe) {
        return Some((index + 1, content.lines().nth(index)?));
    }
    let best = similar::get_close_matches(probe, &lines, 1, NEAREST_CUTOFF);
    let best = best.first()?;
    let index = lines
        .iter()
        .position(|line| std::ptr::eq(line.as_ptr(), best.as_ptr()))?;
    Some((index + 1, content.lines().nth(index)?))
}

/// At most [`NEAREST_LINE_CHARS`] characters of `line`, borrowed from it.
fn clip(line: &str) -> &str {
    match line.char_indices().nth(NEAREST_LINE_CHARS) {
        Some((at, _)) => &line[..at],
        None => line,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const WORDING: Wording = Wording {
        old_field: "old_string",
        several_hint: "add context",
    };

    fn run(content: &str, old: &str, new: &str, all: bool) -> Result<Replaced, String> {
        replace(content, old, new, all, WORDING, Path::new("/f")).map_err(|e| e.to_string())
    }

    #[test]
    fn replacements_and_their_lines() {
        let done = run("a\nb\nc\n", "b", "x\ny", false).unwrap();
        assert_eq!(done.text, "a\nx\ny\nc\n");
        assert_eq!((done.first_line, done.last_line), (2, 3));
        let all = run("x1 x2\nx3\n", "x", "y", true).unwrap();
        assert_eq!(all.text, "y1 y2\ny3\n");
        assert_eq!((all.replacements, all.first_line, all.last_line), (3, 1, 2));
    }

    #[test]
    fn crlf_is_matched_and_kept() {
        let done = run("a\r\nb\r\nc\r\n", "a\nb", "A\nB\nB2", false).unwrap();
        assert_eq!(done.text, "A\r\nB\r\nB2\r\nc\r\n");
    }

    #[test]
    fn the_final_break_is_kept_either_way() {
        assert_eq!(run("a\nb\n", "b\n", "c", false).unwrap().text, "a\nc\n");
        assert_eq!(run("a\nb", "b", "c\n", false).unwrap().text, "a\nc");
        assert_eq!(
            run("a\r\nb\r\n", "b\r\n", "c", false).unwrap().text,
            "a\r\nc\r\n"
        );
        assert_eq!(run("a\n", "a\n", "", false).unwrap().text, "");
    }

    #[test]
    fn misses_name_the_nearest_line() {
        let err = run("fn main() {\n    let x = 1;\n}\n", "let x = 2;", "y", false).unwrap_err();
        assert!(err.contains("line 2: \"    let x = 1;\""), "{err}");
        let err = run("alpha\nbeta\n", "zzzzzz", "y", false).unwrap_err();
        assert!(err.contains("No line of the file is close"), "{err}");
        let err = run("a\nb\na\n", "a", "y", false).unwrap_err();
        assert!(
            err.contains("matches 2 times") && err.contains("lines 1, 3"),
            "{err}"
        );
    }
}
