//! Layers applied in order: whiteouts and opaque directories hide only what lies below.

use std::io::Write;

use super::*;

fn layer(dir: &Path, name: &str, files: &[(&str, &str)], gzip: bool) -> PathBuf {
    let mut builder = tar::Builder::new(Vec::new());
    for (path, body) in files {
        let mut header = tar::Header::new_gnu();
        header.set_size(body.len() as u64);
        header.set_mode(0o644);
        header.set_uid(0);
        header.set_gid(0);
        header.set_mtime(0);
        header.set_entry_type(tar::EntryType::Regular);
        let raw = &mut header.as_old_mut().name;
        raw[..path.len()].copy_from_slice(path.as_bytes());
        header.set_cksum();
        builder.append(&header, body.as_bytes()).unwrap();
    }
    let bytes = builder.into_inner().unwrap();
    let path = dir.join(name);
    let bytes = if gzip {
        let mut enc = flate2::write::GzEncoder::new(Vec::new(), flate2::Compression::fast());
        enc.write_all(&bytes).unwrap();
        enc.finish().unwrap()
    } else {
        bytes
    };
    fs::write(&path, bytes).unwrap();
    path
}

#[test]
fn whiteouts_and_opaque_directories_hide_the_lower_layers() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    fs::create_dir(&root).unwrap();
    let one = layer(
        scratch.path(),
        "one",
        &[("a/gone", "1"), ("a/kept", "2"), ("d/old", "3")],
        true,
    );
    let two = layer(
        scratch.path(),
        "two",
        &[("a/.wh.gone", ""), ("d/new", "4"), ("d/.wh..wh..opq", "")],
        false,
    );
    apply_layer(&one, &root).unwrap();
    apply_layer(&two, &root).unwrap();
    assert!(!root.join("a/gone").exists());
    assert_eq!(fs::read_to_string(root.join("a/kept")).unwrap(), "2");
    assert!(
        !root.join("d/old").exists(),
        "the opaque marker hid the lower entry"
    );
    assert_eq!(fs::read_to_string(root.join("d/new")).unwrap(), "4");
    assert!(!root.join("a/.wh.gone").exists());
    assert_eq!(tree_bytes(&root), 2);
}

#[test]
fn an_entry_climbing_out_is_refused() {
    let scratch = tempfile::tempdir().unwrap();
    let root = scratch.path().join("root");
    fs::create_dir(&root).unwrap();
    let bad = layer(scratch.path(), "bad", &[("../escaped", "x")], false);
    assert!(apply_layer(&bad, &root).is_err());
    assert!(!scratch.path().join("escaped").exists());
    let whiteout = layer(scratch.path(), "wh", &[("../.wh.root", "")], false);
    assert!(apply_layer(&whiteout, &root).is_err());
    assert!(root.exists());
}
