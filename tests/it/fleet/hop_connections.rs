//! The hop's connections (`toold::api::forward::connection`) against a scripted owner (raw
//! HTTP/1.1 on a socket, so it can close a kept-alive connection where a real daemon would
//! not): small answers reuse one connection; a request sent on a pooled connection the owner
//! closed is sent again on a fresh one when its body was buffered, and fails, sent once, when
//! it streamed; a streamed answer reaches the caller before it ends and its connection is
//! reused afterwards.

use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use axum::body::{Body, Bytes};
use axum::http::{Method, Request};
use futures::StreamExt;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use toold::api::forward::connection::HopConnections;

/// What the owner does with the `n`th request (from 0) on its `c`th connection (from 0).
#[derive(Clone, Copy, Debug)]
enum Act {
    /// Answers 200 with `Content-Length`, the body naming the connection.
    Answer,
    /// Reads the request whole, then closes without a byte of answer.
    Close,
}

/// A request the owner read: its connection, head and body.
#[derive(Clone, Debug)]
struct Seen {
    connection: usize,
    head: String,
    body: Vec<u8>,
}

struct Owner {
    address: String,
    accepted: Arc<AtomicUsize>,
    seen: Arc<Mutex<Vec<Seen>>>,
}

impl Owner {
    async fn start(script: fn(usize, usize) -> Act) -> Owner {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let address = format!("http://{}", listener.local_addr().unwrap());
        let accepted = Arc::new(AtomicUsize::new(0));
        let seen = Arc::new(Mutex::new(Vec::new()));
        let (count, log) = (accepted.clone(), seen.clone());
        tokio::spawn(async move {
            loop {
                let (stream, _) = listener.accept().await.unwrap();
                let connection = count.fetch_add(1, Ordering::SeqCst);
                tokio::spawn(serve(stream, connection, script, log.clone()));
            }
        });
        Owner {
            address,
            accepted,
            seen,
        }
    }

    fn seen(&self) -> Vec<Seen> {
        self.seen.lock().unwrap().clone()
    }
}

async fn serve(
    mut stream: TcpStream,
    connection: usize,
    script: fn(usize, usize) -> Act,
    seen: Arc<Mutex<Vec<Seen>>>,
) {
    let mut buffer = Vec::new();
    for n in 0.. {
        let Some((head, body)) = read_request(&mut stream, &mut buffer).await else {
            return;
        };
        seen.lock().unwrap().push(Seen {
            connection,
            head,
            body,
        });
        match script(connection, n) {
            Act::Answer => {
                let body = format!("connection {connection}");
                let answer = format!(
                    "HTTP/1.1 200 OK\r\ncontent-type: text/plain\r\ncontent-length: {}\r\n\r\n{body}",
                    body.len()
                );
                stream.write_all(answer.as_bytes()).await.unwrap();
            }
            Act::Close => return,
        }
    }
}

/// One request's head and `Content-Length` body (a chunked body is not read); `None` at EOF.
async fn read_request(stream: &mut TcpStream, buffer: &mut Vec<u8>) -> Option<(String, Vec<u8>)> {
    let head_end = loop {
        if let Some(end) = buffer.windows(4).position(|w| w == b"\r\n\r\n") {
            break end + 4;
        }
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    };
    let head = String::from_utf8_lossy(&buffer[..head_end]).into_owned();
    let length = head
        .lines()
        .find_map(|line| {
            let (name, value) = line.split_once(':')?;
            name.eq_ignore_ascii_case("content-length")
                .then(|| value.trim().parse::<usize>().ok())?
        })
        .unwrap_or(0);
    while buffer.len() < head_end + length {
        let mut chunk = [0u8; 4096];
        let read = stream.read(&mut chunk).await.ok()?;
        if read == 0 {
            return None;
        }
        buffer.extend_from_slice(&chunk[..read]);
    }
    let body = buffer[head_end..head_end + length].to_vec();
    buffer.drain(..head_end + length);
    Some((head, body))
}

fn post(body: &'static str) -> Request<Body> {
    Request::builder()
        .method(Method::POST)
        .uri("/v1/sessions/s1/batches")
        .header("content-type", "application/json")
        .header("content-length", body.len())
        .body(Body::from(body))
        .unwrap()
}

async fn text(body: Body) -> String {
    let bytes = axum::body::to_bytes(body, usize::MAX).await.unwrap();
    String::from_utf8(bytes.to_vec()).unwrap()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn small_answers_come_back_whole_and_one_connection_serves_them_all() {
    let owner = Owner::start(|_, _| Act::Answer).await;
    let hops = HopConnections::default();
    for _ in 0..3 {
        let answer = hops.send(&owner.address, post("{}")).await.unwrap();
        assert_eq!(answer.status(), 200);
        assert_eq!(answer.headers()["content-length"], "12");
        assert_eq!(text(answer.into_body()).await, "connection 0");
    }
    assert_eq!(owner.accepted.load(Ordering::SeqCst), 1);
    let seen = owner.seen();
    assert_eq!(seen.len(), 3);
    // Origin-form, a `Host`, the body as sent.
    assert!(
        seen[0]
            .head
            .starts_with("POST /v1/sessions/s1/batches HTTP/1.1\r\n"),
        "{}",
        seen[0].head
    );
    assert!(
        seen[0]
            .head
            .to_ascii_lowercase()
            .contains("\r\nhost: 127.0.0.1:")
    );
    assert_eq!(seen[2].body, b"{}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_buffered_request_on_a_pooled_connection_the_owner_closed_is_sent_again_on_a_fresh_one() {
    // The first connection answers one request, then reads the next and closes unanswered.
    let owner = Owner::start(|connection, n| match (connection, n) {
        (0, 0) => Act::Answer,
        (0, _) => Act::Close,
        _ => Act::Answer,
    })
    .await;
    let hops = HopConnections::default();
    let first = hops.send(&owner.address, post("{\"n\":1}")).await.unwrap();
    assert_eq!(text(first.into_body()).await, "connection 0");
    let second = hops.send(&owner.address, post("{\"n\":2}")).await.unwrap();
    assert_eq!(second.status(), 200);
    assert_eq!(text(second.into_body()).await, "connection 1");
    let seen = owner.seen();
    let second_sent: Vec<(usize, &[u8])> = seen[1..]
        .iter()
        .map(|seen| (seen.connection, seen.body.as_slice()))
        .collect();
    // Read by the owner on the stale connection, then whole again on the fresh one.
    assert_eq!(
        second_sent,
        [(0, &b"{\"n\":2}"[..]), (1, &b"{\"n\":2}"[..])]
    );
    assert_eq!(owner.accepted.load(Ordering::SeqCst), 2);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_request_on_a_pooled_connection_the_owner_closed_fails_sent_once() {
    let owner = Owner::start(|connection, n| match (connection, n) {
        (0, 0) => Act::Answer,
        _ => Act::Close,
    })
    .await;
    let hops = HopConnections::default();
    let first = hops.send(&owner.address, post("{}")).await.unwrap();
    assert_eq!(text(first.into_body()).await, "connection 0");
    // No `Content-Length`: the body streams, so it cannot be sent again.
    let chunks = futures::stream::iter([Ok::<_, std::io::Error>(Bytes::from_static(b"{}"))]);
    let streamed = Request::builder()
        .method(Method::POST)
        .uri("/v1/sessions/s1/batches")
        .body(Body::from_stream(chunks))
        .unwrap();
    let failed = hops.send(&owner.address, streamed).await;
    assert!(failed.is_err(), "{failed:?}");
    assert_eq!(owner.seen().len(), 2);
    assert_eq!(owner.accepted.load(Ordering::SeqCst), 1);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_streamed_answer_reaches_the_caller_before_it_ends_then_its_connection_is_reused() {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = format!("http://{}", listener.local_addr().unwrap());
    let (go_on, mut told) = tokio::sync::mpsc::channel::<()>(1);
    let accepted = Arc::new(AtomicUsize::new(0));
    let count = accepted.clone();
    tokio::spawn(async move {
        loop {
            let (mut stream, _) = listener.accept().await.unwrap();
            count.fetch_add(1, Ordering::SeqCst);
            let mut buffer = Vec::new();
            // An SSE stream, its second event only once the caller has read the first.
            read_request(&mut stream, &mut buffer).await.unwrap();
            let head = "HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n\
                        transfer-encoding: chunked\r\n\r\n";
            stream.write_all(head.as_bytes()).await.unwrap();
            stream.write_all(b"9\r\ndata: 1\n\n\r\n").await.unwrap();
            crate::support::deadline::within(
                crate::support::deadline::STEP,
                "the go-on",
                told.recv(),
            )
            .await
            .unwrap();
            stream
                .write_all(b"9\r\ndata: 2\n\n\r\n0\r\n\r\n")
                .await
                .unwrap();
            // Then a small answer on the same connection.
            read_request(&mut stream, &mut buffer).await.unwrap();
            let small = "HTTP/1.1 200 OK\r\ncontent-length: 2\r\n\r\nok";
            stream.write_all(small.as_bytes()).await.unwrap();
            let _ = read_request(&mut stream, &mut buffer).await;
        }
    });
    let hops = HopConnections::default();
    let get = || {
        Request::builder()
            .uri("/v1/sessions/s1/events")
            .body(Body::empty())
            .unwrap()
    };
    let answer = hops.send(&address, get()).await.unwrap();
    assert_eq!(answer.headers()["content-type"], "text/event-stream");
    let mut body = answer.into_body().into_data_stream();
    let first = tokio::time::timeout(Duration::from_secs(5), body.next())
        .await
        .expect("the first event arrives while the stream is open")
        .unwrap()
        .unwrap();
    assert_eq!(first, "data: 1\n\n");
    go_on.send(()).await.unwrap();
    let rest =
        crate::support::deadline::within(crate::support::deadline::STEP, "the rest", body.next())
            .await
            .unwrap()
            .unwrap();
    assert_eq!(rest, "data: 2\n\n");
    assert!(
        crate::support::deadline::within(crate::support::deadline::STEP, "the end", body.next())
            .await
            .is_none()
    );
    // The connection goes back to the pool once the stream is over (on its own task).
    tokio::time::sleep(Duration::from_millis(200)).await;
    let next = hops.send(&address, get()).await.unwrap();
    assert_eq!(text(next.into_body()).await, "ok");
    assert_eq!(accepted.load(Ordering::SeqCst), 1);
}
