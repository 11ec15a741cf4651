//! A tiny HTTP/1.1 server on loopback for `web_fetch` tests: tokio and hand-written
//! responses, one request per connection, every request recorded.

use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};

/// What the server answers a request with.
pub enum Reply {
    Respond {
        status: u16,
        headers: Vec<(String, String)>,
        body: Vec<u8>,
    },
    /// Accepts the request and never answers.
    Hang,
}

impl Reply {
    pub fn ok(content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        Reply::with_status(200, content_type, body)
    }

    pub fn with_status(status: u16, content_type: &str, body: impl Into<Vec<u8>>) -> Reply {
        let headers = if content_type.is_empty() {
            Vec::new()
        } else {
            vec![("Content-Type".to_owned(), content_type.to_owned())]
        };
        Reply::Respond {
            status,
            headers,
            body: body.into(),
        }
    }

    pub fn redirect(status: u16, location: &str) -> Reply {
        Reply::Respond {
            status,
            headers: vec![("Location".to_owned(), location.to_owned())],
            body: Vec::new(),
        }
    }
}

type Route = Arc<dyn Fn(&str) -> Reply + Send + Sync>;

/// A running server; it stops when the test's runtime ends.
pub struct TestServer {
    pub addr: SocketAddr,
    requests: Arc<Mutex<Vec<String>>>,
}

impl TestServer {
    /// Serves on `ip` (any port), answering each request path with `route`.
    pub async fn start(
        ip: &str,
        route: impl Fn(&str) -> Reply + Send + Sync + 'static,
    ) -> TestServer {
        let listener = TcpListener::bind((ip, 0))
            .await
            .expect("bind the test server");
        let addr = listener.local_addr().unwrap();
        let requests = Arc::new(Mutex::new(Vec::new()));
        let route: Route = Arc::new(route);
        let seen = requests.clone();
        tokio::spawn(async move {
            while let Ok((stream, _)) = listener.accept().await {
                let route = route.clone();
                let seen = seen.clone();
                tokio::spawn(async move { serve(stream, route, seen).await });
            }
        });
        TestServer { addr, requests }
    }

    /// `http://ip:port{path}`.
    pub fn url(&self, path: &str) -> String {
        format!("http://{}{path}", self.addr)
    }

    /// The request heads received so far (request line and headers).
    pub fn requests(&self) -> Vec<String> {
        self.requests.lock().unwrap().clone()
    }
}

async fn serve(mut stream: TcpStream, route: Route, seen: Arc<Mutex<Vec<String>>>) {
    let mut head = Vec::new();
    let mut buffer = [0u8; 4096];
    while !head.windows(4).any(|w| w == b"\r\n\r\n") && head.len() < 65_536 {
        match stream.read(&mut buffer).await {
            Ok(0) | Err(_) => return,
            Ok(n) => head.extend_from_slice(&buffer[..n]),
        }
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    let path = head.split_whitespace().nth(1).unwrap_or("/").to_owned();
    seen.lock().unwrap().push(head);
    match route(&path) {
        Reply::Hang => {
            // Hold the connection open without answering.
            let _ = stream.read(&mut buffer).await;
            std::future::pending::<()>().await;
        }
        Reply::Respond {
            status,
            headers,
            body,
        } => {
            let mut response = format!(
                "HTTP/1.1 {status} Test\r\nContent-Length: {}\r\nConnection: close\r\n",
                body.len()
            );
            for (name, value) in headers {
                response.push_str(&format!("{name}: {value}\r\n"));
            }
            response.push_str("\r\n");
            // The client may hang up early (size cap, refusal): ignore write errors.
            let _ = stream.write_all(response.as_bytes()).await;
            let _ = stream.write_all(&body).await;
            let _ = stream.shutdown().await;
        }
    }
}
