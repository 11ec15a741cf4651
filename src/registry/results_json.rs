//! A whole batch's results as JSON text ([`results_json`]), written straight from the results
//! in the request's shape: the answer of every batch that is not streamed.
//!
//! The bytes are exactly what serde_json writes for the shapes in `calls.rs` (the tests hold
//! the two side by side). What differs is how strings are escaped: outputs are most of a
//! response (numbered file lines, with a tab and a newline on each), and serde_json looks at
//! one byte at a time; [`write_json_string`] looks at sixteen at once (SSE2), copying each
//! block whole and cutting it back to its first escape. `structured` and `metadata` are
//! walked as JSON values with their strings written the same way (an MCP tool's
//! `structured_content` often repeats its whole output: issue 18); the numbers in them and the
//! small fields (`error_kind`, `offloaded`, the duration) are still written by serde_json.
//!
//! Deliberately absent: the `Value` forms (`format_results`, `format_result`), which stay
//! with serde in `calls.rs`; they are not on a hot path.

use serde::Serialize;
use serde_json::{Map, Value};

use super::calls::BatchFormat;
use crate::tool::ToolResult;

/// Results in the request's shape as JSON text (`calls::format_results`, serialised).
pub fn results_json(format: BatchFormat, batch_id: &str, results: &[ToolResult]) -> Vec<u8> {
    // Room for the outputs and a little per result.
    let outputs: usize = results.iter().map(|r| r.output.len() + 128).sum();
    let mut json = Vec::with_capacity(outputs + 64);
    match write_results(&mut json, format, batch_id, results) {
        Ok(()) => json,
        Err(err) => {
            // Only serde_json can fail here, on values that always serialise (string keys,
            // finite or null numbers); a failure is a bug, answered with `null`, not a panic.
            tracing::error!(error = %err, "results could not be serialised");
            b"null".to_vec()
        }
    }
}

/// Writes one result in a shape.
type WriteResult = fn(&mut Vec<u8>, &ToolResult) -> serde_json::Result<()>;

fn write_results(
    json: &mut Vec<u8>,
    format: BatchFormat,
    batch_id: &str,
    results: &[ToolResult],
) -> serde_json::Result<()> {
    let (opening, write_one): (&[u8], WriteResult) = match format {
        BatchFormat::Toold => {
            json.extend_from_slice(b"{\"batch_id\":");
            write_json_string(json, batch_id);
            (b",\"results\":[", write_toold)
        }
        BatchFormat::Anthropic => (b"{\"role\":\"user\",\"content\":[", write_anthropic),
        BatchFormat::OpenAi => (b"{\"input\":[", write_openai),
        BatchFormat::OpenAiChat => (b"{\"messages\":[", write_openai_chat),
    };
    json.extend_from_slice(opening);
    for (position, result) in results.iter().enumerate() {
        if position > 0 {
            json.push(b',');
        }
        write_one(json, result)?;
    }
    json.extend_from_slice(b"]}");
    Ok(())
}

/// A `ToolResult` as its derived `Serialize` writes it (same fields, same order, same skips).
fn write_toold(json: &mut Vec<u8>, result: &ToolResult) -> serde_json::Result<()> {
    json.extend_from_slice(b"{\"id\":");
    write_json_string(json, &result.id);
    json.extend_from_slice(b",\"name\":");
    write_json_string(json, &result.name);
    json.extend_from_slice(b",\"is_error\":");
    write_bool(json, result.is_error);
    json.extend_from_slice(b",\"output\":");
    write_json_string(json, &result.output);
    json.extend_from_slice(b",\"error_kind\":");
    write_serialized(json, &result.error_kind)?;
    json.extend_from_slice(b",\"duration_ms\":");
    write_serialized(json, &result.duration_ms)?;
    json.extend_from_slice(b",\"offloaded\":");
    write_serialized(json, &result.offloaded)?;
    if let Some(structured) = &result.structured {
        json.extend_from_slice(b",\"structured\":");
        write_value(json, structured)?;
    }
    if !result.metadata.is_empty() {
        json.extend_from_slice(b",\"metadata\":");
        write_object(json, &result.metadata)?;
    }
    json.push(b'}');
    Ok(())
}

fn write_anthropic(json: &mut Vec<u8>, result: &ToolResult) -> serde_json::Result<()> {
    json.extend_from_slice(b"{\"type\":\"tool_result\",\"tool_use_id\":");
    write_json_string(json, &result.id);
    json.extend_from_slice(b",\"content\":");
    write_json_string(json, &result.output);
    json.extend_from_slice(b",\"is_error\":");
    write_bool(json, result.is_error);
    json.push(b'}');
    Ok(())
}

fn write_openai(json: &mut Vec<u8>, result: &ToolResult) -> serde_json::Result<()> {
    json.extend_from_slice(b"{\"type\":\"function_call_output\",\"call_id\":");
    write_json_string(json, &result.id);
    json.extend_from_slice(b",\"output\":");
    write_json_string(json, &result.output);
    json.push(b'}');
    Ok(())
}

fn write_openai_chat(json: &mut Vec<u8>, result: &ToolResult) -> serde_json::Result<()> {
    json.extend_from_slice(b"{\"role\":\"tool\",\"tool_call_id\":");
    write_json_string(json, &result.id);
    json.extend_from_slice(b",\"content\":");
    write_json_string(json, &result.output);
    json.push(b'}');
    Ok(())
}

fn write_bool(json: &mut Vec<u8>, value: bool) {
    json.extend_from_slice(if value { b"true" } else { b"false" });
}

fn write_serialized<T: Serialize + ?Sized>(
    json: &mut Vec<u8>,
    value: &T,
) -> serde_json::Result<()> {
    serde_json::to_writer(&mut *json, value)
}

/// `value` as serde_json writes it (compact, members in the map's order), its strings and
/// keys through [`write_json_string`].
fn write_value(json: &mut Vec<u8>, value: &Value) -> serde_json::Result<()> {
    match value {
        Value::String(text) => write_json_string(json, text),
        Value::Array(items) => {
            json.push(b'[');
            for (position, item) in items.iter().enumerate() {
                if position > 0 {
                    json.push(b',');
                }
                write_value(json, item)?;
            }
            json.push(b']');
        }
        Value::Object(members) => write_object(json, members)?,
        Value::Null | Value::Bool(_) | Value::Number(_) => write_serialized(json, value)?,
    }
    Ok(())
}

fn write_object(json: &mut Vec<u8>, members: &Map<String, Value>) -> serde_json::Result<()> {
    json.push(b'{');
    for (position, (key, value)) in members.iter().enumerate() {
        if position > 0 {
            json.push(b',');
        }
        write_json_string(json, key);
        json.push(b':');
        write_value(json, value)?;
    }
    json.push(b'}');
    Ok(())
}

/// `text` as a JSON string, byte for byte as serde_json writes it: `"` and `\` escaped with
/// a backslash, the control characters below U+0020 as `\b \t \n \f \r` or `\u00xx`
/// (lowercase hex), everything else (DEL, non-ASCII, U+2028/U+2029) as it is.
pub fn write_json_string(json: &mut Vec<u8>, text: &str) {
    let bytes = text.as_bytes();
    json.reserve(bytes.len() + bytes.len() / 8 + 2);
    json.push(b'"');
    let mut at = 0;
    // Sixteen bytes at a time: each block is copied whole (a fixed-size copy, no call), then
    // cut back to its first escape, which is written and skipped.
    while let Some(block) = bytes.get(at..).and_then(<[u8]>::first_chunk::<16>) {
        let clean = clean_prefix(block);
        json.extend_from_slice(block);
        if clean == block.len() {
            at += block.len();
            continue;
        }
        json.truncate(json.len() - (block.len() - clean));
        write_escape(json, block[clean]);
        at += clean + 1;
    }
    for &byte in &bytes[at..] {
        if needs_escape(byte) {
            write_escape(json, byte);
        } else {
            json.push(byte);
        }
    }
    json.push(b'"');
}

/// How many bytes at the start of `block` need no escape (16 when none does): SSE2 (part of
/// every x86-64) compares all sixteen at once; elsewhere one byte at a time.
fn clean_prefix(block: &[u8; 16]) -> usize {
    #[cfg(target_arch = "x86_64")]
    {
        use std::arch::x86_64::{
            __m128i, _mm_cmpeq_epi8, _mm_loadu_si128, _mm_max_epu8, _mm_movemask_epi8,
            _mm_or_si128, _mm_set1_epi8,
        };
        // SAFETY: SSE2 is in the x86-64 baseline, so these intrinsics are always available;
        // the one load reads exactly the 16 bytes of `block` (unaligned loads take any
        // address).
        let found = unsafe {
            let chunk = _mm_loadu_si128(block.as_ptr().cast::<__m128i>());
            let last_control = _mm_set1_epi8(0x1F);
            // Unsigned `max(byte, 0x1F) == 0x1F` is `byte <= 0x1F`: bytes of 0x80 and up
            // (UTF-8 beyond ASCII) never match.
            let control = _mm_cmpeq_epi8(_mm_max_epu8(chunk, last_control), last_control);
            let special = _mm_or_si128(
                _mm_cmpeq_epi8(chunk, _mm_set1_epi8(b'"' as i8)),
                _mm_cmpeq_epi8(chunk, _mm_set1_epi8(b'\\' as i8)),
            );
            _mm_movemask_epi8(_mm_or_si128(control, special)) as u32
        };
        found.trailing_zeros().min(16) as usize
    }
    #[cfg(not(target_arch = "x86_64"))]
    {
        block.iter().position(|&b| needs_escape(b)).unwrap_or(16)
    }
}

fn needs_escape(byte: u8) -> bool {
    byte < 0x20 || byte == b'"' || byte == b'\\'
}

/// The escape of a byte that [`needs_escape`].
fn write_escape(json: &mut Vec<u8>, byte: u8) {
    const HEX_DIGITS: &[u8; 16] = b"0123456789abcdef";
    let short = match byte {
        b'"' => b'"',
        b'\\' => b'\\',
        0x08 => b'b',
        0x09 => b't',
        0x0A => b'n',
        0x0C => b'f',
        0x0D => b'r',
        _ => {
            let hex = [
                HEX_DIGITS[usize::from(byte >> 4)],
                HEX_DIGITS[usize::from(byte & 0x0F)],
            ];
            json.extend_from_slice(b"\\u00");
            json.extend_from_slice(&hex);
            return;
        }
    };
    json.extend_from_slice(&[b'\\', short]);
}

#[cfg(test)]
#[path = "results_json_tests.rs"]
mod tests;
