//! `SpillWriter`: memory below the threshold, a file above it, the cap and its note, the
//! file deleted with whoever owns it.

use super::*;

fn settings(dir: &std::path::Path, memory_bytes: usize, cap_bytes: u64) -> SpillSettings {
    SpillSettings {
        directory: dir.to_path_buf(),
        memory_bytes,
        cap_bytes,
    }
}

fn files_in(dir: &std::path::Path) -> usize {
    std::fs::read_dir(dir).expect("spill dir").count()
}

#[tokio::test]
async fn small_output_never_touches_the_disk() {
    let dir = tempfile::tempdir().expect("dir");
    let mut writer = SpillWriter::new(settings(dir.path(), 10, 100), b"ab");
    writer.write(b"cdefgh").await;
    assert!(!writer.spilled());
    assert!(writer.finish("\nexit code: 1").await.is_none());
    assert_eq!(files_in(dir.path()), 0);
}

#[tokio::test]
async fn large_output_is_whole_in_the_file_with_its_suffix() {
    let dir = tempfile::tempdir().expect("dir");
    let mut writer = SpillWriter::new(settings(dir.path(), 10, 1 << 30), b"note\n");
    let mut expected = b"note\n".to_vec();
    for i in 0..5000u32 {
        let line = format!("line {i}\n");
        writer.write(line.as_bytes()).await;
        expected.extend_from_slice(line.as_bytes());
    }
    assert!(writer.spilled() && writer.ends_with_newline());
    let spilled = writer.finish("exit code: 2").await.expect("spilled");
    expected.extend_from_slice(b"exit code: 2");
    assert_eq!(std::fs::read(spilled.path()).expect("file"), expected);
    assert_eq!(spilled.bytes, expected.len() as u64);
    assert!(spilled.head.starts_with("note\nline 0\n"));
    assert!(spilled.tail.ends_with("line 4999\nexit code: 2"));
    assert_eq!(spilled.head.len(), PREVIEW_BYTES);
    drop(spilled);
    assert_eq!(files_in(dir.path()), 0, "the file goes with its owner");
}

#[tokio::test]
async fn past_the_cap_the_middle_is_dropped_with_a_note_and_the_end_kept() {
    let dir = tempfile::tempdir().expect("dir");
    let mut writer = SpillWriter::new(settings(dir.path(), 4, 1000), b"");
    let data: Vec<u8> = (0..100_000u32).map(|i| b'a' + (i % 26) as u8).collect();
    for piece in data.chunks(777) {
        writer.write(piece).await;
    }
    assert_eq!(writer.omitted_bytes(), 99_000 - PREVIEW_BYTES as u64);
    let spilled = writer.finish("").await.expect("spilled");
    let stored = std::fs::read(spilled.path()).expect("file");
    assert_eq!(&stored[..1000], &data[..1000]);
    assert!(stored.ends_with(&data[data.len() - PREVIEW_BYTES..]));
    let text = String::from_utf8_lossy(&stored);
    assert!(text.contains("bytes of output omitted: the output passed the 0 MiB spill limit"));
    assert!(
        spilled
            .tail
            .ends_with(std::str::from_utf8(&data[data.len() - 100..]).unwrap())
    );
}

#[tokio::test]
async fn an_unwritable_directory_falls_back_to_memory() {
    let dir = tempfile::tempdir().expect("dir");
    let missing = dir.path().join("missing");
    let mut writer = SpillWriter::new(settings(&missing, 4, 1000), b"");
    writer.write(b"0123456789").await;
    assert!(!writer.spilled());
    assert!(writer.failure().is_some_and(|why| why.contains("missing")));
    assert!(writer.finish("").await.is_none());
}

#[tokio::test]
async fn an_unfinished_spill_is_deleted() {
    let dir = tempfile::tempdir().expect("dir");
    let mut writer = SpillWriter::new(settings(dir.path(), 4, 1000), b"");
    writer.write(b"0123456789").await;
    assert_eq!(files_in(dir.path()), 1);
    drop(writer);
    assert_eq!(files_in(dir.path()), 0);
}
