//! The workspace in and out (DESIGN §12): a file or an archive uploaded into a session's view,
//! a file or a directory downloaded from it.
//!
//! Each transfer is one call of an internal tool (`workspace::transfer_tools`) run as a
//! one-call batch through the dispatcher, in a pool holding that tool alone (the session's
//! mode and deny entries shape it as they shape every pool): validation, permission, hooks,
//! audit and events as for any call, and the caller's principal on its audit row. The call runs
//! in a task of its own, so a client that goes away mid-transfer still leaves its audit row.
//! A refused call becomes the service error its kind says: `permission_denied` (403) for the
//! mode, the rules, a hook or a path out of the workspace; `payload_too_large` (413) past a
//! size limit; `invalid_request` (400) naming the refused entry; `not_found` (404).

use std::io;
use std::pin::Pin;
use std::sync::Arc;

use bytes::Bytes;
use futures::Stream;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::oneshot;

use super::access::Access;
use super::{ErrorCode, LiveSession, ServiceError, ToolService};
use crate::dispatch::executor::new_batch_id;
use crate::permission::Principal;
use crate::registry::{ToolPool, ToolRegistry};
use crate::tool::{ErrorKind, Tool, ToolCall, ToolResult};
use crate::workspace::files::{RangeAnswer, range_answer};
use crate::workspace::transfer_tools::{
    DOWNLOAD, DownloadReady, DownloadTool, UPLOAD, UploadBody, UploadTool,
};

/// A response body, chunk by chunk.
pub type BodyStream = Pin<Box<dyn Stream<Item = io::Result<Bytes>> + Send>>;

/// One file on its way out.
pub struct FileDownload {
    pub size: u64,
    pub etag: String,
    pub range: RangeAnswer,
    /// Empty for a range that cannot be satisfied or an unchanged ETag.
    pub body: BodyStream,
    /// `If-None-Match` named this content: 304.
    pub not_modified: bool,
}

/// A directory on its way out as an archive.
pub struct ArchiveDownload {
    /// `tar` or `tar.gz`.
    pub format: &'static str,
    pub body: BodyStream,
}

impl ToolService {
    /// Writes `body` to `path` in session `session_id` (`mode`: octal, e.g. `"755"`).
    pub async fn upload_file(
        &self,
        caller: &Principal,
        session_id: &str,
        path: &str,
        mode: Option<String>,
        body: UploadBody,
    ) -> Result<Value, ServiceError> {
        let mut input = json!({"path": path, "kind": "file"});
        if let Some(mode) = mode {
            input["mode"] = Value::String(mode);
        }
        self.upload(caller, session_id, input, body).await
    }

    /// Unpacks the archive `body` into directory `path` (default: the workspace).
    pub async fn upload_archive(
        &self,
        caller: &Principal,
        session_id: &str,
        path: Option<&str>,
        body: UploadBody,
    ) -> Result<Value, ServiceError> {
        let input = json!({"path": path.unwrap_or("."), "kind": "archive"});
        self.upload(caller, session_id, input, body).await
    }

    async fn upload(
        &self,
        caller: &Principal,
        session_id: &str,
        input: Value,
        body: UploadBody,
    ) -> Result<Value, ServiceError> {
        let live = self.session_for(caller, session_id, Access::Write)?;
        let settings = self.workspaces.settings();
        let tool = UploadTool::new(
            body,
            settings.upload_limits(),
            settings.data_dir.join("spool"),
        )
        .map_err(|err| ServiceError::internal(err.to_string()))?;
        let (result, bytes) = self
            .transfer(live, caller, Arc::new(tool), UPLOAD, input)
            .await?;
        crate::telemetry::record_workspace_bytes("in", bytes);
        Ok(serde_json::from_str(&result.output).unwrap_or(Value::String(result.output)))
    }

    /// One file of session `session_id`, or the part `range` (a `Range` header) names.
    pub async fn download_file(
        &self,
        caller: &Principal,
        session_id: &str,
        path: &str,
        range: Option<&str>,
        if_none_match: Option<&str>,
    ) -> Result<FileDownload, ServiceError> {
        let input = json!({"path": path, "kind": "file"});
        match self.download(caller, session_id, input).await? {
            DownloadReady::File(ready) => Ok(file_body(ready, range, if_none_match)),
            DownloadReady::Archive(_) => {
                Err(ServiceError::internal("a file download packed a directory"))
            }
        }
    }

    /// Directory `path` (default: the workspace) of session `session_id`, packed as `format`.
    pub async fn download_archive(
        &self,
        caller: &Principal,
        session_id: &str,
        path: Option<&str>,
        format: Option<&str>,
    ) -> Result<ArchiveDownload, ServiceError> {
        let format = match format.unwrap_or("tar") {
            "tar" => "tar",
            "tar.gz" | "tgz" => "tar.gz",
            other => {
                return Err(ServiceError::invalid(format!(
                    "format \"{other}\" is not one of tar, tar.gz"
                )));
            }
        };
        let input = json!({"path": path.unwrap_or("."), "kind": "archive", "format": format});
        match self.download(caller, session_id, input).await? {
            DownloadReady::Archive(stream) => {
                let chunks = tokio_stream::wrappers::ReceiverStream::new(stream.chunks);
                let counted = counted(Box::pin(chunks), None);
                Ok(ArchiveDownload {
                    format,
                    body: counted,
                })
            }
            DownloadReady::File(_) => {
                Err(ServiceError::internal("an archive download sent a file"))
            }
        }
    }

    /// Starts a download call; what it is ready to send, or why it was refused.
    async fn download(
        &self,
        caller: &Principal,
        session_id: &str,
        input: Value,
    ) -> Result<DownloadReady, ServiceError> {
        let live = self.session_for(caller, session_id, Access::Read)?;
        let (ready, readied) = oneshot::channel();
        let tool =
            DownloadTool::new(ready).map_err(|err| ServiceError::internal(err.to_string()))?;
        let call = self.spawn_transfer(live, caller, Arc::new(tool), DOWNLOAD, input);
        match readied.await {
            Ok(ready) => Ok(ready),
            // The call ended before it was ready to send: refused, or failed.
            Err(_) => Err(match call.await {
                Ok(result) => transfer_error(&result),
                Err(err) => ServiceError::internal(format!("the download failed: {err}")),
            }),
        }
    }

    /// Runs a transfer call to its end; its result (an error when it failed) and its bytes.
    async fn transfer(
        &self,
        live: Arc<LiveSession>,
        caller: &Principal,
        tool: Arc<dyn Tool>,
        name: &str,
        input: Value,
    ) -> Result<(ToolResult, u64), ServiceError> {
        let result = self
            .spawn_transfer(live, caller, tool, name, input)
            .await
            .map_err(|err| ServiceError::internal(format!("the transfer failed: {err}")))?;
        if result.is_error {
            return Err(transfer_error(&result));
        }
        let bytes = result
            .metadata
            .get("audit")
            .and_then(|a| a.get("bytes"))
            .and_then(Value::as_u64)
            .unwrap_or(0);
        Ok((result, bytes))
    }

    /// The transfer's one-call batch, in a task of its own.
    fn spawn_transfer(
        &self,
        live: Arc<LiveSession>,
        caller: &Principal,
        tool: Arc<dyn Tool>,
        name: &str,
        input: Value,
    ) -> tokio::task::JoinHandle<ToolResult> {
        let mut registry = ToolRegistry::new();
        let registered = registry.register(tool);
        let pool = Arc::new(ToolPool::assemble(
            &registry,
            &[],
            &live.state,
            &live.pool_options,
        ));
        let dispatcher = self.dispatcher.clone();
        let actor = caller.name.clone();
        let call = ToolCall::new(
            format!("call_{}", uuid::Uuid::now_v7().simple()),
            name,
            input,
        );
        let name = name.to_owned();
        tokio::spawn(async move {
            if let Err(err) = registered {
                return ToolResult::refused(&call, ErrorKind::Execution, &err.to_string());
            }
            let batch_id = new_batch_id();
            let _queued = live.state.queue_batch(&batch_id, Some(actor));
            let _running = live.batches_running.read().await;
            let outcome = dispatcher
                .collect_batch(live.state.clone(), pool, batch_id, vec![call])
                .await;
            outcome.results.into_iter().next().unwrap_or_else(|| {
                ToolResult::refused(
                    &ToolCall::new("lost", name, json!({})),
                    ErrorKind::Execution,
                    "the transfer's call gave no result",
                )
            })
        })
    }
}

/// A refused or failed transfer's result as the service error the doors map.
fn transfer_error(result: &ToolResult) -> ServiceError {
    let refusal = result
        .metadata
        .get("refusal")
        .and_then(|r| r.get("kind"))
        .and_then(Value::as_str);
    // The message without the kind's prefix the model would read (`ValidationError: `).
    let prefix = result
        .error_kind
        .map(|kind| kind.format_output(""))
        .unwrap_or_default();
    let message = result
        .output
        .strip_prefix(prefix.as_str())
        .unwrap_or(&result.output)
        .to_owned();
    let code = match (result.error_kind, refusal) {
        (_, Some("too_large")) => ErrorCode::PayloadTooLarge,
        (_, Some("not_found")) => ErrorCode::NotFound,
        (_, Some(_)) => ErrorCode::InvalidRequest,
        // A one-tool pool misses its tool only when the mode or a deny entry excluded it.
        (
            Some(ErrorKind::PermissionDenied | ErrorKind::HookBlocked | ErrorKind::UnknownTool),
            _,
        )
        | (Some(ErrorKind::RequiresInteraction), _) => ErrorCode::PermissionDenied,
        (Some(ErrorKind::InputValidation | ErrorKind::Validation), _) => ErrorCode::InvalidRequest,
        (Some(ErrorKind::Timeout), _) => ErrorCode::Timeout,
        (Some(ErrorKind::Cancelled | ErrorKind::Aborted), _) => ErrorCode::Unavailable,
        _ => ErrorCode::Internal,
    };
    ServiceError::new(code, message)
}

/// The file's body for `range`, counting what is sent (the download call waits for that).
fn file_body(
    ready: crate::workspace::download::FileReady,
    range: Option<&str>,
    if_none_match: Option<&str>,
) -> FileDownload {
    let not_modified = if_none_match.is_some_and(|tags| {
        tags.split(',')
            .any(|tag| tag.trim() == ready.etag || tag.trim() == "*")
    });
    let answer = if not_modified {
        RangeAnswer::Unsatisfiable
    } else {
        range_answer(range, ready.size)
    };
    let (start, len) = match answer {
        RangeAnswer::Whole => (0, ready.size),
        RangeAnswer::Part { start, end } => (start, end - start + 1),
        RangeAnswer::Unsatisfiable => (0, 0),
    };
    let file = tokio::fs::File::from_std(ready.file);
    let chunks = futures::stream::once(async move {
        let mut file = file;
        tokio::io::AsyncSeekExt::seek(&mut file, io::SeekFrom::Start(start)).await?;
        Ok::<_, io::Error>(tokio_util::io::ReaderStream::with_capacity(
            file.take(len),
            crate::workspace::files::CHUNK,
        ))
    });
    let body: BodyStream = Box::pin(futures::TryStreamExt::try_flatten(chunks));
    FileDownload {
        size: ready.size,
        etag: ready.etag,
        range: answer,
        body: counted(body, Some(ready.sent)),
        not_modified,
    }
}

/// `body`, telling `sent` (and the metrics) how many bytes went out when it ends or is dropped.
fn counted(body: BodyStream, sent: Option<oneshot::Sender<u64>>) -> BodyStream {
    struct Counter {
        bytes: u64,
        sent: Option<oneshot::Sender<u64>>,
    }
    impl Drop for Counter {
        fn drop(&mut self) {
            crate::telemetry::record_workspace_bytes("out", self.bytes);
            if let Some(sent) = self.sent.take() {
                let _ = sent.send(self.bytes);
            }
        }
    }
    let mut counter = Counter { bytes: 0, sent };
    Box::pin(futures::StreamExt::map(body, move |chunk| {
        // The whole counter moves into the closure (its drop reports), not only its field.
        let counter = &mut counter;
        if let Ok(chunk) = &chunk {
            counter.bytes += chunk.len() as u64;
        }
        chunk
    }))
}
