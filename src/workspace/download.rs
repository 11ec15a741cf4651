//! Out of the workspace: one file opened with its size and ETag (the content's XXH3-128, so
//! the same bytes have the same tag wherever they are), or a directory packed as a tar (or
//! tar.gz) while it is sent.
//!
//! Packing runs on a blocking thread writing into a bounded channel of chunks: the response
//! takes them as fast as the client reads, and the packer waits when the channel is full, so a
//! download of any size holds a few chunks at most. Symlinks are packed as symlinks, never
//! followed; FIFOs, sockets and devices are left out, and so are transfers in flight
//! (`.toold-upload-*`, `.toold-put-*`). Entries carry their permission bits.

use std::fs;
use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};

use bytes::Bytes;
use tokio::sync::{mpsc, oneshot};

use super::files::CHUNK;

/// A file ready to be sent.
pub struct FileReady {
    pub file: fs::File,
    pub size: u64,
    /// Quoted, as the header carries it.
    pub etag: String,
    /// Told the bytes actually sent, when the body ends or is dropped.
    pub sent: oneshot::Sender<u64>,
}

/// Opens `path` (a regular file) and hashes it; the receiver hears the bytes sent.
pub async fn open_file(path: &Path) -> Result<(FileReady, oneshot::Receiver<u64>), String> {
    let path = path.to_path_buf();
    let opened = tokio::task::spawn_blocking(move || -> Result<(fs::File, u64, String), String> {
        let shown = path.display().to_string();
        let file =
            fs::File::open(&path).map_err(|err| format!("cannot open \"{shown}\": {err}"))?;
        let meta = file
            .metadata()
            .map_err(|err| format!("\"{shown}\": {err}"))?;
        if !meta.is_file() {
            return Err(format!("\"{shown}\" is not a regular file"));
        }
        let mut hasher = xxhash_rust::xxh3::Xxh3::new();
        let mut reader = &file;
        let mut buf = vec![0u8; CHUNK];
        loop {
            let n = reader
                .read(&mut buf)
                .map_err(|err| format!("reading \"{shown}\": {err}"))?;
            if n == 0 {
                break;
            }
            hasher.update(&buf[..n]);
        }
        Ok((file, meta.len(), format!("\"{:032x}\"", hasher.digest128())))
    })
    .await
    .map_err(|err| err.to_string())??;
    let (file, size, etag) = opened;
    let (sent, heard) = oneshot::channel();
    Ok((
        FileReady {
            file,
            size,
            etag,
            sent,
        },
        heard,
    ))
}

/// A packed directory's chunks, in order; an error ends it.
pub struct ArchiveStream {
    pub chunks: mpsc::Receiver<io::Result<Bytes>>,
}

/// What was packed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Packed {
    pub entries: u64,
    pub bytes: u64,
}

/// Starts packing `dir`; the stream of chunks, and the packer (its counts when it ends).
pub fn pack(
    dir: PathBuf,
    gzip: bool,
) -> io::Result<(ArchiveStream, tokio::task::JoinHandle<io::Result<Packed>>)> {
    if !fs::metadata(&dir)?.is_dir() {
        return Err(io::Error::new(
            io::ErrorKind::InvalidInput,
            format!("\"{}\" is not a directory", dir.display()),
        ));
    }
    let (tx, chunks) = mpsc::channel(8);
    let packer = tokio::task::spawn_blocking(move || {
        let writer = ChannelWriter {
            tx: tx.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let result = if gzip {
            let gz = flate2::write::GzEncoder::new(writer, flate2::Compression::fast());
            pack_into(gz, &dir)
                .and_then(|(gz, packed)| gz.finish().and_then(finish).map(|()| packed))
        } else {
            pack_into(writer, &dir).and_then(|(w, packed)| finish(w).map(|()| packed))
        };
        if let Err(err) = &result {
            let _ = tx.blocking_send(Err(io::Error::new(err.kind(), err.to_string())));
        }
        result
    });
    Ok((ArchiveStream { chunks }, packer))
}

fn finish(mut writer: ChannelWriter) -> io::Result<()> {
    writer.flush()
}

fn pack_into<W: Write>(out: W, dir: &Path) -> io::Result<(W, Packed)> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut packed = Packed::default();
    let mut stack = vec![PathBuf::new()];
    while let Some(rel) = stack.pop() {
        let mut names: Vec<_> = fs::read_dir(dir.join(&rel))?
            .filter_map(Result::ok)
            .map(|e| e.file_name())
            .filter(|n| {
                let n = n.to_string_lossy();
                !n.starts_with(".toold-upload-") && !n.starts_with(".toold-put-")
            })
            .collect();
        names.sort();
        for name in names.into_iter().rev() {
            let rel = rel.join(name);
            let abs = dir.join(&rel);
            let meta = fs::symlink_metadata(&abs)?;
            let kind = meta.file_type();
            if kind.is_dir() {
                builder.append_dir(&rel, &abs)?;
                stack.push(rel);
            } else if kind.is_file() || kind.is_symlink() {
                builder.append_path_with_name(&abs, &rel)?;
                packed.bytes += if kind.is_file() { meta.len() } else { 0 };
            } else {
                continue;
            }
            packed.entries += 1;
        }
    }
    Ok((builder.into_inner()?, packed))
}

/// Chunks written into the channel the response reads; waits while it is full.
struct ChannelWriter {
    tx: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            io::Error::new(io::ErrorKind::BrokenPipe, "the download's client went away")
        })
    }
}

impl Write for ChannelWriter {
    fn write(&mut self, data: &[u8]) -> io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= CHUNK {
            self.send()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        self.send()
    }
}
