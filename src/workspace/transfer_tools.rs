//! `upload` and `download`: the workspace's way in and out as tools of the contract, so that
//! each transfer runs through the dispatcher's pipeline like any call — the path rules of
//! `write_file`/`read_file` (validation), the session's mode and rules (permission), the
//! hooks, the audit row and the `tool:pre`/`tool:post` events.
//!
//! They are never registered in the daemon's registry and never offered to a model: the
//! service makes one per request, holding that request's body ([`UploadTool`]) or the channel
//! the response's body leaves on ([`DownloadTool`]), and runs it as a one-call batch in a
//! one-tool pool. What a transfer learned (bytes, entries, format) goes into the output's
//! `metadata.audit`, which the execute phase adds to the input the audit row records.
//!
//! Deliberately absent: HTTP (ranges are resolved by the service from the size and ETag sent
//! here), and how a body is streamed on the wire.

use std::io::Read;
use std::path::PathBuf;
use std::pin::Pin;
use std::sync::Mutex;

use async_trait::async_trait;
use serde_json::{Value, json};
use tokio::io::{AsyncRead, AsyncReadExt};
use tokio::sync::oneshot;

use super::archive::{self, ArchiveError, ArchiveFormat, UploadLimits};
use super::download::{self, ArchiveStream, FileReady};
use crate::registry::RegistryError;
use crate::tool::{
    ConcurrencyClass, InterruptBehavior, PermissionLevel, Tool, ToolContext, ToolError, ToolOutput,
    ToolSpec,
};
use crate::tools::paths;

/// The internal tools' names (hooks match them; rules name them: `upload(./vendor/**)`).
pub const UPLOAD: &str = "upload";
pub const DOWNLOAD: &str = "download";

/// A request body, read as it arrives.
pub type UploadBody = Pin<Box<dyn AsyncRead + Send>>;

/// What a refused transfer reports in its result's metadata (`refusal`), for the doors'
/// status: `too_large` is 413, the others 400.
fn refusal(kind: &str, entry: Option<&str>, reason: &str) -> ToolOutput {
    let mut out = ToolOutput::failure(reason.to_owned()).with_metadata(
        "refusal",
        json!({"kind": kind, "entry": entry, "reason": reason}),
    );
    out.error_kind = Some(crate::tool::ErrorKind::Validation);
    out
}

fn archive_refusal(err: ArchiveError) -> Result<ToolOutput, ToolError> {
    let message = err.to_string();
    match err {
        ArchiveError::Refused { entry, .. } => Ok(refusal("refused", Some(&entry), &message)),
        ArchiveError::TooLarge { entry, .. } => Ok(refusal("too_large", Some(&entry), &message)),
        ArchiveError::Unreadable(_) => Ok(refusal("unreadable", None, &message)),
        ArchiveError::Io { .. } => Err(ToolError::Execution(message)),
    }
}

fn spec(name: &str, write: bool) -> Result<ToolSpec, RegistryError> {
    let (inside, description) = if write {
        (
            PermissionLevel::WorkspaceWrite,
            "Writes a file or unpacks an archive from a request body (internal)",
        )
    } else {
        (
            PermissionLevel::ReadOnly,
            "Reads a file or packs a directory into a response body (internal)",
        )
    };
    Ok(ToolSpec::builder(name)
        .description(description)
        .input_schema(json!({
            "type": "object",
            "properties": {
                "path": {"type": "string"},
                "kind": {"enum": ["file", "archive"]},
                "mode": {"type": "string", "pattern": "^[0-7]{3,4}$"},
                "format": {"enum": ["tar", "tar.gz"]}
            },
            "required": ["path", "kind"],
            "additionalProperties": false
        }))
        .read_only(!write)
        .concurrency_safe(!write)
        .destructive(write)
        .permission_for(inside, move |input, ctx| {
            paths::path_permission(input, "path", ctx, inside)
        })
        .concurrency_class(if write {
            ConcurrencyClass::WriteExclusive
        } else {
            ConcurrencyClass::ReadOnly
        })
        .interrupt_behavior(InterruptBehavior::Cancel)
        .max_result_size_chars(Some(4_000))
        .idempotent(true)
        .open_world(false)
        .build()?)
}

fn kind(input: &Value) -> &str {
    input.get("kind").and_then(Value::as_str).unwrap_or("file")
}

/// `upload`: the body becomes one file, or an archive unpacked into a directory.
pub struct UploadTool {
    spec: ToolSpec,
    body: Mutex<Option<UploadBody>>,
    limits: UploadLimits,
    /// Where a zip is spooled before it is read (the data directory's, not the workspace).
    spool: PathBuf,
}

impl UploadTool {
    pub fn new(
        body: UploadBody,
        limits: UploadLimits,
        spool: PathBuf,
    ) -> Result<UploadTool, RegistryError> {
        Ok(UploadTool {
            spec: spec(UPLOAD, true)?,
            body: Mutex::new(Some(body)),
            limits,
            spool,
        })
    }

    fn take_body(&self) -> Result<UploadBody, ToolError> {
        self.body
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .take()
            .ok_or_else(|| ToolError::Execution("the upload's body was read already".into()))
    }
}

#[async_trait]
impl Tool for UploadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        paths::check_input(input, "path", ctx)?;
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let target = paths::resolve_for_execution(&input, "path", ctx)?.path;
        let body = self.take_body()?;
        if kind(&input) == "archive" {
            return self.unpack(body, target, ctx).await;
        }
        let mode = match input.get("mode").and_then(Value::as_str) {
            Some(text) => Some(
                u32::from_str_radix(text, 8)
                    .map_err(|_| ToolError::Validation(format!("mode \"{text}\" is not octal")))?,
            ),
            None => None,
        };
        match super::files::put_file(body, &target, mode, self.limits.max_bytes).await {
            Ok(bytes) => Ok(
                ToolOutput::text(json!({"path": target, "bytes": bytes}).to_string())
                    .with_metadata("audit", json!({"bytes": bytes, "entries": 1})),
            ),
            Err(super::files::PutError::TooLarge(limit)) => Ok(refusal(
                "too_large",
                None,
                &format!(
                    "the file is larger than {} MiB ([environments] max_upload_mb)",
                    limit >> 20
                ),
            )),
            Err(super::files::PutError::Refused(reason)) => Ok(refusal("refused", None, &reason)),
            Err(super::files::PutError::Io(err)) => Err(ToolError::Execution(err)),
        }
    }
}

impl UploadTool {
    async fn unpack(
        &self,
        mut body: UploadBody,
        target: PathBuf,
        ctx: &ToolContext,
    ) -> Result<ToolOutput, ToolError> {
        // The format is told from the first bytes, never from a name.
        let mut head = Vec::with_capacity(512);
        (&mut body)
            .take(512)
            .read_to_end(&mut head)
            .await
            .map_err(|err| ToolError::Execution(format!("reading the upload: {err}")))?;
        let Some(format) = ArchiveFormat::detect(&head) else {
            return Ok(refusal(
                "unreadable",
                None,
                "the body is not a tar, tar.gz or zip archive",
            ));
        };
        let reader = tokio_util::io::SyncIoBridge::new(body);
        let root = ctx.working_directory.to_path_buf();
        let (limits, spool) = (self.limits, self.spool.clone());
        let unpacked = tokio::task::spawn_blocking(move || {
            let mut whole = Read::chain(std::io::Cursor::new(head), reader);
            archive::unpack(&mut whole, format, &root, &target, limits, &spool)
        })
        .await
        .map_err(|err| ToolError::Execution(format!("unpacking stopped: {err}")))?;
        match unpacked {
            Ok(done) => Ok(ToolOutput::text(
                json!({"format": format.as_str(), "entries": done.entries, "bytes": done.bytes})
                    .to_string(),
            )
            .with_metadata(
                "audit",
                json!({"format": format.as_str(), "entries": done.entries, "bytes": done.bytes}),
            )),
            Err(err) => archive_refusal(err),
        }
    }
}

/// What a download hands the service as soon as it may start sending.
pub enum DownloadReady {
    File(FileReady),
    Archive(ArchiveStream),
}

/// `download`: one file's bytes, or a directory packed as it is sent.
pub struct DownloadTool {
    spec: ToolSpec,
    ready: Mutex<Option<oneshot::Sender<DownloadReady>>>,
}

impl DownloadTool {
    pub fn new(ready: oneshot::Sender<DownloadReady>) -> Result<DownloadTool, RegistryError> {
        Ok(DownloadTool {
            spec: spec(DOWNLOAD, false)?,
            ready: Mutex::new(Some(ready)),
        })
    }

    fn send(&self, ready: DownloadReady) -> Result<(), ToolError> {
        let sender = self.ready.lock().unwrap_or_else(|p| p.into_inner()).take();
        sender
            .and_then(|s| s.send(ready).ok())
            .ok_or_else(|| ToolError::Execution("the download's client went away".into()))
    }
}

#[async_trait]
impl Tool for DownloadTool {
    fn spec(&self) -> &ToolSpec {
        &self.spec
    }

    async fn validate_input(&self, input: &Value, ctx: &ToolContext) -> Result<(), ToolError> {
        paths::check_input(input, "path", ctx)?;
        Ok(())
    }

    async fn execute(&self, input: Value, ctx: &ToolContext) -> Result<ToolOutput, ToolError> {
        let source = paths::resolve_for_execution(&input, "path", ctx)?.path;
        if std::fs::symlink_metadata(&source).is_err() {
            let missing = format!("\"{}\" does not exist", source.display());
            return Ok(refusal("not_found", None, &missing));
        }
        if kind(&input) == "archive" {
            let gzip = input.get("format").and_then(Value::as_str) == Some("tar.gz");
            let (stream, finished) =
                download::pack(source, gzip).map_err(|e| ToolError::Validation(e.to_string()))?;
            self.send(DownloadReady::Archive(stream))?;
            let counts = tokio::select! {
                counts = finished => counts.map_err(|e| ToolError::Execution(e.to_string()))?,
                () = ctx.cancellation.cancelled() => return Err(ToolError::Execution("the download was stopped".into())),
            };
            let counts = counts.map_err(|e| ToolError::Execution(e.to_string()))?;
            let format = if gzip { "tar.gz" } else { "tar" };
            return Ok(ToolOutput::text(
                json!({"format": format, "entries": counts.entries, "bytes": counts.bytes})
                    .to_string(),
            )
            .with_metadata(
                "audit",
                json!({"format": format, "entries": counts.entries, "bytes": counts.bytes}),
            ));
        }
        let (ready, sent) = download::open_file(&source)
            .await
            .map_err(ToolError::Validation)?;
        self.send(DownloadReady::File(ready))?;
        let bytes = tokio::select! {
            bytes = sent => bytes.unwrap_or(0),
            () = ctx.cancellation.cancelled() => return Err(ToolError::Execution("the download was stopped".into())),
        };
        Ok(
            ToolOutput::text(json!({"path": source, "bytes": bytes}).to_string())
                .with_metadata("audit", json!({"bytes": bytes, "entries": 1})),
        )
    }
}
