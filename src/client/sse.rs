//! Server-sent events read from a response body: frames (`id`, `event`, `data`) split at
//! blank lines, comments (the daemon's keep-alives) skipped. Only what toold sends is
//! handled: one `data:` line per frame is the norm, several are joined with `\n` as the
//! SSE specification says.

use futures::StreamExt;

use super::wire::error_chain;

/// One frame.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Frame {
    pub id: Option<String>,
    pub event: String,
    pub data: String,
}

/// The frames of one response, in order.
pub struct FrameReader {
    body: futures::stream::BoxStream<'static, reqwest::Result<Vec<u8>>>,
    buffer: Vec<u8>,
}

impl FrameReader {
    pub fn new(response: reqwest::Response) -> FrameReader {
        FrameReader {
            // Copied out of `Bytes` so the `bytes` crate stays reqwest's own business.
            body: response
                .bytes_stream()
                .map(|chunk| chunk.map(|bytes| bytes.to_vec()))
                .boxed(),
            buffer: Vec::new(),
        }
    }

    /// The next frame; `Ok(None)` when the stream ended, `Err` with the transport's reason
    /// when it broke.
    pub async fn next(&mut self) -> Result<Option<Frame>, String> {
        loop {
            if let Some(frame) = self.take_frame() {
                return Ok(Some(frame));
            }
            match self.body.next().await {
                Some(Ok(chunk)) => self.buffer.extend_from_slice(&chunk),
                Some(Err(err)) => return Err(error_chain(&err)),
                None => return Ok(None),
            }
        }
    }

    /// A whole frame from the buffer, if one is there (keep-alive comments are dropped).
    fn take_frame(&mut self) -> Option<Frame> {
        loop {
            let (end, separator) = frame_end(&self.buffer)?;
            let block: Vec<u8> = self.buffer.drain(..end + separator).collect();
            let text = String::from_utf8_lossy(&block[..end]);
            if let Some(frame) = parse_frame(&text) {
                return Some(frame);
            }
        }
    }
}

/// Where the first frame ends (a blank line) and how long the separator is.
fn frame_end(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = memchr::memmem::find(buffer, b"\n\n").map(|at| (at, 2));
    let crlf = memchr::memmem::find(buffer, b"\r\n\r\n").map(|at| (at, 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (one, other) => one.or(other),
    }
}

/// A frame from its lines; `None` for a block of comments only.
fn parse_frame(text: &str) -> Option<Frame> {
    let mut frame = Frame::default();
    let mut data: Vec<&str> = Vec::new();
    let mut any = false;
    for line in text.lines() {
        if line.starts_with(':') || line.is_empty() {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        any = true;
        match field {
            "id" => frame.id = Some(value.to_owned()),
            "event" => frame.event = value.to_owned(),
            "data" => data.push(value),
            _ => {}
        }
    }
    frame.data = data.join("\n");
    any.then_some(frame)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_are_split_at_blank_lines_and_comments_are_skipped() {
        let text = b": keep-alive\n\nid: 7\nevent: tool:pre\ndata: {\"a\":1}\n\nevent: done\r\ndata: x\r\ndata: y\r\n\r\n";
        let mut buffer = text.to_vec();
        let mut frames = Vec::new();
        while let Some((end, separator)) = frame_end(&buffer) {
            let block: Vec<u8> = buffer.drain(..end + separator).collect();
            frames.extend(parse_frame(&String::from_utf8_lossy(&block[..end])));
        }
        assert_eq!(
            frames,
            [
                Frame {
                    id: Some("7".into()),
                    event: "tool:pre".into(),
                    data: "{\"a\":1}".into()
                },
                Frame {
                    id: None,
                    event: "done".into(),
                    data: "x\ny".into()
                },
            ]
        );
        assert!(buffer.is_empty());
    }
}
