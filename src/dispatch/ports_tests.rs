//! [`TextChunker`] against `String::from_utf8_lossy`: the same text whatever the cuts, and
//! chunks of exactly the promised number of characters.

use super::{TextChunk, TextChunker};

fn chunk_all(pieces: &[&[u8]], max_chars: usize) -> Vec<TextChunk> {
    let mut chunker = TextChunker::new(max_chars);
    let mut out = Vec::new();
    for piece in pieces {
        chunker.push(piece);
        out.extend(std::iter::from_fn(|| chunker.pop()));
    }
    chunker.finish();
    out.extend(std::iter::from_fn(|| chunker.pop()));
    assert_eq!(chunker.ready_bytes(), 0);
    out
}

/// Every chunk but the last has `max_chars` characters, counts are right, and the text is
/// the lossy decoding of the whole.
fn check(bytes: &[u8], pieces: &[&[u8]], max_chars: usize) {
    let chunks = chunk_all(pieces, max_chars);
    let joined: String = chunks.iter().map(|c| c.text.as_str()).collect();
    assert_eq!(joined, String::from_utf8_lossy(bytes), "pieces {pieces:?}");
    for (i, chunk) in chunks.iter().enumerate() {
        assert_eq!(chunk.chars, chunk.text.chars().count() as u64);
        assert!(chunk.chars > 0);
        if i + 1 < chunks.len() {
            assert_eq!(chunk.chars, max_chars as u64, "chunk {i} of {pieces:?}");
        } else {
            assert!(chunk.chars <= max_chars as u64);
        }
    }
}

/// Valid text of 1-, 2-, 3- and 4-byte characters, then invalid sequences of every kind: a
/// stray continuation, a lead without its end (mid-stream and at the very end), overlongs,
/// surrogates, bytes that never occur.
const SAMPLES: &[&[u8]] = &[
    "aé☃😀b".as_bytes(),
    b"x\x80y",
    b"\xE2\x98z\xF0\x9F\x98",
    b"\xC0\xAF\xE0\x80\x80\xED\xA0\x80\xFF\xFE\xF5",
    b"ok\xF0\x9F",
    b"\xE2",
];

#[test]
fn every_cut_of_every_sample_decodes_like_from_utf8_lossy() {
    for sample in SAMPLES {
        for max_chars in [1, 2, 3, 7, 64] {
            check(sample, &[sample], max_chars);
            for cut in 0..=sample.len() {
                let (a, b) = sample.split_at(cut);
                check(sample, &[a, b], max_chars);
                for cut2 in cut..=sample.len() {
                    let (b1, b2) = b.split_at(cut2 - cut);
                    check(sample, &[a, b1, b2], max_chars);
                }
            }
        }
    }
}

#[test]
fn one_byte_at_a_time_across_a_long_mixed_stream() {
    let mut bytes = Vec::new();
    for round in 0..200u32 {
        bytes.extend_from_slice("héllo ☃ 😀 ".as_bytes());
        bytes.push(0x80 | (round % 64) as u8);
        if round % 7 == 0 {
            bytes.extend_from_slice(b"\xF0\x9F");
        }
    }
    let pieces: Vec<&[u8]> = bytes.chunks(1).collect();
    check(&bytes, &pieces, 10);
    let pieces: Vec<&[u8]> = bytes.chunks(5).collect();
    check(&bytes, &pieces, 4096);
}

#[test]
fn ascii_chunks_cut_at_the_character_count() {
    let bytes = vec![b'a'; 10_001];
    let chunks = chunk_all(&[&bytes[..3000], &bytes[3000..]], 1000);
    assert_eq!(chunks.len(), 11);
    assert_eq!(chunks[10].chars, 1);
    assert!(chunk_all(&[b""], 5).is_empty(), "no bytes, no chunks");
}
