//! The workspace in and out over gRPC: a binary file streamed in by chunks and back whole and
//! by range; a tar.gz directory in and a tar back, equal file by file; refusals (a `read_only`
//! session, paths out of the workspace, malformed first messages, past `max_upload_mb`).
//! `snapshots` has `Snapshot`, `Fork`, and another agent's session on all four RPCs.

use std::collections::BTreeMap;
use std::io::Read;
use std::os::unix::fs::PermissionsExt;

use tonic::Code;
use toold::api::grpc::proto::{self, get_file_response};

use crate::grpc::harness::{Client, GUARD, Toold};

/// 3 MiB with NUL bytes and every other byte value.
fn binary() -> Vec<u8> {
    (0..3u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

/// The messages of a `PutFile`: `first` carrying the first chunk, then one per chunk.
fn put_messages(
    first: proto::PutFileRequest,
    data: &[u8],
    chunk: usize,
) -> Vec<proto::PutFileRequest> {
    let mut pieces = data.chunks(chunk);
    let mut messages = vec![proto::PutFileRequest {
        chunk: pieces.next().unwrap_or_default().to_vec().into(),
        ..first
    }];
    messages.extend(pieces.map(|piece| proto::PutFileRequest {
        chunk: piece.to_vec().into(),
        ..Default::default()
    }));
    messages
}

pub fn target(session: &str, path: &str) -> proto::PutFileRequest {
    proto::PutFileRequest {
        session_id: session.into(),
        path: path.into(),
        ..Default::default()
    }
}

/// `data` put as `first` says, in chunks of 100 000 bytes.
pub async fn put(
    client: &mut Client,
    request: tonic::Request<proto::PutFileRequest>,
    data: &[u8],
) -> Result<proto::PutFileResponse, tonic::Status> {
    let (metadata, extensions, first) = request.into_parts();
    let messages = tokio_stream::iter(put_messages(first, data, 100_000));
    let request = tonic::Request::from_parts(metadata, extensions, messages);
    tokio::time::timeout(GUARD, client.put_file(request))
        .await
        .expect("PutFile answers within the guard time")
        .map(tonic::Response::into_inner)
}

/// A `GetFile`'s metadata and bytes, checking every chunk is at most 64 KiB.
pub async fn get(
    client: &mut Client,
    request: tonic::Request<proto::GetFileRequest>,
) -> Result<(proto::FileMetadata, Vec<u8>), tonic::Status> {
    let mut stream = client.get_file(request).await?.into_inner();
    let mut metadata = None;
    let mut bytes = Vec::new();
    while let Some(message) = tokio::time::timeout(GUARD, stream.message())
        .await
        .expect("a GetFile message within the guard time")?
    {
        match message.kind.expect("a message has a kind") {
            get_file_response::Kind::Metadata(head) => {
                assert!(metadata.is_none(), "metadata comes once");
                assert!(bytes.is_empty(), "metadata comes first");
                metadata = Some(head);
            }
            get_file_response::Kind::Chunk(chunk) => {
                assert!(metadata.is_some(), "metadata comes first");
                assert!(chunk.len() <= 64 << 10, "a chunk of {} bytes", chunk.len());
                bytes.extend_from_slice(&chunk);
            }
        }
    }
    Ok((metadata.expect("a metadata message"), bytes))
}

pub fn file(session: &str, path: &str) -> proto::GetFileRequest {
    proto::GetFileRequest {
        session_id: session.into(),
        path: path.into(),
        ..Default::default()
    }
}

#[tokio::test]
async fn a_binary_file_goes_in_by_chunks_and_comes_out_whole_and_by_range() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let data = binary();
    assert!(data.contains(&0));
    let put_request = proto::PutFileRequest {
        mode: "755".into(),
        ..target(&session, "bin/blob.dat")
    };
    let answer = put(&mut client, tonic::Request::new(put_request), &data)
        .await
        .expect("the upload is written");
    assert_eq!(answer.bytes, data.len() as u64);
    assert!(answer.path.ends_with("bin/blob.dat"), "{}", answer.path);
    assert_eq!((answer.format.as_str(), answer.entries), ("", 0));
    let on_disk = workspace.join("bin/blob.dat");
    assert!(
        std::fs::read(&on_disk).unwrap() == data,
        "the file on disk is the upload"
    );
    let mode = std::fs::metadata(&on_disk).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o755);

    let (head, whole) = get(
        &mut client,
        tonic::Request::new(file(&session, "bin/blob.dat")),
    )
    .await
    .unwrap();
    assert!(whole == data, "the download equals the upload");
    assert_eq!(
        (head.size, head.offset, head.length),
        (data.len() as u64, 0, data.len() as u64)
    );
    assert!(!head.etag.is_empty());

    let range = proto::GetFileRequest {
        offset: 1000,
        length: 1000,
        ..file(&session, "bin/blob.dat")
    };
    let (head, part) = get(&mut client, tonic::Request::new(range)).await.unwrap();
    assert_eq!(part, data[1000..2000]);
    assert_eq!(
        (head.offset, head.length, head.size),
        (1000, 1000, data.len() as u64)
    );
    let tail = proto::GetFileRequest {
        offset: data.len() as u64 - 10,
        ..file(&session, "bin/blob.dat")
    };
    let (_, bytes) = get(&mut client, tonic::Request::new(tail)).await.unwrap();
    assert_eq!(bytes, data[data.len() - 10..]);
    let past = proto::GetFileRequest {
        offset: data.len() as u64,
        ..file(&session, "bin/blob.dat")
    };
    let refused = get(&mut client, tonic::Request::new(past))
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::OutOfRange, "{refused:?}");

    // The ETag is HTTP's: the same bytes elsewhere have the same tag.
    let http = reqwest::get(format!(
        "{}/v1/sessions/{session}/files/bin/blob.dat",
        toold.base
    ))
    .await
    .unwrap();
    assert_eq!(http.headers()["etag"], head.etag.as_str());
    let missing = get(&mut client, tonic::Request::new(file(&session, "nope.txt")))
        .await
        .unwrap_err();
    assert_eq!(missing.code(), Code::NotFound, "{missing:?}");
}

/// The files of a tar (gzipped or not): path → (content, mode bits).
fn entries(archive: &[u8], gzipped: bool) -> BTreeMap<String, (Vec<u8>, u32)> {
    let reader: Box<dyn Read> = if gzipped {
        Box::new(flate2::read::GzDecoder::new(archive))
    } else {
        Box::new(archive)
    };
    let mut files = BTreeMap::new();
    for entry in tar::Archive::new(reader).entries().unwrap() {
        let mut entry = entry.unwrap();
        if entry.header().entry_type() != tar::EntryType::Regular {
            continue;
        }
        let path = entry.path().unwrap().to_string_lossy().into_owned();
        let path = path.trim_start_matches("./").to_owned();
        let mode = entry.header().mode().unwrap() & 0o777;
        let mut content = Vec::new();
        entry.read_to_end(&mut content).unwrap();
        files.insert(path, (content, mode));
    }
    files
}

fn tar_gz(files: &BTreeMap<String, (Vec<u8>, u32)>) -> Vec<u8> {
    let gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::default());
    let mut builder = tar::Builder::new(gz);
    for (path, (content, mode)) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(content.len() as u64);
        header.set_mode(*mode);
        header.set_entry_type(tar::EntryType::Regular);
        builder
            .append_data(&mut header, path, content.as_slice())
            .unwrap();
    }
    builder.into_inner().unwrap().finish().unwrap()
}

#[tokio::test]
async fn a_directory_goes_in_as_tar_gz_and_comes_out_as_tar_file_by_file() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let files: BTreeMap<String, (Vec<u8>, u32)> = [
        ("README.md", b"# project\n".to_vec(), 0o644),
        ("run.sh", b"#!/bin/sh\necho ran\n".to_vec(), 0o755),
        ("src/lib.rs", b"pub fn f() {}\n".to_vec(), 0o644),
        ("src/data/blob.bin", binary()[..300_000].to_vec(), 0o600),
    ]
    .into_iter()
    .map(|(path, content, mode)| (path.to_owned(), (content, mode)))
    .collect();
    let archive = tar_gz(&files);
    let request = proto::PutFileRequest {
        archive: true,
        ..target(&session, "proj")
    };
    let answer = put(&mut client, tonic::Request::new(request), &archive)
        .await
        .expect("the archive is unpacked");
    assert_eq!(answer.format, "tar.gz");
    // The tar holds no directory entries: one entry per file.
    assert_eq!(answer.entries, files.len() as u64, "{answer:?}");
    let total: usize = files.values().map(|(content, _)| content.len()).sum();
    assert_eq!(answer.bytes, total as u64);
    assert_eq!(
        std::fs::read(workspace.join("proj/run.sh")).unwrap(),
        files["run.sh"].0
    );

    let download = proto::GetFileRequest {
        archive_format: "tar".into(),
        ..file(&session, "proj")
    };
    let (head, tar) = get(&mut client, tonic::Request::new(download))
        .await
        .unwrap();
    assert_eq!(head.format, "tar");
    assert_eq!(entries(&tar, false), files);
    let download = proto::GetFileRequest {
        archive_format: "tar.gz".into(),
        ..file(&session, "proj")
    };
    let (head, gzipped) = get(&mut client, tonic::Request::new(download))
        .await
        .unwrap();
    assert_eq!(head.format, "tar.gz");
    assert_eq!(entries(&gzipped, true), files);

    // A refused archive writes nothing.
    let mut hostile = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(2);
    header.set_mode(0o644);
    header.as_gnu_mut().unwrap().name[..12].copy_from_slice(b"../escape.tx");
    header.set_cksum();
    hostile.append(&header, &b"no"[..]).unwrap();
    let hostile = hostile.into_inner().unwrap();
    let request = proto::PutFileRequest {
        archive: true,
        ..target(&session, "other")
    };
    let refused = put(&mut client, tonic::Request::new(request), &hostile)
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    assert!(!workspace.join("other").exists());
    assert!(!workspace.parent().unwrap().join("escape.tx").exists());
}

#[tokio::test]
async fn refusals_are_the_statuses_the_table_says() {
    let toold = Toold::start();
    let mut client = toold.client().await;
    let read_only = client
        .create_session(proto::CreateSessionRequest {
            permission_mode: "read_only".into(),
            ..Default::default()
        })
        .await
        .unwrap()
        .into_inner();
    let refused = put(
        &mut client,
        tonic::Request::new(target(&read_only.id, "a.txt")),
        b"no",
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::PermissionDenied, "{refused:?}");
    let workspace = std::path::PathBuf::from(&read_only.working_directory);
    assert!(!workspace.join("a.txt").exists());

    let (session, workspace) = toold.session(&mut client).await;
    for path in ["../escape.txt", "sub/../../escape.txt", "/tmp/escape.txt"] {
        let refused = put(
            &mut client,
            tonic::Request::new(target(&session, path)),
            b"no",
        )
        .await
        .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::PermissionDenied,
            "{path}: {refused:?}"
        );
        let refused = get(&mut client, tonic::Request::new(file(&session, path)))
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::PermissionDenied,
            "{path}: {refused:?}"
        );
    }
    assert!(!workspace.parent().unwrap().join("escape.txt").exists());

    // Malformed first messages, and messages HTTP's routes could not express.
    let malformed = [
        (target("", "a.txt"), "session_id is required"),
        (target(&session, ""), "path is required"),
        (
            proto::PutFileRequest {
                archive: true,
                mode: "644".into(),
                ..target(&session, "dir")
            },
            "mode is for file uploads",
        ),
    ];
    for (first, message) in malformed {
        let refused = put(&mut client, tonic::Request::new(first), b"bytes")
            .await
            .unwrap_err();
        assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
        assert!(refused.message().contains(message), "{refused:?}");
    }
    let empty = client
        .put_file(tokio_stream::iter(Vec::<proto::PutFileRequest>::new()))
        .await
        .unwrap_err();
    assert_eq!(empty.code(), Code::InvalidArgument, "{empty:?}");
    let bad_gets = [
        file("", "a.txt"),
        file(&session, ""),
        proto::GetFileRequest {
            archive_format: "zip".into(),
            ..file(&session, ".")
        },
        proto::GetFileRequest {
            archive_format: "tar".into(),
            offset: 5,
            ..file(&session, ".")
        },
    ];
    for request in bad_gets {
        let refused = get(&mut client, tonic::Request::new(request.clone()))
            .await
            .unwrap_err();
        assert_eq!(
            refused.code(),
            Code::InvalidArgument,
            "{request:?}: {refused:?}"
        );
    }
    let mode = proto::PutFileRequest {
        mode: "9x".into(),
        ..target(&session, "a.txt")
    };
    let refused = put(&mut client, tonic::Request::new(mode), b"x")
        .await
        .unwrap_err();
    assert_eq!(refused.code(), Code::InvalidArgument, "{refused:?}");
    let unknown = "sess_00000000000000000000000000000000";
    let refused = put(
        &mut client,
        tonic::Request::new(target(unknown, "a.txt")),
        b"x",
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::NotFound, "{refused:?}");
}

#[tokio::test]
async fn an_upload_past_max_upload_mb_is_resource_exhausted_and_leaves_nothing() {
    let config = tempfile::tempdir().unwrap();
    let file_path = config.path().join("toold.toml");
    std::fs::write(&file_path, "[environments]\nmax_upload_mb = 1\n").unwrap();
    let toold = Toold::start_with(&["--config", file_path.to_str().unwrap()]);
    let mut client = toold.client().await;
    let (session, workspace) = toold.session(&mut client).await;
    let data = binary();
    let refused = put(
        &mut client,
        tonic::Request::new(target(&session, "big.bin")),
        &data,
    )
    .await
    .unwrap_err();
    assert_eq!(refused.code(), Code::ResourceExhausted, "{refused:?}");
    assert!(!workspace.join("big.bin").exists());
    // Under the limit the same stream is written.
    let answer = put(
        &mut client,
        tonic::Request::new(target(&session, "small.bin")),
        &data[..512 << 10],
    )
    .await
    .expect("under the limit");
    assert_eq!(answer.bytes, 512 << 10);
}
