//! The short unified diff a write or an edit returns, so the model sees what changed without
//! reading the file again. Bounded: a few dozen lines, each cut to a readable width.

use std::time::Duration;

use similar::TextDiff;

/// Diff lines shown before the rest is summarised.
const MAX_DIFF_LINES: usize = 60;
/// Characters of one diff line shown.
const MAX_DIFF_LINE_CHARS: usize = 300;
/// A diff of pathological inputs gives up (and shows a coarser diff) after this long.
const DIFF_TIMEOUT: Duration = Duration::from_millis(200);

/// A unified diff (3 lines of context) of `before` → `after`, labelled with `label`; empty
/// when nothing changed.
pub fn short_diff(label: &str, before: &str, after: &str) -> String {
    let diff = TextDiff::configure()
        .timeout(DIFF_TIMEOUT)
        .diff_lines(before, after);
    let full = diff
        .unified_diff()
        .context_radius(3)
        .header(&format!("a/{label}"), &format!("b/{label}"))
        .to_string();
    let lines: Vec<&str> = full.lines().collect();
    let mut out = String::new();
    for line in lines.iter().take(MAX_DIFF_LINES) {
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.chars().count() > MAX_DIFF_LINE_CHARS {
            out.extend(line.chars().take(MAX_DIFF_LINE_CHARS));
            out.push_str("…\n");
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if lines.len() > MAX_DIFF_LINES {
        out.push_str(&format!(
            "[diff cut: {} more lines]\n",
            lines.len() - MAX_DIFF_LINES
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_small_change_gives_a_small_diff() {
        let diff = short_diff("f.txt", "a\nb\nc\n", "a\nB\nc\n");
        assert_eq!(
            diff,
            "--- a/f.txt\n+++ b/f.txt\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"
        );
        assert_eq!(short_diff("f", "same\n", "same\n"), "");
    }

    #[test]
    fn a_large_change_is_cut() {
        let before: String = (0..200).map(|i| format!("{i}\n")).collect();
        let diff = short_diff("f", &before, "");
        assert_eq!(diff.lines().count(), MAX_DIFF_LINES + 1);
        assert!(diff.ends_with("[diff cut: 143 more lines]\n"), "{diff}");
    }
}
