//! The workspace in and out over gRPC (DESIGN §12): `PutFile`, `GetFile`, `Snapshot`, `Fork`.
//! Each is the HTTP route's translation: the same service call (`service::transfers`,
//! `service::snapshots`), the same answer's fields, errors through the one table. Not here:
//! any rule about paths, modes, archives or snapshots (the service and the transfer tools own
//! them; an HTTP client and a gRPC one get the same refusals).
//!
//! Decisions where the issue is silent:
//! - `PutFile`'s first message names the target (`session_id`, `path`, `mode`, `archive`) and
//!   every message, the first included, carries a `chunk`; the target fields of later messages
//!   are not read (a stream has one target). A missing first message, `session_id`, or a file's
//!   `path`, or a `mode` on an archive (HTTP's archive route takes none), is INVALID_ARGUMENT
//!   before anything runs. The chunks reach the service as an `AsyncRead` over the stream, as
//!   HTTP's body does: nothing is collected in memory, and a client that stops sending stalls
//!   the write rather than growing a buffer.
//! - `GetFile` answers `metadata` first (a file: size, ETag and the range sent; an archive: its
//!   format), then `chunk`s of at most [`CHUNK`] (64 KiB): far under the 4 MiB message limit
//!   most gRPC clients keep, and small enough that a slow reader holds little. The service's
//!   chunks (256 KiB for a file) are split without copying. `offset`/`length` become the
//!   `Range` HTTP would send (`length` 0: to the end); a range past the end is OUT_OF_RANGE,
//!   HTTP's 416. `If-None-Match` has no field: a gRPC client compares the ETag itself.
//! - Forwarding as for every session RPC (`api::forward`): a `PutFile` stream for another
//!   daemon's session is relayed message by message, its first message again first.

use std::pin::Pin;

use bytes::Bytes;
use futures::{Stream, StreamExt};
use tonic::{Request, Response, Status, Streaming};

use super::proto::{self, get_file_response};
use super::sessions::session;
use super::{GrpcDoor, caller, invalid, status};
use crate::api::forward::grpc::RpcConcerns;
use crate::permission::Principal;
use crate::service::{
    BodyStream, ForkRequest, RangeAnswer, ServiceError, SnapshotInfo, SnapshotRequest, UploadBody,
};

/// The most bytes one `GetFile` chunk carries.
const CHUNK: usize = 64 << 10;

pub type GetFileResponses =
    Pin<Box<dyn Stream<Item = Result<proto::GetFileResponse, Status>> + Send + 'static>>;

impl GrpcDoor {
    pub(super) async fn put_file(
        &self,
        request: Request<Streaming<proto::PutFileRequest>>,
    ) -> Result<Response<proto::PutFileResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, mut incoming) = request.into_parts();
        let first = incoming
            .message()
            .await?
            .ok_or_else(|| invalid("the first PutFile message must name session_id and path"))?;
        check_target(&first)?;
        let concerns = RpcConcerns::Session(&first.session_id);
        if let Some(mut relay) = self.relay(concerns, &extensions).await? {
            let outbound = futures::stream::once(async move { first }).chain(rest(incoming));
            let answer = relay
                .client
                .put_file(relay.request(metadata, outbound))
                .await;
            return relay.answer(&self.service, answer);
        }
        let proto::PutFileRequest {
            session_id,
            path,
            mode,
            archive,
            chunk,
        } = first;
        let body = upload_body(chunk, incoming);
        let answer = if archive {
            let dir = Some(path.as_str()).filter(|dir| !dir.is_empty());
            self.service
                .upload_archive(&caller, &session_id, dir, body)
                .await
        } else {
            let mode = Some(mode).filter(|mode| !mode.is_empty());
            self.service
                .upload_file(&caller, &session_id, &path, mode, body)
                .await
        }
        .map_err(status)?;
        let text = |field: &str| answer[field].as_str().unwrap_or_default().to_owned();
        let number = |field: &str| answer[field].as_u64().unwrap_or_default();
        Ok(Response::new(proto::PutFileResponse {
            path: text("path"),
            format: text("format"),
            entries: number("entries"),
            bytes: number("bytes"),
        }))
    }

    pub(super) async fn get_file(
        &self,
        request: Request<proto::GetFileRequest>,
    ) -> Result<Response<GetFileResponses>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        required("session_id", &message.session_id)?;
        let concerns = RpcConcerns::Session(&message.session_id);
        if let Some(mut relay) = self.relay(concerns, &extensions).await? {
            let answer = relay
                .client
                .get_file(relay.request(metadata, message))
                .await;
            let answer = relay.answer(&self.service, answer)?;
            return Ok(Response::new(Box::pin(answer.into_inner())));
        }
        let (head, body) = if message.archive_format.is_empty() {
            self.file(&caller, message).await?
        } else {
            self.archive(&caller, message).await?
        };
        let head = proto::GetFileResponse {
            kind: Some(get_file_response::Kind::Metadata(head)),
        };
        let responses = futures::stream::once(async { Ok(head) }).chain(chunks(body));
        Ok(Response::new(Box::pin(responses)))
    }

    /// A file, or the range of it the message names: its metadata and its bytes.
    async fn file(
        &self,
        caller: &Principal,
        message: proto::GetFileRequest,
    ) -> Result<(proto::FileMetadata, BodyStream), Status> {
        required("path", &message.path)?;
        let range = range_header(message.offset, message.length);
        let download = self
            .service
            .download_file(
                caller,
                &message.session_id,
                &message.path,
                range.as_deref(),
                None,
            )
            .await
            .map_err(status)?;
        let (offset, length) = match download.range {
            RangeAnswer::Whole => (0, download.size),
            RangeAnswer::Part { start, end } => (start, end - start + 1),
            RangeAnswer::Unsatisfiable => {
                return Err(Status::out_of_range(format!(
                    "offset {} is past the end of \"{}\" ({} bytes)",
                    message.offset, message.path, download.size
                )));
            }
        };
        let head = proto::FileMetadata {
            size: download.size,
            etag: download.etag,
            offset,
            length,
            format: String::new(),
        };
        Ok((head, download.body))
    }

    /// A directory as an archive: its format and its bytes.
    async fn archive(
        &self,
        caller: &Principal,
        message: proto::GetFileRequest,
    ) -> Result<(proto::FileMetadata, BodyStream), Status> {
        if message.offset != 0 || message.length != 0 {
            return Err(invalid(
                "offset and length are for files, not an archive_format download",
            ));
        }
        let dir = Some(message.path.as_str()).filter(|dir| !dir.is_empty());
        let download = self
            .service
            .download_archive(
                caller,
                &message.session_id,
                dir,
                Some(&message.archive_format),
            )
            .await
            .map_err(status)?;
        let head = proto::FileMetadata {
            format: download.format.to_owned(),
            ..proto::FileMetadata::default()
        };
        Ok((head, download.body))
    }

    pub(super) async fn snapshot(
        &self,
        request: Request<proto::SnapshotRequest>,
    ) -> Result<Response<proto::SnapshotResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        let concerns = RpcConcerns::Session(&message.session_id);
        forward_rpc!(self, concerns, extensions, metadata, message, snapshot);
        let request = SnapshotRequest {
            name: Some(message.name).filter(|name| !name.is_empty()),
        };
        let info = self
            .service
            .take_snapshot(&caller, &message.session_id, request)
            .await
            .map_err(status)?;
        Ok(Response::new(snapshot(info)))
    }

    pub(super) async fn fork(
        &self,
        request: Request<proto::ForkRequest>,
    ) -> Result<Response<proto::ForkResponse>, Status> {
        let caller = caller(&request)?;
        let (metadata, extensions, message) = request.into_parts();
        let concerns = RpcConcerns::Session(&message.session_id);
        forward_rpc!(self, concerns, extensions, metadata, message, fork);
        let request = ForkRequest {
            // Past `usize` is past MAX_FORKS too: the service refuses it by its count.
            count: usize::try_from(message.count).unwrap_or(usize::MAX),
            name: Some(message.name).filter(|name| !name.is_empty()),
        };
        let forked = self
            .service
            .fork_session(&caller, &message.session_id, request)
            .await
            .map_err(status)?;
        Ok(Response::new(proto::ForkResponse {
            snapshot_id: forked.snapshot_id,
            sessions: forked.sessions.into_iter().map(session).collect(),
            copy: forked.copy,
        }))
    }
}

/// The first `PutFile` message's target, checked for what HTTP's route and query ensure.
fn check_target(first: &proto::PutFileRequest) -> Result<(), Status> {
    required("session_id", &first.session_id)?;
    if first.archive {
        if !first.mode.is_empty() {
            return Err(invalid(
                "mode is for file uploads: an archive's entries carry their own",
            ));
        }
        Ok(())
    } else {
        required("path", &first.path)
    }
}

fn required(field: &str, value: &str) -> Result<(), Status> {
    if value.is_empty() {
        return Err(invalid(format!("{field} is required")));
    }
    Ok(())
}

/// The `Range` header HTTP would send for `offset` and `length` (0: to the end).
fn range_header(offset: u64, length: u64) -> Option<String> {
    match (offset, length) {
        (0, 0) => None,
        (offset, 0) => Some(format!("bytes={offset}-")),
        (offset, length) => Some(format!(
            "bytes={offset}-{}",
            offset.saturating_add(length - 1)
        )),
    }
}

/// The upload's bytes: the first message's chunk, then every later message's, read as they
/// arrive. A failed stream (the client gone) is a read error, which fails the write.
fn upload_body(first: Bytes, incoming: Streaming<proto::PutFileRequest>) -> UploadBody {
    let chunks = futures::stream::once(async { Ok(first) })
        .chain(incoming.map(|message| message.map(|m| m.chunk).map_err(std::io::Error::other)));
    Box::pin(tokio_util::io::StreamReader::new(chunks))
}

/// The rest of a `PutFile` stream as the owner is sent it, up to its end or its first error
/// (the owner then sees the stream end, and the upload fails there as a short body).
fn rest(
    incoming: Streaming<proto::PutFileRequest>,
) -> impl Stream<Item = proto::PutFileRequest> + Send + 'static {
    incoming.scan((), |(), message| {
        futures::future::ready(match message {
            Ok(message) => Some(message),
            Err(err) => {
                tracing::warn!(error = %err, "PutFile stream failed; the relayed upload ends");
                None
            }
        })
    })
}

/// The service's body as `chunk` messages of at most [`CHUNK`] bytes; a read error ends the
/// stream with INTERNAL.
fn chunks(
    body: BodyStream,
) -> impl Stream<Item = Result<proto::GetFileResponse, Status>> + Send + 'static {
    body.flat_map(|read| {
        let messages: Vec<Result<proto::GetFileResponse, Status>> = match read {
            Ok(bytes) => split(bytes)
                .into_iter()
                .map(|chunk| {
                    Ok(proto::GetFileResponse {
                        kind: Some(get_file_response::Kind::Chunk(chunk)),
                    })
                })
                .collect(),
            Err(err) => vec![Err(status(ServiceError::internal(format!(
                "the download failed: {err}"
            ))))],
        };
        futures::stream::iter(messages)
    })
}

/// `bytes` in pieces of at most [`CHUNK`], sharing its buffer.
fn split(mut bytes: Bytes) -> Vec<Bytes> {
    let mut pieces = Vec::with_capacity(bytes.len().div_ceil(CHUNK));
    while bytes.len() > CHUNK {
        pieces.push(bytes.split_to(CHUNK));
    }
    if !bytes.is_empty() {
        pieces.push(bytes);
    }
    pieces
}

fn snapshot(info: SnapshotInfo) -> proto::SnapshotResponse {
    proto::SnapshotResponse {
        id: info.id,
        name: info.name.unwrap_or_default(),
        session_id: info.session_id,
        principal: info.principal.unwrap_or_default(),
        size_bytes: info.size_bytes,
        copy: info.copy,
        layers: u64::try_from(info.layers).unwrap_or(u64::MAX),
        created_at: info.created_at,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn offsets_and_lengths_become_the_range_http_would_send() {
        assert_eq!(range_header(0, 0), None);
        assert_eq!(range_header(10, 0).as_deref(), Some("bytes=10-"));
        assert_eq!(range_header(0, 1).as_deref(), Some("bytes=0-0"));
        assert_eq!(range_header(1000, 1000).as_deref(), Some("bytes=1000-1999"));
        assert_eq!(
            range_header(u64::MAX, 5).as_deref(),
            Some(format!("bytes={}-{}", u64::MAX, u64::MAX).as_str())
        );
    }

    #[test]
    fn chunks_split_at_the_limit_and_keep_every_byte() {
        let data: Vec<u8> = (0..CHUNK * 2 + 7).map(|i| i as u8).collect();
        let pieces = split(Bytes::from(data.clone()));
        let lengths: Vec<usize> = pieces.iter().map(Bytes::len).collect();
        assert_eq!(lengths, [CHUNK, CHUNK, 7]);
        assert_eq!(pieces.concat(), data);
        assert_eq!(split(Bytes::from(vec![1u8; CHUNK])).len(), 1);
        assert!(split(Bytes::new()).is_empty());
    }
}
