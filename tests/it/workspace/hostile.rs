//! Hostile archives write nothing: each is refused with 400 (413 for the size limits) naming
//! the entry and the reason, and the workspace's listing and hashes are what they were.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::Path;

use reqwest::StatusCode;

use super::archives::zip_of;
use super::post_archive;
use crate::http::harness::Toold;

/// Every entry under `dir` (links not followed): path → kind, mode and content hash.
fn listing(dir: &Path) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let rel = path
                .strip_prefix(dir)
                .unwrap()
                .to_string_lossy()
                .into_owned();
            let what = if meta.is_dir() {
                stack.push(path.clone());
                "dir".to_owned()
            } else if meta.file_type().is_symlink() {
                format!("link {}", std::fs::read_link(&path).unwrap().display())
            } else {
                let hash = xxhash_rust::xxh3::xxh3_128(&std::fs::read(&path).unwrap());
                format!("file {hash:032x}")
            };
            out.insert(rel, format!("{what} {:o}", meta.permissions().mode()));
        }
    }
    out
}

/// A tar entry written byte by byte, so names the `tar` crate's setters refuse can be made.
fn raw_entry(out: &mut Vec<u8>, name: &str, kind: u8, link: &str, data: &[u8]) {
    let mut header = tar::Header::new_old();
    header.as_old_mut().name[..name.len()].copy_from_slice(name.as_bytes());
    header.as_old_mut().linkname[..link.len()].copy_from_slice(link.as_bytes());
    header.set_mode(0o644);
    header.set_size(data.len() as u64);
    header.set_entry_type(tar::EntryType::new(kind));
    header.set_cksum();
    out.extend_from_slice(header.as_bytes());
    out.extend_from_slice(data);
    out.resize(out.len().div_ceil(512) * 512, 0);
}

fn tar_of(entries: &[(&str, u8, &str, &[u8])]) -> Vec<u8> {
    let mut out = Vec::new();
    for (name, kind, link, data) in entries {
        raw_entry(&mut out, name, *kind, link, data);
    }
    out.resize(out.len() + 1024, 0);
    out
}

fn gzip(data: &[u8]) -> Vec<u8> {
    let mut gz = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::best());
    std::io::Write::write_all(&mut gz, data).unwrap();
    gz.finish().unwrap()
}

/// Uploads `body`, expects `status` naming `entry` and `reason`, and nothing changed.
async fn refused(
    toold: &Toold,
    session: &str,
    what: &str,
    body: Vec<u8>,
    status: StatusCode,
    entry: &str,
    reason: &str,
) {
    let workspace = toold.workspace(session).await;
    let before = listing(&workspace);
    let reply = post_archive(toold, session, None, body).await;
    assert_eq!(reply.status, status, "{what}: {}", reply.body);
    let message = reply.body["error"]["message"].as_str().unwrap_or_default();
    assert!(
        message.contains(entry) && message.contains(reason),
        "{what}: {message}"
    );
    assert_eq!(listing(&workspace), before, "{what} wrote something");
}

#[tokio::test]
async fn every_hostile_archive_is_refused_and_writes_nothing() {
    let toold =
        Toold::start_with_config("[environments]\nmax_upload_entries = 20\nmax_upload_mb = 64\n");
    let session = toold.session().await;
    let workspace = toold.workspace(&session).await;
    std::fs::write(workspace.join("kept.txt"), "before").unwrap();
    std::fs::create_dir(workspace.join("sub")).unwrap();
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), workspace.join("out")).unwrap();
    let (file, dir, symlink, hard, chr, blk, fifo) = (b'0', b'5', b'2', b'1', b'3', b'4', b'6');
    let bad = StatusCode::BAD_REQUEST;
    let cases: Vec<(&str, Vec<u8>, StatusCode, &str, &str)> = vec![
        (
            "absolute path",
            tar_of(&[("good.txt", file, "", b"x"), ("/tmp/evil", file, "", b"x")]),
            bad,
            "/tmp/evil",
            "absolute",
        ),
        (
            "dot-dot",
            tar_of(&[
                ("good.txt", file, "", b"x"),
                ("a/../../evil", file, "", b"x"),
            ]),
            bad,
            "a/../../evil",
            "..",
        ),
        (
            "absolute symlink",
            tar_of(&[("link", symlink, "/etc", b"")]),
            bad,
            "link",
            "outside",
        ),
        (
            "climbing symlink",
            tar_of(&[("d/link", symlink, "../../x", b"")]),
            bad,
            "d/link",
            "outside",
        ),
        (
            "hard link out",
            tar_of(&[("h", hard, "/etc/passwd", b"")]),
            bad,
            "\"h\"",
            "hard link",
        ),
        (
            "hard link to nothing",
            tar_of(&[("h", hard, "missing", b"")]),
            bad,
            "\"h\"",
            "not an earlier file",
        ),
        (
            "write through a symlink",
            tar_of(&[("s", symlink, "sub", b""), ("s/evil", file, "", b"x")]),
            bad,
            "s/evil",
            "beneath the symlink",
        ),
        (
            "char device",
            tar_of(&[("null", chr, "", b"")]),
            bad,
            "null",
            "device",
        ),
        (
            "block device",
            tar_of(&[("sda", blk, "", b"")]),
            bad,
            "sda",
            "device",
        ),
        (
            "FIFO",
            tar_of(&[("pipe", fifo, "", b"")]),
            bad,
            "pipe",
            "FIFO",
        ),
        (
            "through the workspace's symlink",
            tar_of(&[("out/evil", file, "", b"x")]),
            bad,
            "\"out\"",
            "symlink",
        ),
        (
            "a file over a directory",
            tar_of(&[("sub", file, "", b"x")]),
            bad,
            "sub",
            "directory",
        ),
        (
            "a directory over a file",
            tar_of(&[("kept.txt/", dir, "", b"")]),
            bad,
            "kept.txt",
            "file",
        ),
        (
            "not an archive",
            b"just some text, no archive at all".to_vec(),
            bad,
            "",
            "not a tar, tar.gz or zip",
        ),
        (
            "truncated gzip",
            gzip(&tar_of(&[("a", file, "", &[1; 5000])]))[..40].to_vec(),
            bad,
            "",
            "archive",
        ),
        (
            "zip with dot-dot",
            zip_of(&[("ok.txt", b"x", 0o644), ("../evil", b"x", 0o644)]),
            bad,
            "../evil",
            "..",
        ),
        (
            "zip with an absolute path",
            zip_of(&[("/etc/evil", b"x", 0o644)]),
            bad,
            "/etc/evil",
            "absolute",
        ),
        (
            "zip symlink out",
            zip_of(&[("l", b"/etc", 0o120777)]),
            bad,
            "\"l\"",
            "outside",
        ),
    ];
    for (what, body, status, entry, reason) in cases {
        refused(&toold, &session, what, body, status, entry, reason).await;
    }
    // The limits: 413.
    let many: Vec<String> = (0..21).map(|i| format!("f{i}")).collect();
    let entries: Vec<(&str, u8, &str, &[u8])> = many
        .iter()
        .map(|n| (n.as_str(), file, "", &b"x"[..]))
        .collect();
    refused(
        &toold,
        &session,
        "too many entries",
        tar_of(&entries),
        StatusCode::PAYLOAD_TOO_LARGE,
        "f20",
        "max_upload_entries",
    )
    .await;
    let big = vec![7u8; 65 << 20];
    refused(
        &toold,
        &session,
        "too many bytes",
        tar_of(&[("big", file, "", &big)]),
        StatusCode::PAYLOAD_TOO_LARGE,
        "big",
        "max_upload_mb",
    )
    .await;
    let zeros = vec![0u8; 60 << 20];
    refused(
        &toold,
        &session,
        "tar.gz bomb",
        gzip(&tar_of(&[("zeros", file, "", &zeros)])),
        StatusCode::PAYLOAD_TOO_LARGE,
        "zeros",
        "compression ratio",
    )
    .await;
    refused(
        &toold,
        &session,
        "zip bomb",
        zip_of(&[("zeros", &zeros, 0o644)]),
        StatusCode::PAYLOAD_TOO_LARGE,
        "zeros",
        "compression ratio",
    )
    .await;
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    // A link that stays inside is fine.
    let fine = tar_of(&[
        ("sub/real.txt", file, "", b"real"),
        ("sub/alias", symlink, "real.txt", b""),
    ]);
    let reply = post_archive(&toold, &session, None, fine).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(std::fs::read(workspace.join("sub/alias")).unwrap(), b"real");
    // A target outside the workspace needs danger_full_access, as for write_file.
    let reply = post_archive(
        &toold,
        &session,
        Some("%2E%2E%2Fx"),
        tar_of(&[("a", file, "", b"x")]),
    )
    .await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
}
