//! `toold cp SRC DST` (DESIGN §12, "The terminal client"): a local directory or file into a
//! session's workspace, or out of it, over the workspace endpoints
//! (`POST`/`GET /v1/sessions/{id}/archive`, `PUT`/`GET /v1/sessions/{id}/files/{path}`).
//!
//! Exactly one side is `SESSION:PATH`, read as scp reads it: an argument is remote when a `:`
//! comes before any `/` and it does not start with `.` or `/` (so `./a:b` and `/tmp/a:b` are
//! local). `SESSION:` alone is the session's workspace (its `workdir`).
//!
//! Decisions where the issue is silent:
//! - A directory's *contents* become the destination directory's contents on either side
//!   (rsync's `SRC/ DST/`), never `DST/SRC`: the API's `archive?path=DIR` unpacks into DIR,
//!   and the download mirrors it. A missing local destination directory is created.
//! - Uploads stream: a directory is packed as a tar on a blocking thread into a bounded
//!   channel that is the request's body (a few 64 KiB chunks in memory, whatever the size);
//!   a regular file is sent as it is read, its permission bits as `?mode=`. Symlinks are
//!   packed as symlinks, never followed; FIFOs, sockets and devices are left out (the daemon
//!   refuses them) with a note on stderr. A remote file path ending in `/` (or `SESSION:`)
//!   gets the local file's name.
//! - Downloads do not know whether the remote path is a file or a directory, and the API has
//!   no stat: the archive is asked for first (directories are the common case), and when the
//!   daemon answers `invalid_request` (its answer for a path that is not a directory) the
//!   file endpoint is asked. When both refuse, the archive's refusal is the one reported (the
//!   path is wrong in the same way for both). A file lands at DST, or DST/NAME when DST is a
//!   directory, through a temporary file renamed at the end, so a cut transfer leaves no half
//!   file; the file endpoint carries no mode, so a single file comes down as `cp` makes one
//!   (a new file `0666` less the umask, an existing one keeping its mode); a directory's
//!   entries keep theirs, from the tar.
//! - An archive is unpacked with the tar crate's `unpack_in`, which refuses absolute paths,
//!   `..` and links leading outside; a refused entry stops the copy with its name. Entries
//!   are written as they arrive, so a directory download cut short leaves the entries before
//!   the cut (a second `cp` overwrites them).
//! - A directory upload the daemon refuses mid-stream (an entry it will not write) reports
//!   the daemon's answer, not the closed body the packer saw; the daemon writes nothing of
//!   a refused archive.
//! - The session is looked up first (`GET /v1/sessions/{id}`), so an unknown one is named
//!   before anything is packed or written.
//! - Progress: when stderr is a terminal, one line rewritten at most every 100 ms with the
//!   bytes so far; nothing otherwise. `-o json` prints the daemon's answer to an upload, or
//!   what was written for a download.

use std::io::{self, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use bytes::Bytes;
use futures::{StreamExt, TryStreamExt};
use serde_json::{Value, json};
use tokio::sync::mpsc;

use super::progress::Progress;
use super::wire::{ApiClient, ClientError, encode};
use super::{ExitStatus, Output};

/// One side of `toold cp`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Location {
    Local(PathBuf),
    Remote { session: String, path: String },
}

impl Location {
    /// `SESSION:PATH` or a local path (see the module's header).
    pub fn parse(text: &str) -> Location {
        if text.starts_with('.') || text.starts_with('/') {
            return Location::Local(PathBuf::from(text));
        }
        match text.split_once(':') {
            Some((session, path)) if !session.is_empty() && !session.contains('/') => {
                Location::Remote {
                    session: session.to_owned(),
                    path: path.to_owned(),
                }
            }
            _ => Location::Local(PathBuf::from(text)),
        }
    }
}

/// Bytes a chunk of a packed upload holds before it is sent.
const CHUNK: usize = 64 * 1024;

pub async fn cp(
    client: &ApiClient,
    source: &str,
    destination: &str,
    output: Output,
) -> Result<ExitStatus, ClientError> {
    let answer = match (Location::parse(source), Location::parse(destination)) {
        (Location::Local(_), Location::Local(_)) => {
            return Err(ClientError::Usage(format!(
                "toold cp copies between this machine and a session: neither \"{source}\" nor \
                 \"{destination}\" names one (write SESSION:PATH)"
            )));
        }
        (Location::Remote { .. }, Location::Remote { .. }) => {
            return Err(ClientError::Usage(format!(
                "toold cp copies between this machine and a session: \"{source}\" and \
                 \"{destination}\" are both in a session (one side must be a local path; \
                 write ./{source} for a local path holding a colon)"
            )));
        }
        (Location::Local(local), Location::Remote { session, path }) => {
            let remote = Remote::find(client, session, path).await?;
            upload(client, &local, &remote).await?
        }
        (Location::Remote { session, path }, Location::Local(local)) => {
            let remote = Remote::find(client, session, path).await?;
            download(client, &remote, &local).await?
        }
    };
    if output == Output::Json {
        let text = serde_json::to_string_pretty(&answer)
            .map_err(|err| ClientError::Failed(format!("the answer does not print: {err}")))?;
        writeln!(io::stdout().lock(), "{text}")?;
    }
    Ok(ExitStatus::Done)
}

/// A path in a session known to exist.
struct Remote {
    session: String,
    path: String,
}

impl Remote {
    async fn find(
        client: &ApiClient,
        session: String,
        path: String,
    ) -> Result<Remote, ClientError> {
        let lookup = format!("/v1/sessions/{}", encode(&session));
        match client.get_json(&lookup).await {
            Ok(_) => Ok(Remote { session, path }),
            Err(ClientError::Refused { status: 404, .. }) => Err(ClientError::Failed(format!(
                "no session \"{session}\" at {} (toold sessions lists them)",
                client.base()
            ))),
            Err(err) => Err(err),
        }
    }

    /// `SESSION:PATH` as the user wrote it, for messages.
    fn shown(&self) -> String {
        format!("{}:{}", self.session, self.path)
    }

    /// `/v1/sessions/{id}/archive`, with `?path=` unless it is the workspace.
    fn archive_path(&self, download: bool) -> String {
        let mut query = Vec::new();
        if !self.path.is_empty() {
            query.push(format!("path={}", encode(&self.path)));
        }
        if download {
            query.push("format=tar".to_owned());
        }
        let query = if query.is_empty() {
            String::new()
        } else {
            format!("?{}", query.join("&"))
        };
        format!("/v1/sessions/{}/archive{query}", encode(&self.session))
    }

    /// `/v1/sessions/{id}/files/{path}` for `path`.
    fn file_path(&self, path: &str) -> String {
        format!(
            "/v1/sessions/{}/files/{}",
            encode(&self.session),
            file_url_path(path)
        )
    }
}

/// What the path escapes: all but RFC 3986's unreserved characters, `/` included.
const SEGMENT: &percent_encoding::AsciiSet = &percent_encoding::NON_ALPHANUMERIC
    .remove(b'.')
    .remove(b'-')
    .remove(b'_')
    .remove(b'~');

/// `path` as the rest of a files URL: one segment, its `/` escaped, which the daemon's route
/// decodes back into the path. Not a segment per directory: the URL parser would fold `a/../b`
/// into `b` (and `%2E%2E` is a dot segment to it as well), so a path out of the workspace
/// would reach another endpoint instead of being refused by the session's mode. `.` and
/// `..` alone are dot segments too, so they travel as `./.` and `./..`.
fn file_url_path(path: &str) -> String {
    let path = if path == "." || path == ".." {
        format!("./{path}")
    } else {
        path.to_owned()
    };
    percent_encoding::utf8_percent_encode(&path, SEGMENT).to_string()
}

async fn upload(client: &ApiClient, local: &Path, remote: &Remote) -> Result<Value, ClientError> {
    let meta = tokio::fs::metadata(local).await.map_err(|err| {
        ClientError::Failed(format!("cannot read \"{}\": {err}", local.display()))
    })?;
    if meta.is_dir() {
        upload_directory(client, local, remote).await
    } else if meta.is_file() {
        upload_file(client, local, &meta, remote).await
    } else {
        Err(ClientError::Failed(format!(
            "\"{}\" is neither a directory nor a regular file",
            local.display()
        )))
    }
}

/// Packs `local` into the request body as it is sent.
async fn upload_directory(
    client: &ApiClient,
    local: &Path,
    remote: &Remote,
) -> Result<Value, ClientError> {
    let (chunks, receiver) = mpsc::channel::<io::Result<Bytes>>(8);
    let root = local.to_path_buf();
    let packer = tokio::task::spawn_blocking(move || {
        let writer = ChannelWriter {
            chunks: chunks.clone(),
            buf: Vec::with_capacity(CHUNK),
        };
        let packed = pack(writer, &root);
        if let Err(err) = &packed {
            // The body ends in an error, so the daemon sees a cut upload, not a short one.
            let _ = chunks.blocking_send(Err(io::Error::new(err.kind(), err.to_string())));
        }
        packed
    });
    let progress = Arc::new(Progress::start("sent"));
    let counted = progress.clone();
    let body = tokio_stream::wrappers::ReceiverStream::new(receiver)
        .inspect_ok(move |chunk| counted.add(chunk.len()));
    let path = remote.archive_path(false);
    let request = client
        .request(reqwest::Method::POST, &path)
        .header("content-type", "application/x-tar")
        .body(reqwest::Body::wrap_stream(body));
    let sent = client.send(request, &remote.shown()).await;
    let packed = packer
        .await
        .map_err(|err| ClientError::Failed(format!("the packer stopped: {err}")))?;
    progress.finish();
    match (sent, packed) {
        // The daemon refused before the end (an entry it will not write): its answer says
        // why, and the packer only saw the body closed under it.
        (Err(refused @ (ClientError::Refused { .. } | ClientError::Auth { .. })), _) => {
            Err(refused)
        }
        // A packing error explains a cut upload better than the transport's error does.
        (_, Err(err)) if err.kind() != io::ErrorKind::BrokenPipe => Err(ClientError::Failed(
            format!("cannot pack \"{}\": {err}", local.display()),
        )),
        (sent, _) => client.read_json(sent?, &remote.shown()).await,
    }
}

/// Sends one regular file, its permission bits as `?mode=`.
async fn upload_file(
    client: &ApiClient,
    local: &Path,
    meta: &std::fs::Metadata,
    remote: &Remote,
) -> Result<Value, ClientError> {
    use std::os::unix::fs::PermissionsExt;
    let name = local
        .file_name()
        .map(|name| name.to_string_lossy().into_owned())
        .unwrap_or_default();
    let target = if remote.path.is_empty() || remote.path.ends_with('/') {
        format!("{}{name}", remote.path)
    } else {
        remote.path.clone()
    };
    let file = tokio::fs::File::open(local).await.map_err(|err| {
        ClientError::Failed(format!("cannot read \"{}\": {err}", local.display()))
    })?;
    let mode = meta.permissions().mode() & 0o777;
    let progress = Arc::new(Progress::start("sent"));
    let counted = progress.clone();
    let body = tokio_util::io::ReaderStream::with_capacity(file, CHUNK)
        .inspect_ok(move |chunk| counted.add(chunk.len()));
    let path = format!("{}?mode={mode:o}", remote.file_path(&target));
    let request = client
        .request(reqwest::Method::PUT, &path)
        .header("content-type", "application/octet-stream")
        .header("content-length", meta.len())
        .body(reqwest::Body::wrap_stream(body));
    let shown = format!("{}:{target}", remote.session);
    let sent = client.send(request, &shown).await;
    progress.finish();
    client.read_json(sent?, &shown).await
}

/// Asks for the archive first, the file when the path is not a directory.
async fn download(client: &ApiClient, remote: &Remote, local: &Path) -> Result<Value, ClientError> {
    let archive = client
        .send(
            client.request(reqwest::Method::GET, &remote.archive_path(true)),
            &remote.shown(),
        )
        .await;
    match archive {
        Ok(response) => unpack(response, local).await,
        Err(refused @ ClientError::Refused { status: 400, .. }) if !remote.path.is_empty() => {
            let path = remote.file_path(&remote.path);
            match client
                .send(client.request(reqwest::Method::GET, &path), &remote.shown())
                .await
            {
                Ok(response) => save_file(response, &remote.path, local).await,
                Err(ClientError::Refused { status: 400, .. }) => Err(refused),
                Err(err) => Err(err),
            }
        }
        Err(err) => Err(err),
    }
}

/// Unpacks the tar of `response` into directory `local` (created when missing).
async fn unpack(response: reqwest::Response, local: &Path) -> Result<Value, ClientError> {
    let shown = local.display().to_string();
    if local.exists() && !local.is_dir() {
        return Err(ClientError::Failed(format!(
            "\"{shown}\" is not a directory: a directory comes down into one"
        )));
    }
    std::fs::create_dir_all(local)
        .map_err(|err| ClientError::Failed(format!("cannot create \"{shown}\": {err}")))?;
    let progress = Arc::new(Progress::start("received"));
    let counted = progress.clone();
    let stream = response
        .bytes_stream()
        .inspect_ok(move |chunk| counted.add(chunk.len()))
        .map_err(io::Error::other);
    // The blocking unpacker reads the async body through the bridge, on this runtime.
    let reader = tokio_util::io::SyncIoBridge::new(tokio_util::io::StreamReader::new(stream));
    let root = local.to_path_buf();
    let unpacked = tokio::task::spawn_blocking(move || unpack_into(reader, &root))
        .await
        .map_err(|err| ClientError::Failed(format!("the unpacker stopped: {err}")))?;
    progress.finish();
    let entries = unpacked
        .map_err(|err| ClientError::Failed(format!("cannot unpack into \"{shown}\": {err}")))?;
    Ok(json!({"path": shown, "entries": entries, "bytes": progress.bytes()}))
}

/// Each entry of the tar `reader` into `root`; how many.
fn unpack_into(reader: impl io::Read, root: &Path) -> io::Result<u64> {
    let mut archive = tar::Archive::new(reader);
    archive.set_preserve_permissions(true);
    let mut entries = 0;
    for entry in archive.entries()? {
        let mut entry = entry?;
        let name = entry.path()?.display().to_string();
        if !entry.unpack_in(root)? {
            return Err(io::Error::new(
                io::ErrorKind::InvalidData,
                format!("refused entry \"{name}\": it leads outside the destination"),
            ));
        }
        entries += 1;
    }
    Ok(entries)
}

/// Writes the file of `response` to `local` (or `local/NAME` for a directory), whole or not
/// at all.
async fn save_file(
    response: reqwest::Response,
    remote_path: &str,
    local: &Path,
) -> Result<Value, ClientError> {
    let target = if local.is_dir() {
        let name = remote_path
            .rsplit('/')
            .find(|s| !s.is_empty())
            .unwrap_or("");
        local.join(name)
    } else {
        local.to_path_buf()
    };
    let shown = target.display().to_string();
    let cannot = |err: io::Error| ClientError::Failed(format!("cannot write \"{shown}\": {err}"));
    let parent = match target.parent() {
        Some(parent) if !parent.as_os_str().is_empty() => parent.to_path_buf(),
        _ => PathBuf::from("."),
    };
    let partial = partial_file(&parent, &target).map_err(cannot)?;
    let mut file = tokio::fs::File::from_std(partial.reopen().map_err(cannot)?);
    let progress = Progress::start("received");
    let mut body = response.bytes_stream();
    while let Some(chunk) = body.next().await {
        let chunk = chunk.map_err(|err| {
            ClientError::Failed(format!(
                "the download of \"{remote_path}\" was cut short: {}",
                super::wire::error_chain(&err)
            ))
        })?;
        tokio::io::AsyncWriteExt::write_all(&mut file, &chunk)
            .await
            .map_err(cannot)?;
        progress.add(chunk.len());
    }
    tokio::io::AsyncWriteExt::flush(&mut file)
        .await
        .map_err(cannot)?;
    progress.finish();
    partial.persist(&target).map_err(|err| cannot(err.error))?;
    Ok(json!({"path": shown, "entries": 1, "bytes": progress.bytes()}))
}

/// A temporary file beside `target`, with `target`'s permissions when it exists (as `cp`
/// keeps them) and else those of a new file (`0666` less the umask).
fn partial_file(parent: &Path, target: &Path) -> io::Result<tempfile::NamedTempFile> {
    use std::os::unix::fs::PermissionsExt;
    let existing = std::fs::metadata(target).ok().filter(|meta| meta.is_file());
    let mut builder = tempfile::Builder::new();
    builder.prefix(".toold-cp-");
    if existing.is_none() {
        builder.permissions(std::fs::Permissions::from_mode(0o666));
    }
    let partial = builder.tempfile_in(parent)?;
    if let Some(meta) = existing {
        partial.as_file().set_permissions(meta.permissions())?;
    }
    Ok(partial)
}

/// Writes `root`'s entries (not `root` itself) into a tar on `out`, names relative to it.
fn pack<W: Write>(out: W, root: &Path) -> io::Result<()> {
    let mut builder = tar::Builder::new(out);
    builder.follow_symlinks(false);
    let mut stack = vec![PathBuf::new()];
    while let Some(relative) = stack.pop() {
        let mut names: Vec<_> = std::fs::read_dir(root.join(&relative))?
            .map(|entry| entry.map(|entry| entry.file_name()))
            .collect::<io::Result<_>>()?;
        names.sort();
        for name in names {
            let relative = relative.join(name);
            let absolute = root.join(&relative);
            let kind = std::fs::symlink_metadata(&absolute)?.file_type();
            if kind.is_dir() {
                builder.append_dir(&relative, &absolute)?;
                stack.push(relative);
            } else if kind.is_file() || kind.is_symlink() {
                builder.append_path_with_name(&absolute, &relative)?;
            } else {
                eprintln!(
                    "toold: left out \"{}\": not a file, directory or symlink",
                    absolute.display()
                );
            }
        }
    }
    builder.into_inner()?.flush()
}

/// A `Write` that sends what it is given as chunks of the request body.
struct ChannelWriter {
    chunks: mpsc::Sender<io::Result<Bytes>>,
    buf: Vec<u8>,
}

impl ChannelWriter {
    fn send(&mut self) -> io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = Bytes::from(std::mem::replace(&mut self.buf, Vec::with_capacity(CHUNK)));
        self.chunks
            .blocking_send(Ok(chunk))
            .map_err(|_| io::Error::new(io::ErrorKind::BrokenPipe, "the upload was cut short"))
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arguments_are_local_or_in_a_session_as_scp_reads_them() {
        let remote = |session: &str, path: &str| Location::Remote {
            session: session.into(),
            path: path.into(),
        };
        let local = |path: &str| Location::Local(PathBuf::from(path));
        let cases = [
            ("sess_1:src", remote("sess_1", "src")),
            ("sess_1:/workspace/src", remote("sess_1", "/workspace/src")),
            ("sess_1:", remote("sess_1", "")),
            ("sess_1:a:b", remote("sess_1", "a:b")),
            ("./sess_1:src", local("./sess_1:src")),
            ("/tmp/a:b", local("/tmp/a:b")),
            ("dir/a:b", local("dir/a:b")),
            (":src", local(":src")),
            ("src", local("src")),
            (".", local(".")),
        ];
        for (text, expected) in cases {
            assert_eq!(Location::parse(text), expected, "{text}");
        }
    }

    /// A tar of one entry named `name` (written raw: the tar crate's builder refuses `..`).
    fn tar_of(name: &str) -> Vec<u8> {
        let mut header = tar::Header::new_old();
        header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
        header.set_size(4);
        header.set_mode(0o644);
        header.set_entry_type(tar::EntryType::Regular);
        header.set_cksum();
        let mut archive = header.as_bytes().to_vec();
        archive.extend_from_slice(b"evil");
        archive.resize(archive.len() + 508 + 1024, 0);
        archive
    }

    #[test]
    fn an_entry_leading_outside_the_destination_is_refused() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("out");
        std::fs::create_dir(&root).unwrap();
        let refused = unpack_into(&tar_of("../evil.txt")[..], &root).unwrap_err();
        assert!(refused.to_string().contains("../evil.txt"), "{refused}");
        assert!(!dir.path().join("evil.txt").exists());
        assert_eq!(unpack_into(&tar_of("fine.txt")[..], &root).unwrap(), 1);
        assert_eq!(std::fs::read(root.join("fine.txt")).unwrap(), b"evil");
    }

    #[test]
    fn file_paths_become_one_url_segment() {
        assert_eq!(file_url_path("src/lib.rs"), "src%2Flib.rs");
        assert_eq!(file_url_path("a b/c+d%"), "a%20b%2Fc%2Bd%25");
        assert_eq!(file_url_path("/workspace/src"), "%2Fworkspace%2Fsrc");
        assert_eq!(file_url_path("../x"), "..%2Fx");
        assert_eq!(file_url_path(".."), ".%2F..");
    }
}
