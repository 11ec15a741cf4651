//! An environment session's network (DESIGN §12, bubblewrap tier): with `network = "none"`
//! (the default) bash has only a loopback of its own, so a server on the host's loopback is
//! out of reach; with `network = "host"` it is reached. The server is the test's own
//! `TcpListener`, answering one request.

use std::io::{Read, Write};
use std::net::TcpListener;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::fixture;
use crate::http::harness::Toold;

const ANSWER: &str = "answered-from-the-host";

/// A one-request HTTP server on the host's loopback: its port, and whether it was asked.
/// It gives up after `deadline` (the thread then ends with nothing asked).
fn one_request_server(deadline: Duration) -> (u16, Arc<AtomicBool>) {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let asked = Arc::new(AtomicBool::new(false));
    let flag = asked.clone();
    std::thread::spawn(move || {
        let until = Instant::now() + deadline;
        while Instant::now() < until {
            let Ok((mut stream, _)) = listener.accept() else {
                std::thread::sleep(Duration::from_millis(20));
                continue;
            };
            flag.store(true, Ordering::SeqCst);
            stream.set_nonblocking(false).unwrap();
            stream
                .set_read_timeout(Some(Duration::from_secs(10)))
                .unwrap();
            let mut request = [0u8; 4096];
            let _ = stream.read(&mut request);
            let reply = format!(
                "HTTP/1.0 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{ANSWER}",
                ANSWER.len()
            );
            let _ = stream.write_all(reply.as_bytes());
            return;
        }
    });
    (port, asked)
}

async fn wget(toold: &Toold, image: &str, network: Option<&str>, port: u16) -> Value {
    let mut environment = json!({"image": image});
    if let Some(network) = network {
        environment["network"] = json!(network);
    }
    let id = toold
        .session_with(&json!({"environment": environment}))
        .await;
    toold
        .call_one(
            &id,
            "bash",
            // No `-T`: the busybox of the test image crashes on it.
            json!({"command": format!(
                "wget -q -O- http://127.0.0.1:{port}/ && echo fetched || echo unreachable"
            )}),
        )
        .await
}

#[tokio::test]
async fn without_network_the_hosts_loopback_is_out_of_reach_and_with_host_it_is_reached() {
    let Some((registry, toold)) = fixture("") else {
        return;
    };
    let image = registry.image("test/busybox:1");

    let (port, asked) = one_request_server(Duration::from_secs(30));
    let out = wget(&toold, &image, None, port).await;
    assert_eq!(out["is_error"], false, "{out}");
    let text = out["output"].as_str().unwrap_or_default();
    assert!(text.contains("unreachable"), "{out}");
    assert!(!text.contains(ANSWER), "{out}");
    assert!(
        !asked.load(Ordering::SeqCst),
        "the host's server was reached: {out}"
    );
    // Said outright, as the default: the same.
    let out = wget(&toold, &image, Some("none"), port).await;
    assert!(
        out["output"]
            .as_str()
            .unwrap_or_default()
            .contains("unreachable"),
        "{out}"
    );
    assert!(
        !asked.load(Ordering::SeqCst),
        "the host's server was reached: {out}"
    );

    let (port, asked) = one_request_server(Duration::from_secs(60));
    let out = wget(&toold, &image, Some("host"), port).await;
    assert_eq!(out["is_error"], false, "{out}");
    let text = out["output"].as_str().unwrap_or_default();
    assert!(text.contains(ANSWER) && text.contains("fetched"), "{out}");
    assert!(asked.load(Ordering::SeqCst));
}
