//! The hop's HTTP/1.1 connections to the other daemons of the fleet: [`HopConnections`] sends
//! one request to an owner and answers with its response, over a connection it keeps idle per
//! owner between requests. Not here: which requests go where, and which headers travel
//! (`http.rs`).
//!
//! Why not hyper-util's pooled `Client`, which did this before: it runs every connection on a
//! task of its own, so a hop crossed tasks through channels four times (the request to the
//! connection's task, the response head back, each body frame back, and the connection's
//! readiness), each a poll of another task. Here a connection is driven inside the request's
//! own task ([`Driver::drive`]): the connection's future is polled beside the response future
//! and then beside the body, so its hand-overs are wake-ups of the task that is running (which
//! the listener's `RepollOnSelfWake` polls again at once). Measured on the forwarding daemon,
//! the old hand-overs mostly stayed on one worker (Tokio's LIFO slot: futex and eventfd
//! wake-ups per hop were about the same either way, `perf trace -s`); what this buys is fewer
//! task polls, channel sends and allocations on the hop's path (callgrind: about 7% fewer
//! instructions per hop with the trims in `http.rs`; `perf trace`: the daemon's time from
//! reading a request to sending it on, and from reading the answer to sending it back, down
//! by several µs each), and a request that can be sent again. Decisions:
//!
//! - A small answer (`Content-Length` ≤ [`BUFFERED_ANSWER`]) is read whole in the request's
//!   task, then the connection goes back to the pool; it is one `read_file` answer, not a
//!   stream, and the gate's deadline (which covers the head) now covers its few bytes too.
//!   Any other answer (SSE, chunked, large) streams: its connection is driven by a task of its
//!   own (as before) and returns to the pool when the answer is over, so back-pressure and a
//!   stream's life are hyper's, as they were.
//! - A small request body (`Content-Length` ≤ [`BUFFERED_REQUEST`]) is read whole before it is
//!   sent: head and body go out in one write, and the request can be sent again. Larger or
//!   unbounded bodies stream, frame by frame.
//! - A stale connection (the owner closed it while it was idle) is found two ways. Taking a
//!   connection from the pool polls it once, which reads the owner's `FIN` if it came; a
//!   closed one is dropped and the next is tried. A close racing the request is found when
//!   the exchange fails on a reused connection before any byte of the answer: the request is
//!   sent again, once, on a fresh connection, if hyper gave it back unsent or its body was
//!   buffered; a streamed body already on its way fails the request (503, as the module header
//!   of `forward` says). Sending again is safe because an owner closes a kept-alive
//!   connection only between requests (idle, or draining): one it had read a request on is
//!   answered first, or the owner died, and then the fresh connection cannot be made.
//! - Idle connections are kept [`POOL_IDLE`] at most, [`POOL_IDLE_PER_HOST`] per owner
//!   (keyed by its address as the store gives it), the most recently used taken first (warm,
//!   least likely closed). One found expired when taken is dropped with every older one;
//!   returning one sweeps every owner's expired ones, at most every [`POOL_IDLE`]. An idle
//!   connection is not polled, so the owner's close waits in the socket until then.
//! - Only `http://` owners, as before (a fleet's internal addresses); `CONNECT_TIMEOUT` bounds
//!   the TCP connect, `TCP_NODELAY` is set.

use std::collections::HashMap;
use std::future::{Future, poll_fn};
use std::pin::{Pin, pin};
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll};
use std::time::Instant;

use axum::body::{Body, Bytes};
use axum::http::header::{CONTENT_LENGTH, HOST};
use axum::http::uri::Authority;
use axum::http::{HeaderMap, HeaderValue, Method, Request, Response, Uri, Version};
use hyper::body::Body as _;
use hyper::client::conn::http1::{self, Connection, SendRequest};
use hyper_util::rt::TokioIo;
use tokio::net::TcpStream;

use super::{CONNECT_TIMEOUT, POOL_IDLE, POOL_IDLE_PER_HOST};

/// Answers at most this long (`Content-Length`) are read whole in the request's task.
pub const BUFFERED_ANSWER: u64 = 64 * 1024;
/// Request bodies at most this long (`Content-Length`) are read whole before they are sent.
pub const BUFFERED_REQUEST: u64 = 64 * 1024;

/// Why a hop got no answer.
#[derive(Debug, thiserror::Error)]
pub enum HopError {
    #[error("bad address \"{0}\": only http://host:port is forwarded to")]
    Address(String),
    #[error("connecting timed out after {0:?}")]
    ConnectTimeout(std::time::Duration),
    #[error("connecting failed: {0}")]
    Connect(#[source] std::io::Error),
    #[error("{0}")]
    Http(#[source] hyper::Error),
    #[error("the connection closed before the answer")]
    Closed,
    #[error("reading the request's body failed: {0}")]
    RequestBody(#[source] axum::Error),
}

/// Idle connections to the other daemons, by owner address; see the module header.
#[derive(Clone, Default)]
pub struct HopConnections {
    idle: Arc<Mutex<Idle>>,
}

#[derive(Default)]
struct Idle {
    /// By the owner's address as the store gives it; each list oldest first.
    by_owner: HashMap<String, Vec<Link>>,
    swept_at: Option<Instant>,
}

/// One HTTP/1.1 connection: the handle requests are sent on, and the connection's future.
struct Link {
    sender: SendRequest<Body>,
    driver: Driver,
    idle_since: Instant,
}

/// A connection's future, polled by whoever holds it.
struct Driver {
    connection: Connection<TokioIo<TcpStream>, Body>,
    /// Its future has not completed (once it has, it is not polled again).
    open: bool,
}

impl Driver {
    /// Polls the connection once (it reads, writes, hands over what it read).
    fn poll_connection(&mut self, cx: &mut Context<'_>) {
        if self.open
            && let Poll::Ready(ended) = Pin::new(&mut self.connection).poll(cx)
        {
            self.open = false;
            if let Err(err) = ended {
                tracing::debug!(error = %err, "a forwarding connection ended");
            }
        }
    }

    /// Runs `work` while driving the connection in this task; `None` when the connection
    /// ended with `work` still waiting (nothing else could move it on then).
    async fn drive<F: Future>(&mut self, work: F) -> Option<F::Output> {
        let mut work = pin!(work);
        poll_fn(|cx| {
            self.poll_connection(cx);
            match work.as_mut().poll(cx) {
                Poll::Ready(output) => Poll::Ready(Some(output)),
                Poll::Pending if self.open => Poll::Pending,
                Poll::Pending => Poll::Ready(None),
            }
        })
        .await
    }
}

impl Link {
    /// Whether the connection can take a request now, after one poll (which reads an
    /// owner's close that arrived).
    fn poll_usable(&mut self, cx: &mut Context<'_>) -> bool {
        self.driver.poll_connection(cx);
        self.driver.open && matches!(self.sender.poll_ready(cx), Poll::Ready(Ok(())))
    }
}

/// A request in a form it can be sent again in (its body buffered), or once.
struct Outgoing {
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: OutgoingBody,
}

enum OutgoingBody {
    Buffered(Bytes),
    Streamed(Option<Body>),
}

impl Outgoing {
    /// The request to send; `None` once a streamed body was handed over.
    fn request(&mut self) -> Option<Request<Body>> {
        let body = match &mut self.body {
            OutgoingBody::Buffered(bytes) => Body::from(bytes.clone()),
            OutgoingBody::Streamed(body) => body.take()?,
        };
        let mut request = Request::new(body);
        *request.method_mut() = self.method.clone();
        *request.uri_mut() = self.uri.clone();
        *request.version_mut() = Version::HTTP_11;
        *request.headers_mut() = self.headers.clone();
        Some(request)
    }
}

/// How one exchange on one connection failed.
struct Failure {
    error: HopError,
    /// What hyper gave back unsent.
    unsent: Option<Request<Body>>,
    /// Some of the answer had arrived (it is never sent again then).
    answered: bool,
}

impl Failure {
    fn before_answer(error: HopError, unsent: Option<Request<Body>>) -> Failure {
        Failure {
            error,
            unsent,
            answered: false,
        }
    }

    fn mid_answer(error: HopError) -> Failure {
        Failure {
            error,
            unsent: None,
            answered: true,
        }
    }
}

impl HopConnections {
    /// Sends `request` (origin-form URI, its headers final) to the daemon at `address`
    /// (`http://host:port`) and answers with its response; see the module header.
    pub async fn send(
        &self,
        address: &str,
        request: Request<Body>,
    ) -> Result<Response<Body>, HopError> {
        let mut outgoing = outgoing(address, request).await?;
        let (link, reused) = match self.take(address).await {
            Some(link) => (link, true),
            None => (connect(address).await?, false),
        };
        // The first attempt always has the request's body.
        let Some(request) = outgoing.request() else {
            return Err(HopError::Closed);
        };
        let failure = match self.exchange(address, link, request).await {
            Ok(response) => return Ok(response),
            Err(failure) => failure,
        };
        // Sent again only on a fresh connection after a reused one failed before any of
        // the answer (module header).
        let again = match failure.unsent {
            _ if !reused || failure.answered => None,
            Some(unsent) => Some(unsent),
            None => outgoing.request(),
        };
        let Some(request) = again else {
            return Err(failure.error);
        };
        tracing::debug!(error = %failure.error, "a pooled forwarding connection was stale; sending again");
        let link = connect(address).await?;
        self.exchange(address, link, request)
            .await
            .map_err(|failure| failure.error)
    }

    /// One request on `link`, up to an answer read whole or streaming.
    async fn exchange(
        &self,
        owner: &str,
        link: Link,
        request: Request<Body>,
    ) -> Result<Response<Body>, Failure> {
        let Link {
            mut sender,
            mut driver,
            ..
        } = link;
        let answer = match driver.drive(sender.try_send_request(request)).await {
            Some(Ok(answer)) => answer,
            Some(Err(mut err)) => {
                let unsent = err.take_message();
                return Err(Failure::before_answer(
                    HopError::Http(err.into_error()),
                    unsent,
                ));
            }
            None => return Err(Failure::before_answer(HopError::Closed, None)),
        };
        let (parts, mut incoming) = answer.into_parts();
        let small = incoming.is_end_stream()
            || content_length(&parts.headers).is_some_and(|length| length <= BUFFERED_ANSWER);
        if !small {
            // A stream: its connection runs on a task of its own until the answer is over.
            tokio::spawn(
                self.clone()
                    .keep_when_ready(owner.to_owned(), sender, driver),
            );
            return Ok(Response::from_parts(parts, Body::new(incoming)));
        }
        let mut body = Vec::new();
        while !incoming.is_end_stream() {
            let frame = poll_fn(|cx| Pin::new(&mut incoming).poll_frame(cx));
            match driver.drive(frame).await {
                Some(Some(Ok(frame))) => {
                    if let Ok(data) = frame.into_data() {
                        body.extend_from_slice(&data);
                    }
                }
                Some(None) => break,
                Some(Some(Err(err))) => return Err(Failure::mid_answer(HopError::Http(err))),
                None => return Err(Failure::mid_answer(HopError::Closed)),
            }
        }
        let mut link = Link {
            sender,
            driver,
            idle_since: Instant::now(),
        };
        // The answer is over; the connection is idle once polled again, as a rule at once.
        if poll_fn(|cx| Poll::Ready(link.poll_usable(cx))).await {
            self.put(owner, link);
        } else if link.driver.open {
            let (sender, driver) = (link.sender, link.driver);
            tokio::spawn(
                self.clone()
                    .keep_when_ready(owner.to_owned(), sender, driver),
            );
        }
        Ok(Response::from_parts(parts, Body::from(body)))
    }

    /// Drives a connection whose answer is still going until it can take another request,
    /// then puts it in the pool (or drops it when it closes).
    async fn keep_when_ready(
        self,
        owner: String,
        mut sender: SendRequest<Body>,
        mut driver: Driver,
    ) {
        let ready = poll_fn(|cx| sender.poll_ready(cx));
        if let Some(Ok(())) = driver.drive(ready).await {
            let link = Link {
                sender,
                driver,
                idle_since: Instant::now(),
            };
            self.put(&owner, link);
        }
    }

    /// The most recently used idle connection to `owner` that can take a request.
    async fn take(&self, owner: &str) -> Option<Link> {
        loop {
            let mut link = self.pop(owner)?;
            if poll_fn(|cx| Poll::Ready(link.poll_usable(cx))).await {
                return Some(link);
            }
        }
    }

    fn pop(&self, owner: &str) -> Option<Link> {
        let mut idle = self.lock();
        let links = idle.by_owner.get_mut(owner)?;
        let link = links.pop()?;
        if link.idle_since.elapsed() < POOL_IDLE {
            return Some(link);
        }
        // Oldest first: the rest expired before this one.
        links.clear();
        None
    }

    fn put(&self, owner: &str, link: Link) {
        let mut idle = self.lock();
        let now = Instant::now();
        // Every owner's expired connections, at most every `POOL_IDLE` (an owner no request
        // goes to any more keeps none open for long).
        if idle.swept_at.is_none_or(|swept| now - swept >= POOL_IDLE) {
            idle.swept_at = Some(now);
            idle.by_owner.retain(|_, links| {
                links.retain(|link| now - link.idle_since < POOL_IDLE);
                !links.is_empty()
            });
        }
        match idle.by_owner.get_mut(owner) {
            Some(links) if links.len() >= POOL_IDLE_PER_HOST => {}
            Some(links) => links.push(link),
            None => {
                idle.by_owner.insert(owner.to_owned(), vec![link]);
            }
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Idle> {
        // Pushes, pops and retains only; a panic cannot leave the map half-changed.
        self.idle.lock().unwrap_or_else(|p| p.into_inner())
    }
}

/// `http://host:port` → `host:port`.
fn owner_authority(address: &str) -> Result<Authority, HopError> {
    let bad = || HopError::Address(address.to_owned());
    let uri: Uri = address.parse().map_err(|_| bad())?;
    if uri.scheme_str() != Some("http") {
        return Err(bad());
    }
    uri.authority().cloned().ok_or_else(bad)
}

/// The request as it is sent: `Host` kept (the client's) or set, a small body read whole.
async fn outgoing(address: &str, request: Request<Body>) -> Result<Outgoing, HopError> {
    let (parts, body) = request.into_parts();
    let mut headers = parts.headers;
    if !headers.contains_key(HOST) {
        let owner = owner_authority(address)?;
        let host = HeaderValue::from_str(owner.as_str())
            .map_err(|_| HopError::Address(address.to_owned()))?;
        headers.insert(HOST, host);
    }
    let body = match content_length(&headers) {
        _ if body.is_end_stream() => OutgoingBody::Buffered(Bytes::new()),
        Some(length) if length <= BUFFERED_REQUEST => {
            // At most `BUFFERED_REQUEST`, so a `usize`.
            let bytes = axum::body::to_bytes(body, length as usize)
                .await
                .map_err(HopError::RequestBody)?;
            OutgoingBody::Buffered(bytes)
        }
        _ => OutgoingBody::Streamed(Some(body)),
    };
    Ok(Outgoing {
        method: parts.method,
        uri: parts.uri,
        headers,
        body,
    })
}

/// A fresh connection to the daemon at `address`.
async fn connect(address: &str) -> Result<Link, HopError> {
    let owner = owner_authority(address)?;
    // `[::1]` names an IPv6 address without its brackets.
    let host = owner.host().trim_start_matches('[').trim_end_matches(']');
    let port = owner.port_u16().unwrap_or(80);
    let stream = tokio::time::timeout(CONNECT_TIMEOUT, TcpStream::connect((host, port)))
        .await
        .map_err(|_| HopError::ConnectTimeout(CONNECT_TIMEOUT))?
        .map_err(HopError::Connect)?;
    stream.set_nodelay(true).map_err(HopError::Connect)?;
    let (sender, connection) = http1::handshake(TokioIo::new(stream))
        .await
        .map_err(HopError::Http)?;
    Ok(Link {
        sender,
        driver: Driver {
            connection,
            open: true,
        },
        idle_since: Instant::now(),
    })
}

fn content_length(headers: &HeaderMap) -> Option<u64> {
    headers
        .get(CONTENT_LENGTH)?
        .to_str()
        .ok()?
        .trim()
        .parse()
        .ok()
}
