//! `grep_search` (alias `Grep`): regex search over file contents, with ripgrep's semantics.
//!
//! This file owns the tool's face: its spec, reading and checking the input (regex, globs,
//! file type, limits), and turning the engine's rg-identical output into the page the model
//! sees (`head_limit`/`offset` over output lines, a note when lines remain). The walk, the
//! searcher and rg's output format are in [`super::grep_engine`].

use std::path::Path;

use async_trait::async_trait;
use grep_regex::{RegexMatcher, RegexMatcherBuilder};
use ignore::overrides::{Override, OverrideBuilder};
use ignore::types::{Types, TypesBuilder};
use serde_json::{Value, json};

use super::grep_engine::{self, OutputMode, SearchPlan, SearchResult, Stopped};
use super::{build_spec, check_path_syntax, input_count, page, search_flags, search_root};
use crate::registry::{RegistryError, closest};
use crate::tool::{Tool, ToolContext, ToolError, ToolOutput, ToolSpec};

/// Output lines shown when the call gives no `head_limit` (Claude Code's default).
pub const DEFAULT_HEAD_LIMIT: usize = 250;

/// Most context lines on either side of a match.
pub const MAX_CONTEXT: usize = 10_000;

const DESCRIPTION: &str = "\
Searches file contents with a regular expression, built on ripgrep's own libraries and with \
ripgrep's behaviour.

- Regex syntax is ripgrep's (Rust regex): \"log.*Error\", \"fn\\s+\\w+\". Escape literal \
braces and dots: \"interface\\{\\}\" finds `interface{}`. Patterns match within one line \
unless multiline is true.
- path: a file or directory, absolute or relative to the session's workspace root (not the \
shell's directory: a `cd` in bash does not change it); default: the workspace root. \
Directories are searched recursively, skipping what ripgrep skips: files ignored by \
.gitignore (inside a git repository), .ignore or .rgignore, hidden files and directories, \
binary files, symlinks.
- glob filters files like `rg --glob` (\"*.js\", \"*.{ts,tsx}\", \"!*.test.js\"); several may be \
separated by spaces or commas. A glob containing / is relative to the workspace root. \
type filters by ripgrep file type (\"rust\", \"py\", \"js\", \"md\", ...), usually faster \
than a glob.
- output_mode: \"files_with_matches\" (default) lists matching files; \"content\" shows \
matching lines as path:line:text (context lines as path-line-text, -- between groups), with \
-A/-B/-C context and -n line numbers; \"count\" shows path:count (matching lines per file).
- Results are sorted by path and paths are absolute. head_limit (default 250, 0 for no \
limit) and offset page through the output lines; a note says when more remain.
- Use this tool rather than running grep or rg in a shell.";

/// The `grep_search` tool.
pub struct GrepSearch {
    spec: ToolSpec,
}

impl GrepSearch {
    pub fn new() -> Result<GrepSearch, RegistryError> {
        Ok(GrepSearch { spec: spec()? })
    }
}

fn context_schema(description: &str) -> Value {
    json!({"type": "integer", "minimum": 0, "maximum": MAX_CONTEXT, "description": description})
}

fn spec() -> Result<ToolSpec, RegistryError> {
    let builder = ToolSpec::builder("grep_search")
        .alias("Grep")
        .description(DESCRIPTION)
        .input_schema(json!({
            "type": "object",
            "properties": {
                "pattern": {"type": "string", "minLength": 1, "description": "The regular expression to search for (ripgrep syntax)."},
                "path": {"type": "string", "description": "File or directory to search, absolute or relative to the session's workspace root (a cd in bash does not change it). Omit it to search the workspace root."},
                "glob": {"type": "string", "description": "Only search files matching this glob, like rg --glob (\"*.rs\", \"*.{ts,tsx}\", \"!vendor/**\"); several globs may be separated by spaces or commas."},
                "type": {"type": "string", "description": "Only search files of this ripgrep type, like rg --type (\"rust\", \"py\", \"js\", \"go\", \"md\", ...)."},
                "output_mode": {"type": "string", "enum": ["files_with_matches", "content", "count"], "description": "\"files_with_matches\" (default): matching file paths; \"content\": matching lines; \"count\": matching lines per file."},
                "-A": context_schema("Lines of context after each match (rg -A); content mode only."),
                "-B": context_schema("Lines of context before each match (rg -B); content mode only."),
                "-C": context_schema("Lines of context before and after each match (rg -C); -A and -B override it; content mode only."),
                "-n": {"type": "boolean", "description": "Show line numbers (rg -n); content mode only. Default true."},
                "-i": {"type": "boolean", "description": "Case-insensitive search (rg -i). Default false."},
                "multiline": {"type": "boolean", "description": "Let patterns span lines, with . matching newlines (rg -U --multiline-dotall). Default false."},
                "head_limit": {"type": "integer", "minimum": 0, "description": "Show at most this many output lines (files, content lines or counts), like | head -N. Default 250; 0 means no limit."},
                "offset": {"type": "integer", "minimum": 0, "description": "Skip this many output lines first, like | tail -n +N+1 (to page on after a truncated result). Default 0."}
            },
            "required": ["pattern"],
            "additionalProperties": false
        }));
    let builder = search_flags(builder).max_result_size_chars(Some(20_000));
    build_spec(builder)
}

#[async_trait]
impl Tool for GrepSearch {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        let request = GrepRequest::parse(input)?;
        request.plan(ctx.session.working_directory())?;
        check_path_syntax(input, ctx)
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let request = GrepRequest::parse(&input)?;
        let root = search_root(&input, ctx)?;
        // Globs containing `/` are relative to the working directory as the walk sees it.
        let plan = request.plan(root.working_directory())?;
        let cancel = ctx.cancellation.clone();
        let result = tokio::task::spawn_blocking(move || grep_engine::run(&plan, &root, &cancel))
            .await
            .map_err(|err| ToolError::Execution(format!("the search failed: {err}")))?;
        Ok(render(&request, result))
    }
}

/// The call's input, read and checked.
#[derive(Clone, Debug, PartialEq)]
struct GrepRequest {
    pattern: String,
    globs: Vec<String>,
    file_type: Option<String>,
    mode: OutputMode,
    before_context: usize,
    after_context: usize,
    line_numbers: bool,
    case_insensitive: bool,
    multiline: bool,
    /// `None`: no limit.
    head_limit: Option<usize>,
    offset: usize,
}

impl GrepRequest {
    fn parse(input: &Value) -> Result<GrepRequest, ToolError> {
        let pattern = input
            .get("pattern")
            .and_then(Value::as_str)
            .ok_or_else(|| ToolError::Validation("pattern must be a string".into()))?;
        let mode = match input.get("output_mode").and_then(Value::as_str) {
            None | Some("files_with_matches") => OutputMode::FilesWithMatches,
            Some("content") => OutputMode::Content,
            Some("count") => OutputMode::Count,
            Some(other) => {
                return Err(ToolError::Validation(format!(
                    "unknown output_mode \"{other}\"; expected files_with_matches, content or count"
                )));
            }
        };
        let context = input_count(input, "-C")?.unwrap_or(0);
        let before_context = input_count(input, "-B")?.unwrap_or(context);
        let after_context = input_count(input, "-A")?.unwrap_or(context);
        if before_context.max(after_context) > MAX_CONTEXT {
            return Err(ToolError::Validation(format!(
                "context of {} lines is too many; at most {MAX_CONTEXT}",
                before_context.max(after_context)
            )));
        }
        let head_limit = match input_count(input, "head_limit")? {
            None => Some(DEFAULT_HEAD_LIMIT),
            Some(0) => None,
            Some(limit) => Some(limit),
        };
        let flag =
            |name: &str, default: bool| input.get(name).and_then(Value::as_bool).unwrap_or(default);
        Ok(GrepRequest {
            pattern: pattern.to_owned(),
            globs: input
                .get("glob")
                .and_then(Value::as_str)
                .map(split_globs)
                .unwrap_or_default(),
            file_type: input.get("type").and_then(Value::as_str).map(str::to_owned),
            mode,
            before_context,
            after_context,
            line_numbers: flag("-n", true),
            case_insensitive: flag("-i", false),
            multiline: flag("multiline", false),
            head_limit,
            offset: input_count(input, "offset")?.unwrap_or(0),
        })
    }

    /// Compiles the regex, the file type and the globs (globs relative to `working_directory`,
    /// as when rg runs there).
    fn plan(&self, working_directory: &Path) -> Result<SearchPlan, ToolError> {
        Ok(SearchPlan {
            matcher: self.matcher()?,
            types: self.types()?,
            overrides: self.overrides(working_directory)?,
            mode: self.mode,
            before_context: self.before_context,
            after_context: self.after_context,
            line_numbers: self.line_numbers,
            multiline: self.multiline,
        })
    }

    /// The matcher rg builds (`HiArgs::matcher_rust`) for these flags.
    fn matcher(&self) -> Result<RegexMatcher, ToolError> {
        let mut builder = RegexMatcherBuilder::new();
        builder
            .multi_line(true)
            .unicode(true)
            .octal(false)
            .case_insensitive(self.case_insensitive)
            // Binary detection is on, so a NUL can never match; rg refuses such patterns.
            .ban_byte(Some(b'\0'));
        if self.multiline {
            builder.dot_matches_new_line(true);
        } else {
            builder
                .line_terminator(Some(b'\n'))
                .dot_matches_new_line(false);
        }
        builder.build(&self.pattern).map_err(|err| {
            let hint = if err.to_string().contains("not allowed") {
                "; set multiline to true to match line breaks"
            } else {
                ""
            };
            ToolError::Validation(format!(
                "invalid regex pattern \"{}\": {err}{hint}",
                self.pattern
            ))
        })
    }

    fn types(&self) -> Result<Types, ToolError> {
        let mut builder = TypesBuilder::new();
        builder.add_defaults();
        if let Some(name) = &self.file_type {
            let known = builder.definitions();
            if name != "all" && !known.iter().any(|def| def.name() == name) {
                let suggestion = closest(name, known.iter().map(|def| def.name()))
                    .map(|near| format!("did you mean \"{near}\"? "))
                    .unwrap_or_default();
                return Err(ToolError::Validation(format!(
                    "unknown file type \"{name}\"; {suggestion}known types include rust, py, js, ts, go, java, c, cpp, md, json, yaml, toml, sh"
                )));
            }
            builder.select(name);
        }
        builder.build().map_err(|err| {
            let name = self.file_type.as_deref().unwrap_or_default();
            ToolError::Validation(format!("file type \"{name}\": {err}"))
        })
    }

    fn overrides(&self, working_directory: &Path) -> Result<Override, ToolError> {
        let mut builder = OverrideBuilder::new(working_directory);
        for glob in &self.globs {
            builder
                .add(glob)
                .map_err(|err| ToolError::Validation(format!("invalid glob \"{glob}\": {err}")))?;
        }
        builder
            .build()
            .map_err(|err| ToolError::Validation(format!("invalid glob: {err}")))
    }
}

/// `glob` split into rg `--glob` arguments: on whitespace, and on commas outside a glob that
/// uses braces (`*.{ts,tsx}` stays whole, `*.ts,*.tsx` is two globs).
fn split_globs(glob: &str) -> Vec<String> {
    glob.split_whitespace()
        .flat_map(|part| {
            if part.contains('{') {
                vec![part.to_owned()]
            } else {
                part.split(',')
                    .filter(|piece| !piece.is_empty())
                    .map(str::to_owned)
                    .collect()
            }
        })
        .collect()
}

/// The page of rg's output the model sees, with notes after it.
fn render(request: &GrepRequest, result: SearchResult) -> ToolOutput {
    let output = String::from_utf8_lossy(&result.output);
    // Split on `\n` only: a CRLF file's lines keep their `\r`, as in rg's output.
    let lines: Vec<&str> = output.split_terminator('\n').collect();
    let shown = page(&lines, request.offset, request.head_limit);
    let mut text = String::new();
    if lines.is_empty() {
        text.push_str("No matches found");
    } else if shown.lines.is_empty() {
        text.push_str(&format!(
            "No output lines at offset {}; the output has {} lines",
            request.offset, shown.total
        ));
    } else {
        for line in shown.lines {
            text.push_str(line);
            text.push('\n');
        }
    }
    let mut notes = Vec::new();
    if shown.remaining() > 0 {
        let next = shown.offset + shown.lines.len();
        notes.push(format!(
            "[Showing lines {}-{next} of {}; pass offset {next} to see more]",
            shown.offset + 1,
            shown.total
        ));
    }
    match result.stopped {
        Some(Stopped::Cancelled) => {
            notes.push("[The search was cancelled; the results are incomplete]".into())
        }
        Some(Stopped::OutputCap) => notes.push(format!(
            "[The search stopped after {} MiB of output; the results are incomplete. Narrow the pattern, path, glob or type]",
            grep_engine::MAX_COLLECTED_BYTES / (1024 * 1024)
        )),
        None => {}
    }
    if !notes.is_empty() {
        text.push('\n');
        text.push_str(&notes.join("\n"));
    }
    ToolOutput::text(text)
        .with_metadata("num_files", json!(result.files_matched))
        .with_metadata("num_lines", json!(shown.total))
        .with_metadata(
            "truncated",
            json!(shown.remaining() > 0 || result.stopped.is_some()),
        )
        .with_metadata("unreadable_paths", json!(result.errors))
}

#[cfg(test)]
#[path = "grep_tests.rs"]
mod tests;
