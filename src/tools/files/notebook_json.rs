//! Byte spans of JSON values, so `notebook_edit` can splice a notebook's text and leave every
//! byte it does not change exactly as it was (a parse-and-reserialise would reformat numbers,
//! escapes and key order the notebook's writer chose).
//!
//! The scanner trusts its input to be valid JSON (the caller parsed it with `serde_json`
//! first) but never panics on bad input: it reports an error instead.

use std::ops::Range;

/// Why a span could not be found.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed JSON at byte {at}: {problem}")]
pub struct ScanError {
    pub at: usize,
    pub problem: &'static str,
}

/// A member of an object: its unescaped key and its value's span.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Member {
    pub key: String,
    pub value: Range<usize>,
}

fn error(at: usize, problem: &'static str) -> ScanError {
    ScanError { at, problem }
}

/// The index of the first non-whitespace byte at or after `at`.
pub fn skip_whitespace(text: &[u8], mut at: usize) -> usize {
    while at < text.len() && matches!(text[at], b' ' | b'\t' | b'\n' | b'\r') {
        at += 1;
    }
    at
}

/// The span of the value that starts at `start` (after whitespace).
pub fn value_at(text: &[u8], start: usize) -> Result<Range<usize>, ScanError> {
    let start = skip_whitespace(text, start);
    let end = match text.get(start) {
        None => return Err(error(start, "expected a value")),
        Some(b'"') => string_end(text, start)?,
        Some(b'{' | b'[') => container_end(text, start)?,
        Some(_) => {
            let mut at = start;
            while at < text.len()
                && !matches!(text[at], b',' | b'}' | b']' | b' ' | b'\t' | b'\n' | b'\r')
            {
                at += 1;
            }
            at
        }
    };
    Ok(start..end)
}

/// The end (exclusive) of the string starting at `start`.
fn string_end(text: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut at = start + 1;
    while at < text.len() {
        match text[at] {
            b'\\' => at += 2,
            b'"' => return Ok(at + 1),
            _ => at += 1,
        }
    }
    Err(error(start, "unterminated string"))
}

/// The end (exclusive) of the object or array starting at `start`.
fn container_end(text: &[u8], start: usize) -> Result<usize, ScanError> {
    let mut depth = 0usize;
    let mut at = start;
    while at < text.len() {
        match text[at] {
            b'"' => {
                at = string_end(text, at)?;
                continue;
            }
            b'{' | b'[' => depth += 1,
            b'}' | b']' => {
                depth = depth
                    .checked_sub(1)
                    .ok_or_else(|| error(at, "unbalanced brackets"))?;
                if depth == 0 {
                    return Ok(at + 1);
                }
            }
            _ => {}
        }
        at += 1;
    }
    Err(error(start, "unterminated object or array"))
}

/// The members of the object spanning `object`.
pub fn members(text: &[u8], object: Range<usize>) -> Result<Vec<Member>, ScanError> {
    if text.get(object.start) != Some(&b'{') {
        return Err(error(object.start, "expected an object"));
    }
    let mut found = Vec::new();
    let mut at = skip_whitespace(text, object.start + 1);
    if text.get(at) == Some(&b'}') {
        return Ok(found);
    }
    loop {
        let key_span = value_at(text, at)?;
        if text.get(key_span.start) != Some(&b'"') {
            return Err(error(key_span.start, "expected a key"));
        }
        let key: String = serde_json::from_slice(&text[key_span.clone()])
            .map_err(|_| error(key_span.start, "invalid key"))?;
        at = skip_whitespace(text, key_span.end);
        if text.get(at) != Some(&b':') {
            return Err(error(at, "expected ':'"));
        }
        let value = value_at(text, at + 1)?;
        at = skip_whitespace(text, value.end);
        found.push(Member { key, value });
        match text.get(at) {
            Some(b',') => at += 1,
            Some(b'}') => return Ok(found),
            _ => return Err(error(at, "expected ',' or '}'")),
        }
    }
}

/// The element spans of the array spanning `array`.
pub fn elements(text: &[u8], array: Range<usize>) -> Result<Vec<Range<usize>>, ScanError> {
    if text.get(array.start) != Some(&b'[') {
        return Err(error(array.start, "expected an array"));
    }
    let mut found = Vec::new();
    let mut at = skip_whitespace(text, array.start + 1);
    if text.get(at) == Some(&b']') {
        return Ok(found);
    }
    loop {
        let element = value_at(text, at)?;
        at = skip_whitespace(text, element.end);
        found.push(element);
        match text.get(at) {
            Some(b',') => at += 1,
            Some(b']') => return Ok(found),
            _ => return Err(error(at, "expected ',' or ']'")),
        }
    }
}

/// The whitespace that starts the line holding byte `at` (the indentation of what is there).
pub fn indentation_at(text: &[u8], at: usize) -> &[u8] {
    let line_start = text[..at]
        .iter()
        .rposition(|&b| b == b'\n')
        .map_or(0, |newline| newline + 1);
    let indent_end = text[line_start..at]
        .iter()
        .position(|&b| b != b' ' && b != b'\t')
        .map_or(at, |offset| line_start + offset);
    &text[line_start..indent_end]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn spans_of_members_and_elements() {
        let text = br#"{ "a": [1, "x\"]", {"b": null}], "c\n": -2.5e3 }"#;
        let found = members(text, 0..text.len()).unwrap();
        assert_eq!(found.len(), 2);
        assert_eq!(found[0].key, "a");
        assert_eq!(
            &text[found[0].value.clone()],
            br#"[1, "x\"]", {"b": null}]"#
        );
        assert_eq!(found[1].key, "c\n");
        assert_eq!(&text[found[1].value.clone()], b"-2.5e3");
        let items = elements(text, found[0].value.clone()).unwrap();
        let items: Vec<&[u8]> = items.into_iter().map(|r| &text[r]).collect();
        assert_eq!(items, vec![&b"1"[..], br#""x\"]""#, br#"{"b": null}"#]);
        assert_eq!(elements(b"[ ]", 0..3).unwrap(), Vec::<Range<usize>>::new());
        assert_eq!(members(b"{}", 0..2).unwrap(), Vec::<Member>::new());
    }

    #[test]
    fn malformed_input_is_an_error_not_a_panic() {
        for bad in [
            &b"{\"a\" 1}"[..],
            b"[1 2]",
            b"{\"a\": \"open",
            b"[[1]",
            b"{1: 2}",
        ] {
            let whole = value_at(bad, 0).unwrap_or(0..bad.len());
            let outcome = if bad[0] == b'{' {
                members(bad, whole).map(|_| ())
            } else {
                elements(bad, whole).map(|_| ())
            };
            assert!(outcome.is_err(), "{}", String::from_utf8_lossy(bad));
        }
        assert_eq!(indentation_at(b"{\n   \"a\": 1", 7), b"   ");
    }
}
