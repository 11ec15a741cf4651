//! `OutputBuffer`: a shell's output held in memory under a cap, head and tail kept.
//!
//! Shell output can be unbounded (`yes`, a verbose build). The buffer keeps the first half of
//! its cap and the most recent half; what falls between is counted and replaced by a note, so
//! the start (what ran) and the end (how it ended, the error) both survive. Taking the text
//! empties the buffer, which is what incremental reads of a background task need. It does not
//! spill to disk: a foreground command's output that outgrows the buffer is whole in its
//! [`super::spill::SpillWriter`], and this buffer is then only the fallback should the spill
//! fail.

use std::collections::VecDeque;

/// Output kept in memory per background task between two reads.
pub(crate) const BACKGROUND_CAP_BYTES: usize = 8 * 1024 * 1024;

#[derive(Debug)]
pub(crate) struct OutputBuffer {
    half: usize,
    head: Vec<u8>,
    tail: VecDeque<u8>,
    /// Bytes dropped between head and tail since the last take.
    omitted: u64,
    /// Bytes received since the process started.
    total: u64,
}

/// Text taken out of the buffer.
#[derive(Debug, Default, PartialEq, Eq)]
pub(crate) struct TakenOutput {
    pub text: String,
    pub omitted_bytes: u64,
}

impl OutputBuffer {
    pub(crate) fn new(cap_bytes: usize) -> OutputBuffer {
        OutputBuffer {
            half: (cap_bytes / 2).max(1),
            head: Vec::new(),
            tail: VecDeque::new(),
            omitted: 0,
            total: 0,
        }
    }

    pub(crate) fn push(&mut self, mut bytes: &[u8]) {
        self.total += bytes.len() as u64;
        if self.tail.is_empty() && self.omitted == 0 {
            let room = self.half.saturating_sub(self.head.len()).min(bytes.len());
            self.head.extend_from_slice(&bytes[..room]);
            bytes = &bytes[room..];
        }
        if bytes.len() >= self.half {
            // Only the last `half` bytes of this chunk can stay; everything before goes.
            let skipped = bytes.len() - self.half;
            self.omitted += (self.tail.len() + skipped) as u64;
            self.tail.clear();
            bytes = &bytes[skipped..];
        }
        self.tail.extend(bytes);
        let excess = self.tail.len().saturating_sub(self.half);
        if excess > 0 {
            self.tail.drain(..excess);
            self.omitted += excess as u64;
        }
    }

    /// Whether output arrived since the last take (a lone partial character counts).
    pub(crate) fn has_unread(&self) -> bool {
        !self.head.is_empty() || !self.tail.is_empty() || self.omitted > 0
    }

    /// Bytes received in all.
    pub(crate) fn total_bytes(&self) -> u64 {
        self.total
    }

    /// Takes everything held, as text. With `hold_partial_char`, an incomplete UTF-8
    /// sequence at the very end stays for the next take (the rest of it has not arrived).
    pub(crate) fn take(&mut self, hold_partial_char: bool) -> TakenOutput {
        let mut head = std::mem::take(&mut self.head);
        let mut tail: Vec<u8> = std::mem::take(&mut self.tail).into();
        let omitted = std::mem::take(&mut self.omitted);
        if hold_partial_char {
            let last = if tail.is_empty() {
                &mut head
            } else {
                &mut tail
            };
            let keep = incomplete_utf8_suffix(last);
            let held = last.split_off(last.len() - keep);
            self.head = held;
        }
        let mut text = String::from_utf8_lossy(&head).into_owned();
        if omitted > 0 {
            text.push_str(&format!(
                "\n[… {omitted} bytes of output omitted: more than {} MiB arrived and only the start and the end are kept …]\n",
                (self.half * 2) / (1024 * 1024)
            ));
        }
        text.push_str(&String::from_utf8_lossy(&tail));
        TakenOutput {
            text,
            omitted_bytes: omitted,
        }
    }
}

/// Length of an incomplete UTF-8 sequence at the end of `bytes` (0 to 3).
fn incomplete_utf8_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let byte = bytes[bytes.len() - back];
        if byte & 0xC0 == 0x80 {
            // A continuation byte: its lead is further back.
            continue;
        }
        let needed = match byte {
            0xF0.. => 4,
            0xE0.. => 3,
            0xC0.. => 2,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_output_is_kept_whole() {
        let mut buffer = OutputBuffer::new(100);
        buffer.push(b"hello ");
        buffer.push(b"world");
        assert_eq!(buffer.total_bytes(), 11);
        assert_eq!(buffer.take(false).text, "hello world");
        assert_eq!(buffer.take(false).text, "");
    }

    #[test]
    fn the_middle_of_large_output_is_dropped_and_counted() {
        let mut buffer = OutputBuffer::new(10);
        for chunk in [&b"abc"[..], b"defgh", b"ijklmnop", b"qrstuvwxyz"] {
            buffer.push(chunk);
        }
        let taken = buffer.take(false);
        assert_eq!(taken.omitted_bytes, 26 - 10);
        assert!(
            taken.text.starts_with("abcde\n[… 16 bytes"),
            "{}",
            taken.text
        );
        assert!(taken.text.ends_with("…]\nvwxyz"), "{}", taken.text);
        // One chunk larger than the whole cap.
        let mut buffer = OutputBuffer::new(4);
        buffer.push(b"0123456789");
        let taken = buffer.take(false);
        assert_eq!(taken.omitted_bytes, 6);
        assert!(taken.text.starts_with("01\n") && taken.text.ends_with("89"));
    }

    #[test]
    fn a_split_character_waits_for_its_end() {
        let mut buffer = OutputBuffer::new(100);
        let snowman = "☃".as_bytes();
        buffer.push(b"a");
        buffer.push(&snowman[..2]);
        assert_eq!(buffer.take(true).text, "a");
        buffer.push(&snowman[2..]);
        assert_eq!(buffer.take(true).text, "☃");
        assert_eq!(incomplete_utf8_suffix("é".as_bytes()), 0);
        assert_eq!(incomplete_utf8_suffix(&[0xF0, 0x9F, 0x98]), 3);
    }
}
