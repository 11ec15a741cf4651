//! The search behind `grep_search`: ripgrep's walk, ripgrep's searcher, ripgrep's output.
//!
//! A directory is walked in parallel (as `rg` does) and each regular file is searched with a
//! `grep_searcher::Searcher` configured like rg's; a file named directly is searched whatever
//! the ignore rules say. A [`FileSink`] formats each file's results the way rg's printers do
//! with `--no-heading --with-filename` (`path:line:text`, `path-line-text` for context,
//! `--` between groups, `path:count`, one path per file), including rg's handling of binary
//! files: a walked file is dropped at its first NUL byte (a warning follows matches printed
//! before it), a file named directly reports `binary file matches`. The per-file chunks are
//! then sorted by path, which is the order of `rg --sort path`. Every sink counts what it
//! writes against one budget shared by the walk's threads and stops mid-file once the budget
//! is spent or the call is cancelled. Paging and notes for the model are the tool's business
//! ([`super::grep`]), not this file's.

use std::io;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use grep_matcher::{LineTerminator, Matcher};
use grep_regex::RegexMatcher;
use grep_searcher::{
    BinaryDetection, Searcher, SearcherBuilder, Sink, SinkContext, SinkFinish, SinkMatch,
};
use ignore::WalkState;
use ignore::overrides::Override;
use ignore::types::Types;
use tokio_util::sync::CancellationToken;

use super::{SearchRoot, ripgrep_walker, walk_threads};

/// Output collected before the search stops (a pattern like `.` over a large tree would
/// otherwise hold the whole tree in memory). Checked after every line written, so the output
/// ends at most a line (per walking thread) past it.
pub const MAX_COLLECTED_BYTES: usize = 32 * 1024 * 1024;

/// How far past a multi-line match rg lets the regex look when it counts matches again.
const MAX_LOOK_AHEAD: usize = 128;

/// What `grep_search` prints.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum OutputMode {
    /// `rg --files-with-matches`: one path per matching file.
    FilesWithMatches,
    /// `rg --no-heading --with-filename`: the matching lines.
    Content,
    /// `rg --count`: `path:count` per matching file.
    Count,
}

/// A compiled search.
#[derive(Clone, Debug)]
pub struct SearchPlan {
    pub matcher: RegexMatcher,
    pub types: Types,
    pub overrides: Override,
    pub mode: OutputMode,
    pub before_context: usize,
    pub after_context: usize,
    pub line_numbers: bool,
    pub multiline: bool,
}

/// Why a search stopped before the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Stopped {
    Cancelled,
    /// More than [`MAX_COLLECTED_BYTES`] of output.
    OutputCap,
}

/// What a search found, in `rg --sort path` order.
#[derive(Debug, Default)]
pub struct SearchResult {
    /// rg's stdout, byte for byte.
    pub output: Vec<u8>,
    pub files_matched: usize,
    /// Entries that could not be walked or read (rg reports them on stderr).
    pub errors: usize,
    pub stopped: Option<Stopped>,
}

/// Searches `root` (a directory is walked, a file is searched directly).
pub fn run(plan: &SearchPlan, root: &SearchRoot, cancel: &CancellationToken) -> SearchResult {
    run_capped(plan, root, cancel, MAX_COLLECTED_BYTES)
}

/// [`run`] with the output cap as a parameter (tests use a small one).
fn run_capped(
    plan: &SearchPlan,
    root: &SearchRoot,
    cancel: &CancellationToken,
    cap: usize,
) -> SearchResult {
    let collector = Collector::new(cancel.clone(), cap);
    if root.is_dir {
        walk(plan, root, &collector);
    } else {
        // A file named directly is "explicit" to rg: always searched, binary data reported.
        let mut searcher = searcher(plan, BinaryDetection::convert(b'\0'));
        let walked = root.walk_path();
        collector.search(
            plan,
            &mut searcher,
            walked,
            &root.shown_path(walked),
            Source::WholeFile,
        );
    }
    collector.finish(plan)
}

/// The searcher rg builds (`HiArgs::searcher`) for one kind of file.
fn searcher(plan: &SearchPlan, binary: BinaryDetection) -> Searcher {
    let mut builder = SearcherBuilder::new();
    builder
        .line_terminator(LineTerminator::byte(b'\n'))
        .line_number(plan.line_numbers)
        .multi_line(plan.multiline)
        .binary_detection(binary);
    if plan.mode == OutputMode::Content {
        builder
            .before_context(plan.before_context)
            .after_context(plan.after_context);
    }
    builder.build()
}

fn walk(plan: &SearchPlan, root: &SearchRoot, collector: &Collector) {
    let mut builder = ripgrep_walker(root.walk_path(), root.working_directory());
    builder
        .threads(walk_threads())
        .types(plan.types.clone())
        .overrides(plan.overrides.clone());
    builder.build_parallel().run(|| {
        // Walked files are "implicit" to rg: binary ones are skipped at the first NUL.
        let mut searcher = searcher(plan, BinaryDetection::quit(b'\0'));
        Box::new(move |entry| {
            if collector.should_stop() {
                return WalkState::Quit;
            }
            let entry = match entry {
                Ok(entry) => entry,
                Err(_) => {
                    collector.errors.fetch_add(1, Ordering::Relaxed);
                    return WalkState::Continue;
                }
            };
            // Regular files only: symlinks are not followed, directories are walked.
            if entry.file_type().is_some_and(|t| t.is_file()) {
                let shown = root.shown_path(entry.path());
                collector.search(plan, &mut searcher, entry.path(), &shown, Source::Stream);
            }
            WalkState::Continue
        })
    });
}

/// Per-file outputs gathered from the walk's threads, and the budget they share.
struct Collector {
    chunks: Mutex<Vec<(PathBuf, Vec<u8>)>>,
    /// Output written so far by every sink (counted as it is written, not per file).
    bytes: AtomicUsize,
    /// Output allowed before the search stops.
    cap: usize,
    errors: AtomicUsize,
    /// `bytes` passed `cap`.
    full: AtomicBool,
    cancel: CancellationToken,
}

/// How a file's bytes reach the searcher.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Source {
    /// Read in buffers (what rg does for walked files).
    Stream,
    /// The whole file as one slice, as rg's memory map gives it for a file named directly. It
    /// matters for binary files: a slice keeps NUL bytes inside lines, where a stream would
    /// turn them into line breaks. Files over [`MAX_WHOLE_FILE_BYTES`] are streamed.
    WholeFile,
}

/// Largest file read whole for [`Source::WholeFile`].
const MAX_WHOLE_FILE_BYTES: u64 = 64 * 1024 * 1024;

impl Collector {
    fn new(cancel: CancellationToken, cap: usize) -> Collector {
        Collector {
            chunks: Mutex::new(Vec::new()),
            bytes: AtomicUsize::new(0),
            cap,
            errors: AtomicUsize::new(0),
            full: AtomicBool::new(false),
            cancel,
        }
    }

    /// Whether the search must stop: the output passed the cap or the call was cancelled.
    fn should_stop(&self) -> bool {
        self.full.load(Ordering::Relaxed) || self.cancel.is_cancelled()
    }

    /// Counts `written` more bytes of output; whether the search must stop.
    fn spend(&self, written: usize) -> bool {
        if written > 0 && self.bytes.fetch_add(written, Ordering::Relaxed) + written > self.cap {
            self.full.store(true, Ordering::Relaxed);
        }
        self.should_stop()
    }

    /// Searches the file at `path` (what is opened), showing it as `shown`.
    fn search(
        &self,
        plan: &SearchPlan,
        searcher: &mut Searcher,
        path: &Path,
        shown: &Path,
        source: Source,
    ) {
        if self.should_stop() {
            return;
        }
        let mut sink = FileSink::new(plan, shown, self);
        let whole = source == Source::WholeFile
            && std::fs::metadata(path).is_ok_and(|m| m.len() <= MAX_WHOLE_FILE_BYTES);
        let searched = if whole {
            std::fs::read(path)
                .and_then(|bytes| searcher.search_slice(&plan.matcher, &bytes, &mut sink))
        } else {
            searcher.search_path(&plan.matcher, path, &mut sink)
        };
        if searched.is_err() {
            self.errors.fetch_add(1, Ordering::Relaxed);
            return;
        }
        // What `finish` wrote (a summary line, a binary warning) counts too.
        sink.keep_going();
        if sink.out.is_empty() {
            return;
        }
        self.chunks
            .lock()
            .unwrap_or_else(|poisoned| poisoned.into_inner())
            .push((shown.to_path_buf(), sink.out));
    }

    /// Sorts the chunks by path and joins them as rg does: with `--` between files when
    /// context lines are shown.
    fn finish(self, plan: &SearchPlan) -> SearchResult {
        let mut chunks = self
            .chunks
            .into_inner()
            .unwrap_or_else(|poisoned| poisoned.into_inner());
        // `Path` orders component by component, which is the order of a walk that sorts each
        // directory's entries by name (`rg --sort path`).
        chunks.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let separate =
            plan.mode == OutputMode::Content && (plan.before_context > 0 || plan.after_context > 0);
        let mut output = Vec::with_capacity(self.bytes.load(Ordering::Relaxed));
        for (index, (_, chunk)) in chunks.iter().enumerate() {
            if separate && index > 0 {
                output.extend_from_slice(b"--\n");
            }
            output.extend_from_slice(chunk);
        }
        let stopped = if self.cancel.is_cancelled() {
            Some(Stopped::Cancelled)
        } else if self.full.load(Ordering::Relaxed) {
            Some(Stopped::OutputCap)
        } else {
            None
        };
        SearchResult {
            output,
            files_matched: chunks.len(),
            errors: self.errors.load(Ordering::Relaxed),
            stopped,
        }
    }
}

/// One file's results, formatted like rg's standard printer (content) or summary printer
/// (files, count).
struct FileSink<'a> {
    mode: OutputMode,
    matcher: &'a RegexMatcher,
    path: &'a [u8],
    out: Vec<u8>,
    /// How much of `out` has been counted against the collector's budget.
    spent: usize,
    collector: &'a Collector,
    match_count: u64,
    /// Where binary data was first seen (reported through `binary_data`).
    binary_offset: Option<u64>,
}

impl<'a> FileSink<'a> {
    fn new(plan: &'a SearchPlan, path: &'a Path, collector: &'a Collector) -> FileSink<'a> {
        FileSink {
            mode: plan.mode,
            matcher: &plan.matcher,
            path: path.as_os_str().as_bytes(),
            out: Vec::new(),
            spent: 0,
            collector,
            match_count: 0,
            binary_offset: None,
        }
    }

    /// `path<sep>line<sep>text`, the line terminated whether or not the file's last line was.
    fn write_line(&mut self, separator: u8, line_number: Option<u64>, line: &[u8]) {
        self.out.extend_from_slice(self.path);
        self.out.push(separator);
        if let Some(number) = line_number {
            self.out.extend_from_slice(number.to_string().as_bytes());
            self.out.push(separator);
        }
        self.out.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            self.out.push(b'\n');
        }
    }

    /// Counts what was written since the last call; whether the search may go on (the
    /// searcher stops reading the file when a sink method returns `false`).
    fn keep_going(&mut self) -> bool {
        let written = self.out.len() - self.spent;
        self.spent = self.out.len();
        !self.collector.spend(written)
    }

    /// Whether a file named directly has shown binary data: rg then stops printing lines and
    /// says `binary file matches` instead.
    fn converted_binary(&self, searcher: &Searcher) -> bool {
        searcher.binary_detection().convert_byte().is_some() && self.binary_offset.is_some()
    }
}

impl Sink for FileSink<'_> {
    type Error = io::Error;

    fn matched(&mut self, searcher: &Searcher, mat: &SinkMatch<'_>) -> Result<bool, io::Error> {
        match self.mode {
            OutputMode::FilesWithMatches => {
                // One match decides; rg stops reading the file here.
                self.match_count += 1;
                Ok(false)
            }
            OutputMode::Count => {
                self.match_count += matches_in(searcher, self.matcher, mat)?;
                Ok(self.keep_going())
            }
            OutputMode::Content => {
                self.match_count += 1;
                if self.converted_binary(searcher) {
                    return Ok(false);
                }
                let mut number = mat.line_number();
                for line in mat.lines() {
                    self.write_line(b':', number, line);
                    number = number.map(|n| n + 1);
                }
                Ok(self.keep_going())
            }
        }
    }

    fn context(&mut self, searcher: &Searcher, ctx: &SinkContext<'_>) -> Result<bool, io::Error> {
        if self.converted_binary(searcher) {
            return Ok(false);
        }
        self.write_line(b'-', ctx.line_number(), ctx.bytes());
        Ok(self.keep_going())
    }

    fn context_break(&mut self, _searcher: &Searcher) -> Result<bool, io::Error> {
        self.out.extend_from_slice(b"--\n");
        Ok(self.keep_going())
    }

    fn binary_data(&mut self, _searcher: &Searcher, offset: u64) -> Result<bool, io::Error> {
        self.binary_offset = Some(offset);
        Ok(true)
    }

    fn finish(&mut self, searcher: &Searcher, finish: &SinkFinish) -> Result<(), io::Error> {
        let quit_on_binary = searcher.binary_detection().quit_byte().is_some();
        match self.mode {
            OutputMode::Content => {
                if let Some(offset) = self.binary_offset.filter(|_| self.match_count > 0) {
                    let message = if quit_on_binary {
                        "WARNING: stopped searching binary file after match"
                    } else {
                        "binary file matches"
                    };
                    self.out.extend_from_slice(self.path);
                    self.out.extend_from_slice(
                        format!(": {message} (found \"\\0\" byte around offset {offset})\n")
                            .as_bytes(),
                    );
                }
            }
            // rg's summary printer treats "quit at binary data" as a filter: a walked binary
            // file is not listed or counted even if a match came before its NUL byte.
            _ if quit_on_binary && finish.binary_byte_offset().is_some() => {}
            _ if self.match_count == 0 => {}
            OutputMode::FilesWithMatches => {
                self.out.extend_from_slice(self.path);
                self.out.push(b'\n');
            }
            OutputMode::Count => {
                self.out.extend_from_slice(self.path);
                self.out
                    .extend_from_slice(format!(":{}\n", self.match_count).as_bytes());
            }
        }
        Ok(())
    }
}

/// What one reported match adds to `--count`: 1 (a matching line), except when the pattern
/// can match across lines in multi-line mode, where rg counts the matches themselves.
fn matches_in(
    searcher: &Searcher,
    matcher: &RegexMatcher,
    mat: &SinkMatch<'_>,
) -> Result<u64, io::Error> {
    if !searcher.multi_line_with_matcher(matcher) {
        return Ok(1);
    }
    let range = mat.bytes_range_in_buffer();
    let buffer = mat.buffer();
    let end = buffer.len().min(range.end + MAX_LOOK_AHEAD);
    let mut count = 0;
    matcher
        .find_iter_at(&buffer[..end], range.start, |m| {
            if m.start() >= range.end {
                return false;
            }
            count += 1;
            true
        })
        .map_err(|err| io::Error::other(err.to_string()))?;
    Ok(count)
}

#[cfg(test)]
#[path = "grep_engine_tests.rs"]
mod tests;
