//! A minimal HTTP/1.1 client over one kept-alive TCP connection: it writes a prepared request
//! and reads the response head and a `Content-Length` body, nothing more.
//!
//! Hand-written so the client's own cost is small and identical for toold and the floor:
//! reqwest's pool, header maps and body streams would add tens of microseconds to both sides
//! and flatten the ratio being measured. Chunked bodies, redirects and TLS are deliberately
//! absent (every response measured here has a `Content-Length`).

use std::io;
use std::net::SocketAddr;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

/// A request serialised once, sent many times.
pub struct PreparedRequest {
    bytes: Vec<u8>,
}

impl PreparedRequest {
    pub fn new(method: &str, address: SocketAddr, path: &str, body: &[u8]) -> PreparedRequest {
        let mut bytes = format!(
            "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
             content-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        PreparedRequest { bytes }
    }

    pub fn get(address: SocketAddr, path: &str) -> PreparedRequest {
        PreparedRequest::new("GET", address, path, b"")
    }

    pub fn post_json(address: SocketAddr, path: &str, body: &serde_json::Value) -> PreparedRequest {
        let body = serde_json::to_vec(body).unwrap_or_default();
        PreparedRequest::new("POST", address, path, &body)
    }
}

/// A response's status and body.
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// One kept-alive connection; requests go one after another.
pub struct Connection {
    stream: TcpStream,
    /// Bytes read past the previous response (none in practice: one request in flight).
    buffer: Vec<u8>,
}

impl Connection {
    pub async fn open(address: SocketAddr) -> io::Result<Connection> {
        let stream = TcpStream::connect(address).await?;
        stream.set_nodelay(true)?;
        Ok(Connection {
            stream,
            buffer: Vec::with_capacity(64 * 1024),
        })
    }

    pub async fn send(&mut self, request: &PreparedRequest) -> io::Result<Response> {
        self.stream.write_all(&request.bytes).await?;
        let head_end = self.read_until_head_end().await?;
        let (status, content_length) = parse_head(&self.buffer[..head_end])?;
        let body_end = head_end + content_length;
        while self.buffer.len() < body_end {
            self.fill().await?;
        }
        let body = self.buffer[head_end..body_end].to_vec();
        self.buffer.drain(..body_end);
        Ok(Response { status, body })
    }

    /// The offset just past the head's blank line.
    async fn read_until_head_end(&mut self) -> io::Result<usize> {
        let mut searched = 0;
        loop {
            if let Some(at) = find(&self.buffer[searched..], b"\r\n\r\n") {
                return Ok(searched + at + 4);
            }
            searched = self.buffer.len().saturating_sub(3);
            self.fill().await?;
        }
    }

    async fn fill(&mut self) -> io::Result<()> {
        let start = self.buffer.len();
        self.buffer.resize(start + 64 * 1024, 0);
        let read = self.stream.read(&mut self.buffer[start..]).await;
        let read = match read {
            Ok(read) => read,
            Err(err) => {
                self.buffer.truncate(start);
                return Err(err);
            }
        };
        self.buffer.truncate(start + read);
        if read == 0 {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "connection closed mid-response",
            ));
        }
        Ok(())
    }
}

fn find(haystack: &[u8], needle: &[u8]) -> Option<usize> {
    haystack
        .windows(needle.len())
        .position(|window| window == needle)
}

/// The status code and `Content-Length` of a response head.
fn parse_head(head: &[u8]) -> io::Result<(u16, usize)> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let head = std::str::from_utf8(head).map_err(|_| invalid("response head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("malformed status line"))?;
    let content_length = lines
        .filter_map(|line| line.split_once(':'))
        .find(|(name, _)| name.eq_ignore_ascii_case("content-length"))
        .and_then(|(_, value)| value.trim().parse().ok())
        .ok_or_else(|| invalid("response without content-length"))?;
    Ok((status, content_length))
}
