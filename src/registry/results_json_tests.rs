//! The hand-written results text against serde_json: strings of every awkward kind, random
//! strings, and each shape's body over results of every kind.

use serde_json::json;

use super::*;
use crate::registry::calls::results_json_by_serde;
use crate::tool::{ErrorKind, OffloadedResult};

fn escaped(text: &str) -> String {
    let mut json = Vec::new();
    write_json_string(&mut json, text);
    String::from_utf8(json).expect("escaped text is UTF-8")
}

fn assert_like_serde(text: &str) {
    let expected = serde_json::to_string(text).expect("a str serialises");
    assert_eq!(escaped(text), expected, "{text:?}");
}

#[test]
fn awkward_strings_escape_like_serde_json() {
    let cases = [
        "",
        "a",
        "plain ASCII longer than one block of sixteen bytes",
        "\"",
        "\\",
        "\"\\\"\\",
        "tab\there\nnewline\r\n",
        "\u{7f} DEL stays",
        "é, 日本語, 🦀 and U+2028 \u{2028} U+2029 \u{2029}",
        "\u{1}\u{1f}\u{8}\u{c}\u{b}\u{0}",
        "     1\tline one\n     2\tline two\n",
        "ends with a quote\"",
        "\u{a2}\u{dc}\u{a0}\u{9f}: bytes whose low bits look like escapes",
    ];
    for case in cases {
        assert_like_serde(case);
    }
}

#[test]
fn every_escaped_byte_escapes_at_every_offset_of_a_block() {
    let escaped_bytes = (0u8..0x20).chain([b'"', b'\\', 0x7f, b'!', b'#', b'[', b']']);
    for byte in escaped_bytes {
        // Offsets through two sixteen-byte blocks and the tail after them; the `é`s after it
        // put two-byte characters across block edges.
        for before in 0..40 {
            for after in [0, 1, 7, 8, 9] {
                let mut text = "x".repeat(before);
                text.push(char::from(byte));
                text.push_str(&"é".repeat(after));
                assert_like_serde(&text);
            }
        }
    }
}

/// A small deterministic generator (xorshift64*), so failures reproduce.
struct Random(u64);

impl Random {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, bound: u64) -> u64 {
        self.next() % bound
    }
}

#[test]
fn random_strings_escape_like_serde_json() {
    const SPECIAL: [char; 12] = [
        '"', '\\', '\n', '\t', '\r', '\u{0}', '\u{1f}', '\u{7f}', 'é', '\u{2028}', '日', '🦀',
    ];
    let mut random = Random(0x9e37_79b9_7f4a_7c15);
    for _ in 0..20_000 {
        let length = random.below(64) as usize;
        let text: String = (0..length)
            .map(|_| match random.below(4) {
                0 => SPECIAL[random.below(SPECIAL.len() as u64) as usize],
                1 => char::from_u32(random.below(0x80) as u32).unwrap_or('?'),
                _ => char::from(b' ' + random.below(95) as u8),
            })
            .collect();
        assert_like_serde(&text);
    }
}

fn result(id: &str, output: &str) -> ToolResult {
    ToolResult {
        id: id.into(),
        name: "read_file".into(),
        is_error: false,
        output: output.into(),
        error_kind: None,
        duration_ms: 0.25,
        offloaded: None,
        structured: None,
        metadata: Default::default(),
    }
}

/// One result of every kind the toold shape writes differently.
fn results_of_every_kind() -> Vec<ToolResult> {
    let plain = result("c1", "     1\tfirst \"line\"\n     2\t\\second\n");
    let mut failed = result("c\"2", "ExecutionError: no such file\u{1}");
    failed.is_error = true;
    failed.error_kind = Some(ErrorKind::Execution);
    failed.duration_ms = f64::NAN;
    let mut offloaded = result("c3", "a preview");
    offloaded.offloaded = Some(OffloadedResult {
        result_id: "res_1".into(),
        total_chars: 123_456,
    });
    offloaded.duration_ms = 1e-7;
    let mut rich = result("c4", "é 🦀 \u{2028}");
    rich.structured = Some(json!({"z": 1, "a": [true, null, 2.5], "s": "\t"}));
    rich.metadata = serde_json::from_value(json!({
        "path": "/w/f.txt", "bytes": 4096, "first": 1, "ratio": -0.5,
        "structured_content": {"content": "00 a\tb \"c\"\n01 \\d\u{1}é\n".repeat(20),
                               "lines": [1, 2.5, null, false, {"k\n": []}, {}]}
    }))
    .expect("an object is a map");
    rich.duration_ms = 12_345_678.901;
    vec![plain, failed, offloaded, rich, result("", "")]
}

#[test]
fn every_shape_writes_what_serde_json_writes() {
    let formats = [
        BatchFormat::Toold,
        BatchFormat::Anthropic,
        BatchFormat::OpenAi,
        BatchFormat::OpenAiChat,
    ];
    let all = results_of_every_kind();
    for format in formats {
        for results in [&all[..], &all[..1], &[]] {
            let expected = results_json_by_serde(format, "batch_\"1", results);
            let written = results_json(format, "batch_\"1", results);
            assert_eq!(
                String::from_utf8_lossy(&written),
                String::from_utf8_lossy(&expected),
                "{format:?}"
            );
        }
    }
}
