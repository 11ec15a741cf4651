//! Text as the file tools see it: binary detection, UTF-8, line endings, and `cat -n`
//! numbering of a window of lines, streamed so that a large file is never held whole.
//!
//! A file is binary when its first 8 KiB hold a NUL byte (git's and ripgrep's rule). Lines are
//! split on `\n`; a `\r` before it is a CRLF ending and is not shown. A line over
//! [`MAX_LINE_CHARS`] characters is cut with a marker, and the numbered output stops before it
//! would pass [`MAX_OUTPUT_BYTES`], so what a model gets back is bounded by construction.

use std::borrow::Cow;
use std::fmt::Write as _;
use std::io::{self, Read};
use std::path::Path;

use tokio_util::sync::CancellationToken;
use xxhash_rust::xxh3::{Xxh3, xxh3_128};

use crate::tool::ToolError;

/// Characters of one line shown before it is cut.
pub const MAX_LINE_CHARS: usize = 2_000;
/// Bytes of numbered output at most (about 25 000 tokens).
pub const MAX_OUTPUT_BYTES: usize = 100_000;
/// The prefix of a file inspected for NUL bytes.
const BINARY_PROBE_BYTES: usize = 8_192;
/// Bytes read at a time while streaming.
const CHUNK_BYTES: usize = 64 * 1024;

/// Whether `bytes` (the start of a file) look binary.
pub fn looks_binary(bytes: &[u8]) -> bool {
    has_nul(&bytes[..bytes.len().min(BINARY_PROBE_BYTES)])
}

/// Whether `bytes` hold a NUL byte (memchr: vectorised).
fn has_nul(bytes: &[u8]) -> bool {
    memchr::memchr(0, bytes).is_some()
}

/// `bytes` as text a tool may change: not binary, valid UTF-8.
pub fn as_text<'a>(bytes: &'a [u8], path: &Path) -> Result<&'a str, ToolError> {
    if looks_binary(bytes) {
        return Err(ToolError::Validation(format!(
            "\"{}\" is a binary file; only text files can be changed with this tool",
            path.display()
        )));
    }
    std::str::from_utf8(bytes).map_err(|err| {
        ToolError::Validation(format!(
            "\"{}\" is not valid UTF-8 (the first invalid byte is at offset {}); only UTF-8 text can be changed with this tool",
            path.display(),
            err.valid_up_to()
        ))
    })
}

/// A file's line-ending convention.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LineEnding {
    Lf,
    CrLf,
}

impl LineEnding {
    /// The dominant ending of `text`, or `None` when it has no line break.
    pub fn detect(text: &str) -> Option<LineEnding> {
        let all = text.bytes().filter(|&b| b == b'\n').count();
        if all == 0 {
            return None;
        }
        let crlf = text.matches("\r\n").count();
        Some(if crlf * 2 > all {
            LineEnding::CrLf
        } else {
            LineEnding::Lf
        })
    }

    pub fn as_str(self) -> &'static str {
        match self {
            LineEnding::Lf => "\n",
            LineEnding::CrLf => "\r\n",
        }
    }

    /// `text` with every line break (`\n` or `\r\n`) written in this convention.
    pub fn apply(self, text: &str) -> Cow<'_, str> {
        match self {
            LineEnding::Lf if text.contains("\r\n") => Cow::Owned(text.replace("\r\n", "\n")),
            LineEnding::CrLf if text.contains('\n') => {
                Cow::Owned(text.replace("\r\n", "\n").replace('\n', "\r\n"))
            }
            _ => Cow::Borrowed(text),
        }
    }
}

/// Which lines to number: from `first` (1-based), at most `max_lines` of them.
#[derive(Clone, Copy, Debug)]
pub struct Window {
    pub first: usize,
    pub max_lines: Option<usize>,
}

impl Window {
    fn contains(&self, line: usize) -> bool {
        line >= self.first && self.max_lines.is_none_or(|max| line - self.first < max)
    }
}

/// A numbered window of a file, with what is needed to record the read.
#[derive(Debug, Default)]
pub struct Numbered {
    /// `cat -n` lines, each ending in `\n`.
    pub text: String,
    /// First and last line shown (both 0 when none was).
    pub first_shown: usize,
    pub last_shown: usize,
    pub total_lines: usize,
    /// Lines cut at [`MAX_LINE_CHARS`].
    pub lines_cut: usize,
    /// The output stopped at [`MAX_OUTPUT_BYTES`] before the window ended.
    pub output_capped: bool,
    /// Some shown bytes were not UTF-8 and show as U+FFFD.
    pub lossy: bool,
    pub size: u64,
    pub content_hash: String,
}

impl Numbered {
    /// Whether the model saw less than the whole file.
    pub fn partial(&self) -> bool {
        self.first_shown > 1 || self.last_shown < self.total_lines || self.lines_cut > 0
    }
}

/// Why a file could not be numbered.
#[derive(Debug)]
pub enum NumberError {
    Binary,
    Cancelled,
    Io(io::Error),
}

/// Reads `reader` to the end, hashing all of it and numbering the lines in `window`.
/// `size_hint` (the file's size) only sizes the read buffer.
pub fn number_lines(
    mut reader: impl Read,
    size_hint: u64,
    window: Window,
    cancel: &CancellationToken,
) -> Result<Numbered, NumberError> {
    // One byte more than the file, so a small file takes one read and one end-of-file read.
    let buffer_bytes = usize::try_from(size_hint.saturating_add(1))
        .unwrap_or(CHUNK_BYTES)
        .clamp(512, CHUNK_BYTES);
    let mut buffer = vec![0u8; buffer_bytes];
    let mut numberer = Numberer::new(window, buffer_bytes);
    let mut hasher = Xxh3::new();
    let mut probed = 0usize;
    loop {
        let read = match reader.read(&mut buffer) {
            Ok(0) => break,
            Ok(read) => read,
            Err(err) if err.kind() == io::ErrorKind::Interrupted => continue,
            Err(err) => return Err(NumberError::Io(err)),
        };
        let chunk = &buffer[..read];
        if probed < BINARY_PROBE_BYTES {
            let probe = &chunk[..chunk.len().min(BINARY_PROBE_BYTES - probed)];
            if has_nul(probe) {
                return Err(NumberError::Binary);
            }
            probed += probe.len();
        }
        hasher.update(chunk);
        numberer.out.size += read as u64;
        numberer.feed_chunk(chunk);
        if cancel.is_cancelled() {
            return Err(NumberError::Cancelled);
        }
    }
    Ok(numberer.finish(hasher.digest128()))
}

/// [`number_lines`] of a whole file already in memory (a small file read from the page
/// cache): one pass over `bytes`, no copy, and a one-shot hash.
pub fn number_bytes(bytes: &[u8], window: Window) -> Result<Numbered, NumberError> {
    if looks_binary(bytes) {
        return Err(NumberError::Binary);
    }
    let mut numberer = Numberer::new(window, bytes.len());
    numberer.out.size = bytes.len() as u64;
    // Checked as UTF-8 once here rather than line by line.
    numberer.feed_lines(bytes, std::str::from_utf8(bytes).ok());
    Ok(numberer.finish(xxh3_128(bytes)))
}

/// Streaming line assembly for [`number_lines`] and [`number_bytes`].
struct Numberer {
    window: Window,
    out: Numbered,
    /// The current line's number (1-based).
    line: usize,
    /// The start of a line that spans chunks, kept only while it is in the window. A line
    /// that ends in the chunk it starts in is shown straight from the chunk.
    kept: Vec<u8>,
    /// Bytes of the current line so far.
    line_bytes: usize,
    /// Characters (UTF-8 lead bytes) of the current line beyond what `kept` holds.
    chars_beyond_kept: usize,
    last_byte: Option<u8>,
    /// Set once the output cap is reached: later lines are counted, not shown.
    stopped: bool,
}

/// Bytes of a line kept: enough for [`MAX_LINE_CHARS`] characters of any width, plus `\r`.
const KEPT_BYTES: usize = MAX_LINE_CHARS * 4 + 1;

impl Numberer {
    /// A numberer whose output has room for a numbered copy of `expected_bytes` of input.
    fn new(window: Window, expected_bytes: usize) -> Numberer {
        // Each line gains a 7-byte prefix; a quarter more covers lines of 28 bytes or longer.
        let room = expected_bytes + expected_bytes / 4;
        Numberer {
            window,
            out: Numbered {
                text: String::with_capacity(room.min(MAX_OUTPUT_BYTES)),
                ..Numbered::default()
            },
            line: 1,
            kept: Vec::new(),
            line_bytes: 0,
            chars_beyond_kept: 0,
            last_byte: None,
            stopped: false,
        }
    }

    fn feed_chunk(&mut self, chunk: &[u8]) {
        self.feed_lines(chunk, None);
    }

    /// Feeds `chunk`; `text` is the same bytes when they are known to be UTF-8 and start a
    /// line, so that lines taken whole from it need no decoding.
    fn feed_lines(&mut self, chunk: &[u8], text: Option<&str>) {
        let mut start = 0;
        while let Some(end) = find_newline(&chunk[start..]).map(|at| start + at) {
            let line = &chunk[start..end];
            if self.line_bytes == 0 {
                if self.showing() {
                    self.show_whole_line(line, text.and_then(|t| t.get(start..end)));
                }
                self.next_line();
            } else {
                self.feed(line);
                self.end_line();
            }
            start = end + 1;
        }
        self.feed(&chunk[start..]);
    }

    fn showing(&self) -> bool {
        !self.stopped && self.window.contains(self.line)
    }

    /// Adds part of a line that does not end in this chunk.
    fn feed(&mut self, bytes: &[u8]) {
        let Some(&last) = bytes.last() else {
            return;
        };
        self.line_bytes += bytes.len();
        self.last_byte = Some(last);
        if !self.showing() {
            return;
        }
        let room = KEPT_BYTES.saturating_sub(self.kept.len());
        let (kept, beyond) = bytes.split_at(bytes.len().min(room));
        self.kept.extend_from_slice(kept);
        self.chars_beyond_kept += count_chars(beyond);
    }

    /// Ends the line that `feed` assembled.
    fn end_line(&mut self) {
        if self.showing() {
            let kept = std::mem::take(&mut self.kept);
            let carriage_return = self.last_byte == Some(b'\r');
            let line_start = LineStart {
                kept: &kept,
                known: None,
            };
            self.show_line(
                line_start,
                self.line_bytes,
                self.chars_beyond_kept,
                carriage_return,
            );
            // The allocation is reused by the next long line.
            self.kept = kept;
        }
        self.next_line();
    }

    fn next_line(&mut self) {
        self.out.total_lines = self.line;
        self.line += 1;
        self.kept.clear();
        self.line_bytes = 0;
        self.chars_beyond_kept = 0;
        self.last_byte = None;
    }

    /// The numbered hash-stamped result, once the input has ended.
    fn finish(mut self, hash: u128) -> Numbered {
        if self.line_bytes > 0 {
            self.end_line();
        }
        self.out.content_hash = super::state::hash_hex(hash);
        self.out
    }

    /// Shows a line that starts and ends in the chunk being fed; `known` is the same line as
    /// text when the chunk is known to be UTF-8 (line bounds fall after a `\n` or at the
    /// start: character boundaries).
    fn show_whole_line(&mut self, line: &[u8], known: Option<&str>) {
        // The common line: known text, short enough never to be cut, no `\r`.
        if let Some(plain) =
            known.filter(|_| line.len() <= MAX_LINE_CHARS && !line.ends_with(b"\r"))
        {
            self.show_plain_line(plain);
            return;
        }
        let (kept, beyond) = line.split_at(line.len().min(KEPT_BYTES));
        let known = known.filter(|_| beyond.is_empty());
        let carriage_return = line.last() == Some(&b'\r');
        self.show_line(
            LineStart { kept, known },
            line.len(),
            count_chars(beyond),
            carriage_return,
        );
    }

    /// Shows a line known to be text, at most [`MAX_LINE_CHARS`] bytes long (so never cut)
    /// and without a `\r`: what [`Numberer::show_line`] does for such a line, without its
    /// decoding and cutting.
    fn show_plain_line(&mut self, line: &str) {
        let text = &mut self.out.text;
        let before = text.len();
        push_line_number(text, self.line);
        text.push_str(line);
        text.push('\n');
        self.shown(before);
    }

    /// Keeps the line just written after `before` if it fits under [`MAX_OUTPUT_BYTES`], or
    /// takes it back and stops showing.
    fn shown(&mut self, before: usize) {
        if self.out.last_shown > 0 && self.out.text.len() > MAX_OUTPUT_BYTES {
            self.out.text.truncate(before);
            self.stopped = true;
            self.out.output_capped = true;
            return;
        }
        if self.out.first_shown == 0 {
            self.out.first_shown = self.line;
        }
        self.out.last_shown = self.line;
    }

    /// Shows a line of `line_bytes` bytes (ending in `\r` when `carriage_return`) that starts
    /// with `start.kept` (all of it when the two lengths agree), with `chars_beyond`
    /// characters past that.
    fn show_line(
        &mut self,
        start: LineStart<'_>,
        line_bytes: usize,
        chars_beyond: usize,
        carriage_return: bool,
    ) {
        let LineStart {
            mut kept,
            mut known,
        } = start;
        let whole = kept.len() == line_bytes;
        if carriage_return && whole {
            kept = &kept[..kept.len() - 1];
            known = known.and_then(|text| text.strip_suffix('\r'));
        }
        // A line of at most MAX_LINE_CHARS bytes has at most as many characters: only longer
        // ones are counted.
        let body_bytes = line_bytes - usize::from(carriage_return);
        let chars = if body_bytes > MAX_LINE_CHARS {
            // A `\r` past `kept` was counted in `chars_beyond`.
            count_chars(kept) + chars_beyond - usize::from(carriage_return && !whole)
        } else {
            body_bytes
        };
        let decoded = match known.map_or_else(|| std::str::from_utf8(kept), Ok) {
            Ok(valid) => Cow::Borrowed(valid),
            Err(err) => {
                // A cut line may end inside a character; only a bad sequence before that is
                // lossy.
                self.out.lossy |= whole || err.error_len().is_some();
                String::from_utf8_lossy(kept)
            }
        };
        let cut = chars > MAX_LINE_CHARS;
        let shown: Cow<'_, str> = if cut {
            Cow::Owned(decoded.chars().take(MAX_LINE_CHARS).collect())
        } else {
            decoded
        };
        let text = &mut self.out.text;
        let before = text.len();
        push_line_number(text, self.line);
        text.push_str(&shown);
        if cut {
            let _ = write!(
                text,
                "… [line cut: {chars} characters, {MAX_LINE_CHARS} shown]"
            );
        }
        text.push('\n');
        self.shown(before);
        if !self.stopped {
            self.out.lines_cut += usize::from(cut);
        }
    }
}

/// The part of a line that is shown from: its first bytes, and the same as text when they are
/// already known to be UTF-8.
#[derive(Clone, Copy)]
struct LineStart<'a> {
    kept: &'a [u8],
    known: Option<&'a str>,
}

/// Characters in `bytes` counted as UTF-8 lead bytes (a cut character counts where it starts).
fn count_chars(bytes: &[u8]) -> usize {
    bytes.iter().filter(|&&b| b & 0xC0 != 0x80).count()
}

/// The index of the first `\n` in `bytes` (memchr: vectorised, and numbering spends much of
/// its time here).
fn find_newline(bytes: &[u8]) -> Option<usize> {
    memchr::memchr(b'\n', bytes)
}

/// Appends `number` right-aligned in six columns and a tab, as `cat -n` does (`{:>6}\t`
/// without the formatting machinery: this runs once per line shown).
fn push_line_number(text: &mut String, number: usize) {
    const PADDING: &str = "      ";
    let mut digits = itoa::Buffer::new();
    let digits = digits.format(number);
    text.push_str(&PADDING[digits.len().min(PADDING.len())..]);
    text.push_str(digits);
    text.push('\t');
}

/// `cat -n` lines `first..=last` (1-based, clamped) of `text`, for showing an edit in place.
pub fn snippet(text: &str, first: usize, last: usize) -> String {
    let mut out = String::new();
    let last = last.min(line_count(text));
    for (index, line) in text.split('\n').enumerate() {
        let number = index + 1;
        if number < first {
            continue;
        }
        if number > last {
            break;
        }
        let line = line.strip_suffix('\r').unwrap_or(line);
        let shown: Cow<'_, str> = if line.chars().count() > MAX_LINE_CHARS {
            Cow::Owned(format!(
                "{}… [line cut]",
                line.chars().take(MAX_LINE_CHARS).collect::<String>()
            ))
        } else {
            Cow::Borrowed(line)
        };
        let _ = writeln!(out, "{number:>6}\t{shown}");
    }
    out
}

/// The 1-based line of byte offset `at` in `text`.
pub fn line_of(text: &str, at: usize) -> usize {
    text.as_bytes()[..at.min(text.len())]
        .iter()
        .filter(|&&b| b == b'\n')
        .count()
        + 1
}

/// The number of lines of `text` as `cat -n` shows them (a final `\n` ends the last line).
pub fn line_count(text: &str) -> usize {
    if text.is_empty() {
        return 0;
    }
    let breaks = text.bytes().filter(|&b| b == b'\n').count();
    if text.ends_with('\n') {
        breaks
    } else {
        breaks + 1
    }
}

#[cfg(test)]
#[path = "text_tests.rs"]
mod tests;
