//! `read_file` (alias `Read`): a text file's lines, numbered like `cat -n`.
//!
//! Owns reading a window of a file (1-based `offset`, `limit` defaulting to 2 000 lines), the
//! notes that tell the model what it did not see, and recording the read in the session's
//! file-state cache (a partial read counts). The numbering itself is [`super::text`]'s; the
//! editor's `view` shares [`open_for_reading`] and [`number_file`]. Binary files are refused;
//! files over [`MAX_UNRANGED_BYTES`] must be read in ranges. A small file already in the page
//! cache is read and numbered on the calling thread (`preadv2(RWF_NOWAIT)` never waits for
//! storage); every other read happens on the blocking pool.

use std::fmt::Write as _;
use std::fs::{File, Metadata};
use std::io::Read;
use std::path::{Path, PathBuf};

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio_util::sync::CancellationToken;

use super::access::{self, Location};
use super::state::{blocking, file_state};
use super::text::{MAX_LINE_CHARS, NumberError, Numbered, Window, number_bytes, number_lines};
use super::{build, check_path, optional_count, path_permission};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError, ToolOutput,
    ToolSpec,
};

/// Lines read when the call gives no `limit`.
pub const DEFAULT_LIMIT: usize = 2_000;
/// Files larger than this must be read with `offset`/`limit` (or `view_range`).
pub const MAX_UNRANGED_BYTES: u64 = 256 * 1024;
/// Files up to this size that are in the page cache are numbered on the calling thread
/// (tens of microseconds at most); larger ones always go to the blocking pool.
const INLINE_READ_BYTES: u64 = 32 * 1024;

const DESCRIPTION: &str = "Reads a text file and returns its lines numbered like `cat -n` \
(the line number right-aligned, a tab, then the line). `file_path` is absolute or relative to \
the workspace root (a bash `cd` does not change it). By default up to 2000 lines are returned from the start; \
`offset` (1-based line number) and `limit` (number of lines) read another part, and are \
required for files over 256 KiB. Lines longer than 2000 characters are cut with a marker, and \
a note at the end says when more lines remain and which offset continues. Binary files are \
refused. Reading a file (even in part) is what allows write_file and edit_file to change it \
afterwards. Prefer reading several files in parallel over reading one after another.";

/// The `read_file` tool.
pub struct ReadFile {
    spec: ToolSpec,
}

impl ReadFile {
    pub fn new() -> Result<ReadFile, RegistryError> {
        let spec = build(
            ToolSpec::builder("read_file")
                .alias("Read")
                .description(DESCRIPTION)
                .input_schema(json!({
                    "type": "object",
                    "properties": {
                        "file_path": {
                            "type": "string",
                            "description": "The file to read, absolute or relative to the workspace root (a bash `cd` does not change it)"
                        },
                        "offset": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "The line number to start reading from (1 is the first line)"
                        },
                        "limit": {
                            "type": "integer",
                            "minimum": 1,
                            "description": "The number of lines to read (default 2000)"
                        }
                    },
                    "required": ["file_path"],
                    "additionalProperties": false
                }))
                .read_only(true)
                .concurrency_safe(true)
                .destructive(false)
                .permission_for(
                    PermissionLevel::ReadOnly,
                    path_permission("file_path", PermissionLevel::ReadOnly),
                )
                .concurrency_class(ConcurrencyClass::ReadOnly)
                .interrupt_behavior(InterruptBehavior::Cancel)
                // Bounded by construction: at most MAX_OUTPUT_BYTES of lines plus short notes.
                // Offloading a read would only make the model read the read.
                .max_result_size_chars(None)
                .idempotent(true)
                .open_world(false),
        )?;
        Ok(ReadFile { spec })
    }
}

#[async_trait]
impl Tool for ReadFile {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        check_path(input, "file_path", ctx)?;
        optional_count(input, "offset")?;
        optional_count(input, "limit")?;
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let offset = optional_count(&input, "offset")?;
        let limit = optional_count(&input, "limit")?;
        let window = Window {
            first: offset.unwrap_or(1).max(1),
            max_lines: Some(limit.unwrap_or(DEFAULT_LIMIT).max(1)),
        };
        let ranged = offset.is_some() || limit.is_some();
        // Opening and inspecting are metadata operations, like the path checks before them;
        // reading waits for storage only on the blocking pool (see `number_window`).
        let (path, file, metadata) = open_input(&input, ctx)?;
        if metadata.is_dir() {
            return Err(ToolError::Validation(format!(
                "\"{}\" is a directory; read_file reads files (list directories with glob_search or bash)",
                path.display()
            )));
        }
        let request = WindowRequest {
            window,
            ranged,
            range_hint: "give offset and limit to read it in parts, or search it with grep_search",
        };
        let mut numbered =
            number_window(file, &metadata, &path, request, &ctx.cancellation).await?;
        if offset.is_some_and(|first| first > numbered.total_lines.max(1)) {
            return Err(ToolError::Validation(format!(
                "offset {} is past the end of \"{}\", which has {} lines",
                window.first,
                path.display(),
                numbered.total_lines
            )));
        }
        let mut text = if numbered.total_lines == 0 {
            format!("[\"{}\" exists and is empty]", path.display())
        } else {
            std::mem::take(&mut numbered.text)
        };
        append_notes(&mut text, &numbered, "call read_file with offset=");
        let update = file_state(
            path.clone(),
            numbered.size,
            metadata.modified().ok(),
            numbered.content_hash.clone(),
            numbered.partial(),
        );
        Ok(ToolOutput::text(text)
            .with_metadata("path", json!(path))
            .with_metadata("total_lines", json!(numbered.total_lines))
            .with_metadata("first_line", json!(numbered.first_shown))
            .with_metadata("last_line", json!(numbered.last_shown))
            .with_metadata("bytes", json!(numbered.size))
            .with_update(update))
    }
}

/// Which lines a read wants, and what to say when the file is too large to read whole.
#[derive(Clone, Copy, Debug)]
pub struct WindowRequest {
    pub window: Window,
    /// The call gave a range (`offset`/`limit`, `view_range`).
    pub ranged: bool,
    pub range_hint: &'static str,
}

/// Numbers `request.window` of an opened regular file. A small file that is wholly in the page
/// cache is read without waiting (`preadv2(RWF_NOWAIT)`) and numbered right here, which costs
/// microseconds; anything else is read on the blocking pool.
pub async fn number_window(
    file: File,
    metadata: &Metadata,
    path: &Path,
    request: WindowRequest,
    cancel: &CancellationToken,
) -> Result<Numbered, ToolError> {
    let size = metadata.len();
    if size <= INLINE_READ_BYTES
        && let Some(bytes) = access::read_cached(&file, size)
    {
        // Within MAX_UNRANGED_BYTES, so no range is needed.
        return number_bytes(&bytes, request.window).map_err(|err| number_error(err, path));
    }
    let (path, cancel) = (path.to_path_buf(), cancel.clone());
    blocking(move || number_file(file, size, &path, request, &cancel)).await
}

/// Opens `input.file_path` for reading and inspects it: straight away when the path is
/// written as it is ([`Location::open_read_as_written`]), else resolved first. Returns the
/// canonical path with the file.
fn open_input(input: &Value, ctx: &ToolContext) -> Result<(PathBuf, File, Metadata), ToolError> {
    if let Some((location, file)) = Location::open_read_as_written(input, "file_path", ctx) {
        let metadata = inspect(&file, &location.path)?;
        return Ok((location.path, file, metadata));
    }
    let location = Location::resolve(input, "file_path", ctx)?;
    let (file, metadata) = open_for_reading(&location)?;
    Ok((location.path, file, metadata))
}

/// Opens a location for reading and inspects it; refuses special files (FIFOs, devices).
pub fn open_for_reading(location: &Location) -> Result<(File, Metadata), ToolError> {
    let file = location
        .open_read()
        .map_err(|err| access::describe(&err, &location.path, "read"))?;
    let metadata = inspect(&file, &location.path)?;
    Ok((file, metadata))
}

/// The metadata of a file opened for reading; special files (FIFOs, devices) are refused.
fn inspect(file: &File, path: &Path) -> Result<Metadata, ToolError> {
    let metadata = file
        .metadata()
        .map_err(|err| access::describe(&err, path, "inspect"))?;
    if !metadata.is_file() && !metadata.is_dir() {
        return Err(ToolError::Validation(format!(
            "\"{}\" is not a regular file (a device, FIFO or socket); it cannot be read",
            path.display()
        )));
    }
    Ok(metadata)
}

/// Numbers the window of a regular file of `size` bytes read from `reader`. Without a range,
/// a file over [`MAX_UNRANGED_BYTES`] is refused with the request's hint.
pub fn number_file(
    reader: impl Read,
    size: u64,
    path: &Path,
    request: WindowRequest,
    cancel: &CancellationToken,
) -> Result<Numbered, ToolError> {
    if !request.ranged && size > MAX_UNRANGED_BYTES {
        return Err(ToolError::Validation(format!(
            "\"{}\" is {size} bytes, too large to read at once (the limit is {MAX_UNRANGED_BYTES} bytes); {}",
            path.display(),
            request.range_hint
        )));
    }
    number_lines(reader, size, request.window, cancel).map_err(|err| number_error(err, path))
}

fn number_error(err: NumberError, path: &Path) -> ToolError {
    match err {
        NumberError::Binary => ToolError::Validation(format!(
            "\"{}\" is a binary file (it has NUL bytes); only text files can be read",
            path.display()
        )),
        NumberError::Cancelled => ToolError::Execution("the read was cancelled".into()),
        NumberError::Io(err) => access::describe(&err, path, "read"),
    }
}

/// Appends what the model did not see: remaining lines (and how to continue), cut lines,
/// invalid UTF-8. `continue_with` is followed by the next line number.
pub fn append_notes(text: &mut String, numbered: &Numbered, continue_with: &str) {
    let mut notes = Vec::new();
    let (first, last, total) = (
        numbered.first_shown,
        numbered.last_shown,
        numbered.total_lines,
    );
    if last < total {
        let why = if numbered.output_capped {
            "the output reached its size limit; "
        } else {
            ""
        };
        notes.push(format!(
            "[{why}showing lines {first}-{last} of {total}; {} more lines remain: {continue_with}{} to read on]",
            total - last,
            last + 1
        ));
    } else if first > 1 {
        notes.push(format!("[showing lines {first}-{last} of {total}]"));
    }
    if numbered.lines_cut > 0 {
        notes.push(format!(
            "[{} lines longer than {MAX_LINE_CHARS} characters were cut]",
            numbered.lines_cut
        ));
    }
    if numbered.lossy {
        notes.push("[the file is not valid UTF-8; invalid bytes are shown as U+FFFD]".into());
    }
    if !notes.is_empty() {
        if !text.ends_with('\n') {
            text.push('\n');
        }
        text.push('\n');
        let _ = write!(text, "{}", notes.join("\n"));
    }
}
