//! Unit tests of `text`: numbering, windows, cuts, binary detection and line endings.

use super::*;

fn all() -> Window {
    Window {
        first: 1,
        max_lines: None,
    }
}

fn number(text: &[u8], window: Window) -> Numbered {
    number_lines(text, text.len() as u64, window, &CancellationToken::new()).unwrap()
}

/// A reader that hands out one byte at a time, so lines straddle every read.
struct Trickle<'a>(&'a [u8]);

impl Read for Trickle<'_> {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.0.split_first() {
            Some((first, rest)) if !buf.is_empty() => {
                buf[0] = *first;
                self.0 = rest;
                Ok(1)
            }
            _ => Ok(0),
        }
    }
}

#[test]
fn lines_are_numbered_like_cat_n() {
    let cases: &[(&[u8], &str, usize)] = &[
        (b"", "", 0),
        (b"a", "     1\ta\n", 1),
        (b"a\n", "     1\ta\n", 1),
        (b"a\n\n", "     1\ta\n     2\t\n", 2),
        (b"a\r\nb\r\n", "     1\ta\n     2\tb\n", 2),
        (b"\tx\r", "     1\t\tx\n", 1),
        ("é\n😀\n".as_bytes(), "     1\té\n     2\t😀\n", 2),
    ];
    for (input, expected, total) in cases {
        let numbered = number(input, all());
        assert_eq!(numbered.text, *expected, "{input:?}");
        assert_eq!(numbered.total_lines, *total, "{input:?}");
        assert!(!numbered.partial(), "{input:?}");
        let trickled = number_lines(Trickle(input), 0, all(), &CancellationToken::new()).unwrap();
        assert_eq!(trickled.text, numbered.text, "{input:?} read byte by byte");
        assert_eq!(trickled.content_hash, numbered.content_hash);
    }
    let wide = number(
        &b"x\n".repeat(1_000_000),
        Window {
            first: 999_999,
            max_lines: Some(1),
        },
    );
    assert_eq!(wide.text, "999999\tx\n");
    let wider = number(
        &b"x\n".repeat(1_000_001),
        Window {
            first: 1_000_001,
            max_lines: None,
        },
    );
    assert_eq!(wider.text, "1000001\tx\n");
}

#[test]
fn windows_select_lines_and_mark_the_read_partial() {
    let text: String = (1..=10).map(|i| format!("line {i}\n")).collect();
    let cases = [
        (1, Some(3), 1, 3, true),
        (4, Some(2), 4, 5, true),
        (8, Some(100), 8, 10, true),
        (1, Some(10), 1, 10, false),
        (1, None, 1, 10, false),
        (11, Some(5), 0, 0, true),
    ];
    for (first, max_lines, shown_first, shown_last, partial) in cases {
        let numbered = number(text.as_bytes(), Window { first, max_lines });
        assert_eq!(
            (
                numbered.first_shown,
                numbered.last_shown,
                numbered.partial()
            ),
            (shown_first, shown_last, partial),
            "{first} {max_lines:?}"
        );
        assert_eq!(numbered.total_lines, 10);
    }
}

#[test]
fn the_hash_covers_the_whole_file_whatever_the_window() {
    let text = b"one\ntwo\nthree\n";
    let part = number(
        text,
        Window {
            first: 2,
            max_lines: Some(1),
        },
    );
    assert_eq!(part.content_hash, super::super::state::content_hash(text));
    assert_eq!(part.size, text.len() as u64);
}

#[test]
fn long_lines_are_cut_with_a_marker() {
    let long = "é".repeat(MAX_LINE_CHARS + 5);
    let numbered = number(format!("{long}\r\nshort\n").as_bytes(), all());
    let first = numbered.text.lines().next().unwrap();
    assert!(first.starts_with(&format!("     1\t{}", "é".repeat(MAX_LINE_CHARS))));
    assert!(first.ends_with(&format!(
        "… [line cut: {} characters, {MAX_LINE_CHARS} shown]",
        MAX_LINE_CHARS + 5
    )));
    assert_eq!(numbered.lines_cut, 1);
    assert!(numbered.partial());
    assert!(
        !numbered.lossy,
        "a cut inside a character is not invalid UTF-8"
    );
    assert!(numbered.text.ends_with("     2\tshort\n"));
}

#[test]
fn a_line_longer_than_what_is_kept_is_counted_whole() {
    let long = format!("{}\r\n", "x".repeat(KEPT_BYTES + 10));
    for numbered in [
        number(long.as_bytes(), all()),
        number_lines(
            Trickle(long.as_bytes()),
            0,
            all(),
            &CancellationToken::new(),
        )
        .unwrap(),
    ] {
        assert!(numbered.text.ends_with(&format!(
            "… [line cut: {} characters, {MAX_LINE_CHARS} shown]\n",
            KEPT_BYTES + 10
        )));
        assert_eq!((numbered.lines_cut, numbered.lossy), (1, false));
    }
    // Exactly at the limit, with and without a CRLF ending, nothing is cut.
    let at_limit = format!(
        "{}\r\n{}",
        "é".repeat(MAX_LINE_CHARS),
        "x".repeat(MAX_LINE_CHARS)
    );
    assert_eq!(number(at_limit.as_bytes(), all()).lines_cut, 0);
}

#[test]
fn numbering_bytes_in_memory_agrees_with_streaming_them() {
    let long = "ü".repeat(MAX_LINE_CHARS + 1);
    let texts: Vec<Vec<u8>> = vec![
        Vec::new(),
        b"a".to_vec(),
        b"a\r\nb\n\n\tc\r".to_vec(),
        b"caf\xe9\nok\n".to_vec(),
        format!("{long}\nshort\n{long}\r\n").into_bytes(),
        format!("{}\n", "line of text").repeat(300).into_bytes(),
        // Past what a line keeps, a bad byte and a CRLF ending.
        [&b"y".repeat(KEPT_BYTES + 3)[..], b"\xff\r\nend"].concat(),
        // Plain lines at and just past the cut, and plain lines up to the output cap.
        format!(
            "{}\n{}\n",
            "a".repeat(MAX_LINE_CHARS),
            "b".repeat(MAX_LINE_CHARS + 1)
        )
        .into_bytes(),
        format!("{}\n", "x".repeat(1_000)).repeat(150).into_bytes(),
    ];
    let windows = [
        all(),
        Window {
            first: 2,
            max_lines: Some(1),
        },
        Window {
            first: 250,
            max_lines: None,
        },
    ];
    for text in &texts {
        for window in windows {
            let streamed = number(text, window);
            let trickled =
                number_lines(Trickle(text), 0, window, &CancellationToken::new()).unwrap();
            let in_memory = number_bytes(text, window).unwrap();
            assert_eq!(
                format!("{in_memory:?}"),
                format!("{streamed:?}"),
                "{text:?}"
            );
            assert_eq!(format!("{trickled:?}"), format!("{streamed:?}"), "{text:?}");
        }
    }
    assert!(matches!(
        number_bytes(b"a\0b", all()),
        Err(NumberError::Binary)
    ));
}

#[test]
fn output_stops_at_its_cap_but_counting_goes_on() {
    let line = "x".repeat(1_000);
    let text = format!("{line}\n").repeat(500);
    let numbered = number(text.as_bytes(), all());
    assert!(numbered.output_capped);
    assert!(numbered.text.len() <= MAX_OUTPUT_BYTES);
    assert_eq!(numbered.total_lines, 500);
    assert!(numbered.last_shown < 500 && numbered.last_shown > 90);
    assert!(numbered.partial());
}

#[test]
fn binary_is_judged_on_the_first_8_kib() {
    assert!(matches!(
        number_lines(&b"abc\0def"[..], 7, all(), &CancellationToken::new()),
        Err(NumberError::Binary)
    ));
    let mut late = vec![b'a'; BINARY_PROBE_BYTES];
    late.push(0);
    assert!(number_lines(&late[..], 0, all(), &CancellationToken::new()).is_ok());
    assert!(looks_binary(b"\x89PNG\r\n\x1a\n\0\0"));
    assert!(!looks_binary("plain ünïcode".as_bytes()));
    let lossy = number(b"caf\xe9\n", all());
    assert!(lossy.lossy);
    assert_eq!(lossy.text, "     1\tcaf\u{fffd}\n");
}

#[test]
fn a_cancelled_read_stops() {
    let cancel = CancellationToken::new();
    cancel.cancel();
    assert!(matches!(
        number_lines(&b"a\nb\n"[..], 4, all(), &cancel),
        Err(NumberError::Cancelled)
    ));
}

#[test]
fn line_endings_are_detected_and_applied() {
    assert_eq!(LineEnding::detect("no break"), None);
    assert_eq!(LineEnding::detect("a\nb\n"), Some(LineEnding::Lf));
    assert_eq!(LineEnding::detect("a\r\nb\r\n"), Some(LineEnding::CrLf));
    assert_eq!(LineEnding::detect("a\r\nb\nc\n"), Some(LineEnding::Lf));
    assert_eq!(LineEnding::CrLf.apply("a\nb\r\nc"), "a\r\nb\r\nc");
    assert_eq!(LineEnding::Lf.apply("a\r\nb\nc\r"), "a\nb\nc\r");
    assert!(matches!(LineEnding::Lf.apply("a\nb"), Cow::Borrowed(_)));
}

#[test]
fn snippets_and_line_arithmetic() {
    let text = "a\nb\r\nc\nd\n";
    assert_eq!(snippet(text, 2, 3), "     2\tb\n     3\tc\n");
    assert_eq!(snippet(text, 4, 99), "     4\td\n");
    assert_eq!(line_of(text, 0), 1);
    assert_eq!(line_of(text, 2), 2);
    assert_eq!(line_of(text, 100), 5);
    for (text, count) in [("", 0), ("a", 1), ("a\n", 1), ("a\nb", 2), ("\n\n", 2)] {
        assert_eq!(line_count(text), count, "{text:?}");
    }
    let path = Path::new("/f");
    assert!(as_text(b"ok", path).is_ok());
    assert!(
        as_text(b"a\0b", path)
            .unwrap_err()
            .to_string()
            .contains("binary")
    );
    assert!(
        as_text(b"\xff", path)
            .unwrap_err()
            .to_string()
            .contains("offset 0")
    );
}

#[test]
fn newlines_are_found_at_every_position() {
    for length in 0..40 {
        for at in 0..length {
            let mut bytes = vec![b'x'; length];
            bytes[at] = b'\n';
            // Bytes just above and below '\n' beside it must not be taken for it.
            if at + 1 < length {
                bytes[at + 1] = b'\x0b';
            }
            if at > 0 {
                bytes[at - 1] = b'\x09';
            }
            assert_eq!(find_newline(&bytes), Some(at), "{length} {at}");
        }
        assert_eq!(find_newline(&vec![0x8a; length]), None, "{length}");
    }
}
