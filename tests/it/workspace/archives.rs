//! Archives in and out: a real source tree (a crate from the machine's cargo registry) as a
//! tar.gz, seen by `grep_search` and `bash` (its script runs by the executable bit it came
//! with), and downloaded again equal file by file; zip and tar uploads; a directory target.

use std::collections::BTreeMap;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

use reqwest::StatusCode;
use serde_json::json;

use super::{get_bytes, post_archive};
use crate::http::harness::Toold;

/// A crate's source directory from this machine's cargo registry.
fn registry_crate() -> PathBuf {
    let home = std::env::var_os("CARGO_HOME")
        .map(PathBuf::from)
        .unwrap_or_else(|| PathBuf::from(std::env::var_os("HOME").unwrap()).join(".cargo"));
    let src = home.join("registry/src");
    let mut found: Vec<PathBuf> = std::fs::read_dir(&src)
        .unwrap_or_else(|err| panic!("{}: {err}", src.display()))
        .flatten()
        .flat_map(|index| {
            std::fs::read_dir(index.path())
                .into_iter()
                .flatten()
                .flatten()
        })
        .map(|entry| entry.path())
        .filter(|p| {
            p.file_name()
                .unwrap()
                .to_string_lossy()
                .starts_with("memchr-2")
        })
        .collect();
    found.sort();
    found
        .pop()
        .expect("a memchr-2.* crate under ~/.cargo/registry/src")
}

/// Every file under `dir`: relative path → (content, executable).
pub fn tree(dir: &Path) -> BTreeMap<String, (Vec<u8>, bool)> {
    let mut files = BTreeMap::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(at) = stack.pop() {
        for entry in std::fs::read_dir(&at).unwrap().flatten() {
            let path = entry.path();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            if meta.is_dir() {
                stack.push(path);
            } else if meta.is_file() {
                let rel = path
                    .strip_prefix(dir)
                    .unwrap()
                    .to_string_lossy()
                    .into_owned();
                let exec = meta.permissions().mode() & 0o111 != 0;
                files.insert(rel, (std::fs::read(&path).unwrap(), exec));
            }
        }
    }
    files
}

#[tokio::test]
async fn a_real_source_tree_goes_in_as_tar_gz_is_worked_on_and_comes_out_equal() {
    let original = registry_crate();
    let name = original.file_name().unwrap().to_string_lossy().into_owned();
    let copy = tempfile::tempdir().unwrap();
    let tree_dir = copy.path().join(&name);
    let status = Command::new("cp")
        .arg("-a")
        .arg(&original)
        .arg(&tree_dir)
        .status()
        .unwrap();
    assert!(status.success());
    std::fs::write(tree_dir.join("run.sh"), "#!/bin/sh\necho script ran\n").unwrap();
    std::fs::set_permissions(
        tree_dir.join("run.sh"),
        std::fs::Permissions::from_mode(0o755),
    )
    .unwrap();
    let packed = Command::new("tar")
        .arg("czf")
        .arg("-")
        .arg("-C")
        .arg(copy.path())
        .arg(&name)
        .output()
        .unwrap();
    assert!(packed.status.success());

    let toold = Toold::start();
    let session = toold.session().await;
    let reply = post_archive(&toold, &session, Some("vendor"), packed.stdout).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["format"], "tar.gz");
    let expected = tree(&tree_dir);
    assert!(reply.body["entries"].as_u64().unwrap() > expected.len() as u64);

    let found = toold
        .call_one(&session, "grep_search", json!({"pattern": "pub fn memchr\\(", "path": "vendor", "output_mode": "files_with_matches"}))
        .await;
    assert!(
        found["output"].as_str().unwrap().contains("memchr.rs"),
        "{found}"
    );
    let listed = toold
        .call_one(
            &session,
            "bash",
            json!({"command": format!("ls -l vendor/{name}/run.sh")}),
        )
        .await;
    assert!(
        listed["output"].as_str().unwrap().starts_with("-rwxr-xr-x"),
        "{listed}"
    );
    let ran = toold
        .call_one(
            &session,
            "bash",
            json!({"command": format!("./vendor/{name}/run.sh")}),
        )
        .await;
    assert_eq!(
        ran["output"].as_str().unwrap().trim(),
        "script ran",
        "{ran}"
    );

    let path = format!("/v1/sessions/{session}/archive?path=vendor&format=tar.gz");
    let (status, headers, body) = get_bytes(&toold, &path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/gzip");
    let out = tempfile::tempdir().unwrap();
    let mut untar = Command::new("tar")
        .arg("xzf")
        .arg("-")
        .arg("-C")
        .arg(out.path())
        .stdin(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(untar.stdin.as_mut().unwrap(), &body).unwrap();
    drop(untar.stdin.take());
    assert!(untar.wait().unwrap().success());
    let downloaded = tree(&out.path().join(&name));
    assert_eq!(downloaded.len(), expected.len());
    for (file, content) in &expected {
        assert!(
            downloaded.get(file) == Some(content),
            "{file} differs after the round trip"
        );
    }
    // A plain tar of the whole workspace holds the same tree under vendor/.
    let (status, headers, plain) =
        get_bytes(&toold, &format!("/v1/sessions/{session}/archive"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert_eq!(headers["content-type"], "application/x-tar");
    let mut archive = tar::Archive::new(&plain[..]);
    let names: Vec<String> = archive
        .entries()
        .unwrap()
        .map(|e| e.unwrap().path().unwrap().to_string_lossy().into_owned())
        .collect();
    assert!(
        names.contains(&format!("vendor/{name}/run.sh")),
        "{names:?}"
    );
}

/// A zip holding `files` (path, content, unix mode).
pub fn zip_of(files: &[(&str, &[u8], u32)]) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    let mut zip = zip::ZipWriter::new(&mut out);
    for (name, content, mode) in files {
        let options = zip::write::SimpleFileOptions::default()
            .compression_method(zip::CompressionMethod::Deflated)
            .unix_permissions(*mode);
        if mode & 0o170000 == 0o120000 {
            let target = std::str::from_utf8(content).unwrap();
            zip.add_symlink(*name, target, options).unwrap();
            continue;
        }
        zip.start_file(*name, options).unwrap();
        std::io::Write::write_all(&mut zip, content).unwrap();
    }
    zip.finish().unwrap();
    out.into_inner()
}

#[tokio::test]
async fn zip_and_tar_are_told_from_their_bytes_and_merge_into_a_directory() {
    let toold = Toold::start();
    let session = toold.session().await;
    let zip = zip_of(&[
        ("src/a.txt", b"from zip", 0o644),
        ("bin/tool", b"#!/bin/sh\necho zipped\n", 0o755),
    ]);
    let reply = post_archive(&toold, &session, None, zip).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["format"], "zip");
    let ran = toold
        .call_one(&session, "bash", json!({"command": "./bin/tool"}))
        .await;
    assert_eq!(ran["output"].as_str().unwrap().trim(), "zipped", "{ran}");

    let mut builder = tar::Builder::new(Vec::new());
    let mut header = tar::Header::new_gnu();
    header.set_size(8);
    header.set_mode(0o600);
    builder
        .append_data(&mut header, "src/b.txt", &b"from tar"[..])
        .unwrap();
    let reply = post_archive(&toold, &session, None, builder.into_inner().unwrap()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["format"], "tar");
    let workspace = toold.workspace(&session).await;
    assert_eq!(
        std::fs::read(workspace.join("src/a.txt")).unwrap(),
        b"from zip"
    );
    assert_eq!(
        std::fs::read(workspace.join("src/b.txt")).unwrap(),
        b"from tar"
    );
    let mode = std::fs::metadata(workspace.join("src/b.txt"))
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o777, 0o600);
    // No staging directory is left behind.
    let names: Vec<_> = std::fs::read_dir(&workspace)
        .unwrap()
        .flatten()
        .map(|e| e.file_name())
        .collect();
    assert!(
        names
            .iter()
            .all(|n| !n.to_string_lossy().starts_with(".toold")),
        "{names:?}"
    );
    let (status, _, _) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/archive?format=zip"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
    let (status, _, _) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/archive?path=nothing"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::NOT_FOUND);
}
