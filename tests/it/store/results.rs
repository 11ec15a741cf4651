//! Offloaded results: stored whole, read back by character range (never by byte), only by
//! their own session through `read_for_session`.

use crate::store::harness::Backend;
use crate::store::harness::{Fixture, mixed_text};

/// Characters `offset..offset + limit` of `text`: what a page must hold.
fn expected(text: &str, offset: usize, limit: usize) -> String {
    text.chars().skip(offset).take(limit).collect()
}

pub async fn a_result_reads_back_by_character_range(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stored = fixture
        .store
        .offload("s1", "c1", "héllo wörld 𝄞!")
        .await
        .unwrap();
    assert_eq!(stored.total_chars, 14);
    assert!(stored.result_id.starts_with("res_"), "{}", stored.result_id);
    let page = fixture.store.read(&stored.result_id, 1, 4).await.unwrap();
    assert_eq!(page.content, "éllo");
    assert_eq!((page.total_chars, page.offset), (14, 1));
    assert_eq!(page.result_id, stored.result_id);
    let tail = fixture
        .store
        .read(&stored.result_id, 12, 100)
        .await
        .unwrap();
    assert_eq!(tail.content, "𝄞!");
}

pub async fn reads_spanning_chunk_boundaries_slice_by_characters(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    // Long enough to cross any sensible chunk size (SQLite's is 64 Ki characters) twice.
    let text = mixed_text(200_003);
    let stored = fixture.store.offload("s1", "c1", &text).await.unwrap();
    assert_eq!(stored.total_chars, 200_003);
    for boundary in [65_536usize, 131_072, 100_000] {
        for (back, limit) in [(1, 2), (10, 10), (3, 70_000), (0, 1), (65_536, 65_537)] {
            let offset = boundary.saturating_sub(back);
            let page = fixture
                .store
                .read(&stored.result_id, offset as u64, limit as u64)
                .await
                .unwrap();
            assert_eq!(
                page.content,
                expected(&text, offset, limit),
                "offset {offset} limit {limit}"
            );
        }
    }
    let everything = fixture
        .store
        .read(&stored.result_id, 0, u64::MAX)
        .await
        .unwrap();
    assert_eq!(everything.content, text);
}

pub async fn offset_past_the_end_and_zero_limit_give_empty_content(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stored = fixture.store.offload("s1", "c1", "ünï").await.unwrap();
    for (offset, limit) in [(3, 10), (4, 1), (u64::MAX, u64::MAX), (0, 0), (1, 0)] {
        let page = fixture
            .store
            .read(&stored.result_id, offset, limit)
            .await
            .unwrap();
        assert_eq!(page.content, "", "offset {offset} limit {limit}");
        assert_eq!(page.total_chars, 3);
        assert_eq!(page.offset, offset);
    }
}

pub async fn an_empty_output_has_no_characters(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stored = fixture.store.offload("s1", "c1", "").await.unwrap();
    assert_eq!(stored.total_chars, 0);
    let page = fixture.store.read(&stored.result_id, 0, 10).await.unwrap();
    assert_eq!((page.content.as_str(), page.total_chars), ("", 0));
}

pub async fn a_five_megabyte_result_reads_back_byte_for_byte_in_pages(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let text = mixed_text(2_400_000);
    assert!(text.len() > 5_000_000, "{} bytes", text.len());
    let stored = fixture.store.offload("s1", "c1", &text).await.unwrap();
    assert_eq!(stored.total_chars, 2_400_000);
    let mut read_back = String::with_capacity(text.len());
    let mut offset = 0;
    loop {
        let page = fixture
            .store
            .read_for_session("s1", &stored.result_id, offset, 300_007)
            .await
            .unwrap();
        if page.content.is_empty() {
            break;
        }
        offset += page.content.chars().count() as u64;
        read_back.push_str(&page.content);
    }
    assert_eq!(offset, 2_400_000);
    assert!(read_back.as_bytes() == text.as_bytes(), "bytes differ");
}

pub async fn another_sessions_result_is_unknown_to_it(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let stored = fixture
        .store
        .offload("owner", "c1", "secret")
        .await
        .unwrap();
    let own = fixture
        .store
        .read_for_session("owner", &stored.result_id, 0, 6)
        .await
        .unwrap();
    assert_eq!(own.content, "secret");
    let other = fixture
        .store
        .read_for_session("intruder", &stored.result_id, 0, 6)
        .await
        .unwrap_err();
    let unknown = fixture
        .store
        .read_for_session("intruder", "res_missing", 0, 6)
        .await
        .unwrap_err();
    // Indistinguishable from a result that does not exist, apart from the id.
    assert_eq!(
        other.to_string().replace(&stored.result_id, "ID"),
        unknown.to_string().replace("res_missing", "ID")
    );
    // `read` (the doors check the caller first) reads any session's result.
    assert_eq!(
        fixture
            .store
            .read(&stored.result_id, 0, 6)
            .await
            .unwrap()
            .content,
        "secret"
    );
}

pub async fn an_unknown_result_is_an_error_naming_it(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let err = fixture.store.read("res_missing", 0, 10).await.unwrap_err();
    assert!(
        err.to_string().contains("unknown result \"res_missing\""),
        "{err}"
    );
}

pub async fn each_offload_gets_its_own_id(backend: Backend) {
    let fixture = Fixture::new(backend).await;
    let first = fixture.store.offload("s1", "c1", "one").await.unwrap();
    let second = fixture.store.offload("s1", "c1", "two").await.unwrap();
    assert_ne!(first.result_id, second.result_id);
    assert_eq!(
        fixture
            .store
            .read(&first.result_id, 0, 9)
            .await
            .unwrap()
            .content,
        "one"
    );
    assert_eq!(
        fixture
            .store
            .read(&second.result_id, 0, 9)
            .await
            .unwrap()
            .content,
        "two"
    );
}

pub async fn a_streamed_result_decodes_invalid_utf8_like_from_utf8_lossy_across_reads(
    backend: Backend,
) {
    use tokio::io::AsyncReadExt;
    let fixture = Fixture::new(backend).await;
    // Valid text, a stray continuation byte, a truncated 3-byte lead, a 4-byte character
    // cut between reads, and a lead left incomplete at the very end; 70 000 ASCII bytes in
    // between so the cuts fall in different chunk rows.
    let filler = vec![b'a'; 70_000];
    let pieces: [&[u8]; 6] = [
        b"h\xC3",
        b"\xA9llo \x80",
        &filler,
        b"\xE2\x98 \xF0\x9F",
        b"\x98\x80!",
        b"\xF0\x9F",
    ];
    let whole: Vec<u8> = pieces.concat();
    let expected = String::from_utf8_lossy(&whole).into_owned();
    let mut source = pieces[0]
        .chain(pieces[1])
        .chain(pieces[2])
        .chain(pieces[3])
        .chain(pieces[4])
        .chain(pieces[5]);
    let stored = fixture
        .store
        .offload_reader("s1", "c1", &mut source)
        .await
        .unwrap();
    assert_eq!(stored.total_chars, expected.chars().count() as u64);
    let page = fixture
        .store
        .read(&stored.result_id, 0, stored.total_chars)
        .await
        .unwrap();
    assert_eq!(page.content, expected);
    assert!(
        page.content.ends_with("\u{FFFD} 😀!\u{FFFD}"),
        "{:?}",
        &page.content[page.content.len() - 20..]
    );
}
