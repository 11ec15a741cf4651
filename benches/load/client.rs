//! A minimal HTTP/1.1 client over one kept-alive TCP connection: it writes a prepared request
//! and reads the response head and a `Content-Length` body, nothing more.
//!
//! Hand-written so the client's own cost is small and identical for toold and the floor:
//! reqwest's pool, header maps and body streams would add tens of microseconds to both sides
//! and flatten the ratio being measured. A body is read by its `Content-Length` or, for the
//! MCP door's legacy-era answers (an SSE stream per request), as chunks up to the last one.
//! Redirects and TLS are deliberately absent.

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
        PreparedRequest::with_headers(method, address, path, &[], body)
    }

    /// [`PreparedRequest::new`] with more header lines (`name`, `value`).
    pub fn with_headers(
        method: &str,
        address: SocketAddr,
        path: &str,
        headers: &[(&str, &str)],
        body: &[u8],
    ) -> PreparedRequest {
        let extra: String = headers
            .iter()
            .map(|(name, value)| format!("{name}: {value}\r\n"))
            .collect();
        let mut bytes = format!(
            "{method} {path} HTTP/1.1\r\nhost: {address}\r\ncontent-type: application/json\r\n\
             {extra}content-length: {}\r\n\r\n",
            body.len()
        )
        .into_bytes();
        bytes.extend_from_slice(body);
        PreparedRequest { bytes }
    }

    /// [`PreparedRequest::new`] sent by the holder of `token` (none: no `authorization`).
    pub fn with_bearer(
        method: &str,
        address: SocketAddr,
        path: &str,
        token: Option<&str>,
        body: &[u8],
    ) -> PreparedRequest {
        let bearer = token.map(|token| format!("Bearer {token}"));
        let headers: Vec<(&str, &str)> = bearer
            .iter()
            .map(|value| ("authorization", value.as_str()))
            .collect();
        PreparedRequest::with_headers(method, address, path, &headers, body)
    }

    pub fn get(address: SocketAddr, path: &str) -> PreparedRequest {
        PreparedRequest::new("GET", address, path, b"")
    }

    pub fn post_json(address: SocketAddr, path: &str, body: &serde_json::Value) -> PreparedRequest {
        let body = serde_json::to_vec(body).unwrap_or_default();
        PreparedRequest::new("POST", address, path, &body)
    }
}

/// A response's status and body (a chunked body is given whole, its chunks joined).
pub struct Response {
    pub status: u16,
    pub body: Vec<u8>,
    /// The value of an `Mcp-Session-Id` header, if the response had one.
    pub mcp_session_id: Option<String>,
}

impl Response {
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_slice(&self.body).unwrap_or(serde_json::Value::Null)
    }
}

/// How a response's body is delimited.
enum Framing {
    Length(usize),
    Chunked,
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
        let head = parse_head(&self.buffer[..head_end])?;
        let body = match head.framing {
            Framing::Length(length) => {
                let body_end = head_end + length;
                while self.buffer.len() < body_end {
                    self.fill().await?;
                }
                let body = self.buffer[head_end..body_end].to_vec();
                self.buffer.drain(..body_end);
                body
            }
            Framing::Chunked => {
                self.buffer.drain(..head_end);
                self.read_chunks().await?
            }
        };
        Ok(Response {
            status: head.status,
            body,
            mcp_session_id: head.mcp_session_id,
        })
    }

    /// A chunked body from the start of the buffer: `size CRLF data CRLF` up to the
    /// zero-size chunk and its CRLF (no trailers are expected).
    async fn read_chunks(&mut self) -> io::Result<Vec<u8>> {
        let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
        let mut body = Vec::new();
        loop {
            let line_end = loop {
                if let Some(at) = find(&self.buffer, b"\r\n") {
                    break at;
                }
                self.fill().await?;
            };
            let size = std::str::from_utf8(&self.buffer[..line_end])
                .ok()
                .and_then(|line| usize::from_str_radix(line.split(';').next()?.trim(), 16).ok())
                .ok_or_else(|| invalid("malformed chunk size"))?;
            let chunk_end = line_end + 2 + size + 2;
            while self.buffer.len() < chunk_end {
                self.fill().await?;
            }
            body.extend_from_slice(&self.buffer[line_end + 2..line_end + 2 + size]);
            self.buffer.drain(..chunk_end);
            if size == 0 {
                return Ok(body);
            }
        }
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

/// What this client reads from a response head.
struct Head {
    status: u16,
    framing: Framing,
    mcp_session_id: Option<String>,
}

fn parse_head(head: &[u8]) -> io::Result<Head> {
    let invalid = |what: &str| io::Error::new(io::ErrorKind::InvalidData, what.to_owned());
    let head = std::str::from_utf8(head).map_err(|_| invalid("response head is not UTF-8"))?;
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .and_then(|line| line.split(' ').nth(1))
        .and_then(|code| code.parse().ok())
        .ok_or_else(|| invalid("malformed status line"))?;
    let (mut framing, mut mcp_session_id) = (None, None);
    for (name, value) in lines.filter_map(|line| line.split_once(':')) {
        let value = value.trim();
        if name.eq_ignore_ascii_case("content-length") {
            let length = value
                .parse()
                .map_err(|_| invalid("malformed content-length"))?;
            framing = Some(Framing::Length(length));
        } else if name.eq_ignore_ascii_case("transfer-encoding") && value == "chunked" {
            framing = Some(Framing::Chunked);
        } else if name.eq_ignore_ascii_case("mcp-session-id") {
            mcp_session_id = Some(value.to_owned());
        }
    }
    let framing =
        framing.ok_or_else(|| invalid("response without content-length or chunked body"))?;
    Ok(Head {
        status,
        framing,
        mcp_session_id,
    })
}
