//! Plain text on the TLS port: an HTTP/1.1 request gets `400` saying the port speaks TLS, a
//! plain gRPC client (HTTP/2 without TLS) gets an error, other bytes a closed connection, and
//! through all of it the daemon goes on serving TLS clients.

use std::time::Duration;

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;
use toold::api::grpc::proto::CreateSessionRequest;
use toold::api::grpc::proto::tool_service_client::ToolServiceClient;

use super::{TlsDaemon, get};

/// Writes `bytes` on a new plain TCP connection and reads what comes back until it closes.
async fn plain_exchange(address: &str, bytes: &[u8]) -> Vec<u8> {
    let mut tcp = TcpStream::connect(address).await.unwrap();
    tcp.write_all(bytes).await.unwrap();
    let mut answer = Vec::new();
    tokio::time::timeout(Duration::from_secs(20), tcp.read_to_end(&mut answer))
        .await
        .expect("the daemon closes a plain connection")
        .unwrap();
    answer
}

#[tokio::test]
async fn plain_http_on_the_tls_port_is_refused_and_tls_clients_are_still_served() {
    let dir = tempfile::tempdir().unwrap();
    let toold = TlsDaemon::start(dir.path());

    let answer = plain_exchange(
        &toold.address,
        b"GET /healthz HTTP/1.1\r\nhost: localhost\r\n\r\n",
    )
    .await;
    let answer = String::from_utf8(answer).unwrap();
    assert!(answer.starts_with("HTTP/1.1 400 "), "{answer}");
    assert!(answer.contains("this port speaks TLS"), "{answer}");

    // An HTTP client speaking plain HTTP sees the same 400, as a response it can read.
    let response = reqwest::get(format!("http://{}/v1/sessions", toold.address))
        .await
        .expect("the refusal is a readable HTTP response");
    assert_eq!(response.status(), reqwest::StatusCode::BAD_REQUEST);
    assert!(response.text().await.unwrap().contains("https://"));

    // Neither a TLS record nor a request: closed without a word.
    let answer = plain_exchange(&toold.address, &[0, 1, 2, 3, 4, 5, 6, 7]).await;
    assert!(answer.is_empty(), "{answer:?}");

    // gRPC without TLS (HTTP/2 prior knowledge): an error, not a hang.
    let plain_grpc = async {
        let channel = tonic::transport::Endpoint::from_shared(format!("http://{}", toold.address))
            .unwrap()
            .connect()
            .await?;
        ToolServiceClient::new(channel)
            .create_session(CreateSessionRequest::default())
            .await
            .map(|_| ())
            .map_err(Into::into)
    };
    let refused: Result<(), Box<dyn std::error::Error>> =
        tokio::time::timeout(Duration::from_secs(30), plain_grpc)
            .await
            .expect("plain gRPC on the TLS port ends");
    assert!(refused.is_err(), "plain gRPC must not be served");

    let mut tls = toold.connect().await;
    let (status, body) = get(&mut tls, "/healthz").await;
    assert!(status.starts_with("HTTP/1.1 200"), "{status} {body}");
}
