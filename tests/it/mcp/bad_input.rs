//! What the MCP door answers to requests it cannot serve, as `src/api/mcp/mod.rs` documents
//! them, and that the daemon serves on after each (a valid request follows every case):
//! unknown methods and tools, params that do not fit the method, a body that is not one
//! JSON-RPC message (malformed JSON, a batch, JSON that is not JSON-RPC: 400 with `-32700` or
//! `-32600`), a head rmcp refuses before the body is read (foreign `Origin` or `Host` 403,
//! missing `Accept` 406, wrong `Content-Type` 415), a 20 MB body (413), protocol versions
//! missing, unsupported or disagreeing with the headers.

use std::io::{BufRead, BufReader, Write};
use std::net::{Shutdown, TcpStream};
use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::{LEGACY, McpClient, STATELESS};
use crate::http::harness::Toold;

/// A stateless `tools/list` answers: the daemon is still serving.
async fn assert_serving(toold: &Toold, after: &str) {
    let mut client = McpClient::new(toold, "/mcp");
    let listed = client.stateless("tools/list", json!({}), None).await;
    assert_eq!(
        listed.status,
        StatusCode::OK,
        "after {after}: {}",
        listed.text
    );
    assert!(listed.result()["tools"].is_array(), "after {after}");
}

/// The `_meta` of a 2026 request naming `version`.
fn meta(version: &str) -> Value {
    json!({"io.modelcontextprotocol/protocolVersion": version,
           "io.modelcontextprotocol/clientCapabilities": {}})
}

#[tokio::test]
async fn unknown_methods_and_tools_and_wrong_params_are_jsonrpc_errors_in_both_eras() {
    let toold = Toold::start();
    let mut stateless = McpClient::new(&toold, "/mcp");
    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    let wrong_params = [
        // (params, what the error says)
        (json!({"name": "reed_file", "arguments": {}}), "reed_file"),
        (
            json!({"arguments": {"file_path": "x"}}),
            "missing field `name`",
        ),
        (
            json!({"name": "read_file", "arguments": 5}),
            "expected a map",
        ),
        (
            json!({"name": "read_file", "arguments": [1]}),
            "expected a map",
        ),
    ];
    for (params, says) in wrong_params {
        let name = params["name"].as_str();
        let answer = stateless
            .stateless("tools/call", params.clone(), name)
            .await;
        assert_eq!(answer.status, StatusCode::OK, "{params}: {}", answer.text);
        assert_eq!(
            answer.message["error"]["code"], -32602,
            "{params}: {}",
            answer.text
        );
        assert!(answer.text.contains(says), "{params}: {}", answer.text);
        let answer = legacy.legacy("tools/call", params.clone()).await;
        assert_eq!(
            answer.message["error"]["code"], -32602,
            "{params}: {}",
            answer.text
        );
        assert!(answer.text.contains(says), "{params}: {}", answer.text);
    }

    let method = stateless
        .stateless("tools/frobnicate", json!({}), None)
        .await;
    assert_eq!(method.status, StatusCode::NOT_FOUND, "{}", method.text);
    assert_eq!(method.message["error"]["code"], -32601, "{}", method.text);
    assert!(method.text.contains("tools/frobnicate"), "{}", method.text);
    let method = legacy.legacy("tools/frobnicate", json!({})).await;
    assert_eq!(method.status, StatusCode::OK, "{}", method.text);
    assert_eq!(method.message["error"]["code"], -32601, "{}", method.text);

    // Both eras serve on.
    let ping = legacy.legacy("ping", json!({})).await;
    assert_eq!(ping.result(), &json!({}));
    assert_serving(&toold, "wrong params").await;
}

#[tokio::test]
async fn a_body_that_is_not_one_jsonrpc_message_is_a_jsonrpc_error_with_400_in_both_eras() {
    let toold = Toold::start();
    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    let stateless = McpClient::new(&toold, "/mcp");
    let ping = r#"{"jsonrpc":"2.0","id":1,"method":"ping"}"#;
    let cases: &[(&str, &str, i32, &str, Value)] = &[
        // (case, body, code, the message says, id)
        (
            "malformed JSON",
            "{\"jsonrpc\": \"2.0\", \"id\": 1,",
            -32700,
            "parse error",
            Value::Null,
        ),
        (
            "not JSON",
            "tools/list please",
            -32700,
            "parse error",
            Value::Null,
        ),
        ("an empty body", "", -32700, "EOF", Value::Null),
        (
            "a batch",
            &format!("[{ping}, {ping}]"),
            -32600,
            "batch",
            Value::Null,
        ),
        ("an empty batch", "[]", -32600, "batch", Value::Null),
        ("a number", "42", -32600, "not a number", Value::Null),
        ("a string", "\"ping\"", -32600, "not a string", Value::Null),
        ("null", "null", -32600, "not null", Value::Null),
        (
            "no jsonrpc",
            r#"{"id":7,"method":"ping"}"#,
            -32600,
            "\"jsonrpc\"",
            json!(7),
        ),
        (
            "jsonrpc 1.0",
            r#"{"jsonrpc":"1.0","id":"a","method":"ping"}"#,
            -32600,
            "\"1.0\"",
            json!("a"),
        ),
        (
            "no method",
            r#"{"jsonrpc":"2.0","id":7}"#,
            -32600,
            "no \"method\"",
            json!(7),
        ),
        (
            "a null id",
            r#"{"jsonrpc":"2.0","id":null,"method":"ping"}"#,
            -32600,
            "\"id\"",
            Value::Null,
        ),
        (
            "params not an object",
            r#"{"jsonrpc":"2.0","id":7,"method":"ping","params":5}"#,
            -32600,
            "\"params\"",
            json!(7),
        ),
        // Its outline passes; rmcp cannot read it (an error's code must be a number): still -32600.
        (
            "a malformed error",
            r#"{"jsonrpc":"2.0","id":7,"error":{"code":"x"}}"#,
            -32600,
            "server can read",
            Value::Null,
        ),
    ];
    for (case, body, code, says, id) in cases {
        for (client, era) in [(&stateless, STATELESS), (&legacy, LEGACY)] {
            let answer = client
                .post_raw(&[("mcp-protocol-version", era)], body.as_bytes().to_vec())
                .await;
            let context = format!("{case} ({era}): {} {}", answer.status, answer.text);
            assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{context}");
            assert_eq!(
                answer.headers["content-type"], "application/json",
                "{context}"
            );
            assert_eq!(answer.message["jsonrpc"], "2.0", "{context}");
            assert_eq!(answer.message["error"]["code"], *code, "{context}");
            let message = answer.message["error"]["message"].as_str().unwrap();
            assert!(message.contains(says), "{context}");
            assert_eq!(answer.message.get("id"), Some(id), "{context}");
        }
        assert_serving(&toold, case).await;
    }
    // The legacy session lives on too.
    let ping = legacy.legacy("ping", json!({})).await;
    assert_eq!(ping.result(), &json!({}));
}

#[tokio::test]
async fn the_head_is_checked_before_the_body_and_a_foreign_origin_or_host_is_403() {
    let toold = Toold::start();
    let mcp = McpClient::new(&toold, "/mcp");
    let valid = json!({"jsonrpc": "2.0", "id": 9, "method": "server/discover",
                       "params": {"_meta": meta(STATELESS)}});
    let valid_headers = [
        ("mcp-protocol-version", STATELESS),
        ("mcp-method", "server/discover"),
    ];
    for (case, body) in [
        ("valid", valid.to_string()),
        ("malformed", "{oops".to_owned()),
    ] {
        // DNS rebinding: a foreign Origin, or a Host that is not the listener's own name.
        let mut headers = valid_headers.to_vec();
        headers.push(("origin", "http://evil.example"));
        let foreign = mcp.post_raw(&headers, body.clone().into_bytes()).await;
        assert_eq!(
            foreign.status,
            StatusCode::FORBIDDEN,
            "{case}: {}",
            foreign.text
        );
        let mut headers = valid_headers.to_vec();
        headers.push(("host", "evil.example"));
        let rebound = mcp.post_raw(&headers, body.clone().into_bytes()).await;
        assert_eq!(
            rebound.status,
            StatusCode::FORBIDDEN,
            "{case}: {}",
            rebound.text
        );

        // The content negotiation headers, each on its own, without the client's defaults.
        let json = ("content-type", "application/json");
        let both = ("accept", "application/json, text/event-stream");
        let wrong_type = post_bare(&toold, &[("content-type", "text/plain"), both], &body).await;
        assert_eq!(wrong_type, StatusCode::UNSUPPORTED_MEDIA_TYPE, "{case}");
        let no_accept = post_bare(&toold, &[json], &body).await;
        assert_eq!(no_accept, StatusCode::NOT_ACCEPTABLE, "{case}");
        let json_only = post_bare(&toold, &[json, ("accept", "application/json")], &body).await;
        assert_eq!(json_only, StatusCode::NOT_ACCEPTABLE, "{case}");
    }
    // The listener's own origin is accepted.
    let own_origin = toold.base.clone();
    let mut headers = valid_headers.to_vec();
    headers.push(("origin", own_origin.as_str()));
    let with_origin = mcp.post_raw(&headers, valid.to_string().into_bytes()).await;
    assert_eq!(with_origin.status, StatusCode::OK, "{}", with_origin.text);
    assert_serving(&toold, "foreign heads").await;
}

/// The status of a 2026 `server/discover` POST with `headers` only (no content negotiation
/// defaults).
async fn post_bare(toold: &Toold, headers: &[(&str, &str)], body: &str) -> StatusCode {
    let mut request = toold
        .client
        .post(format!("{}/mcp", toold.base))
        .header("mcp-protocol-version", STATELESS)
        .header("mcp-method", "server/discover")
        .body(body.to_owned());
    for (name, value) in headers {
        request = request.header(*name, *value);
    }
    request.send().await.unwrap().status()
}

/// POSTs `total` bytes of spaces to `/mcp` over a bare socket, declared in `Content-Length` or
/// sent chunked (then the server cannot know the size before reading), and returns the status
/// line; the upload stops when the server has answered.
fn post_large(base: &str, total: usize, chunked: bool) -> String {
    let address = base.trim_start_matches("http://").to_owned();
    let stream = TcpStream::connect(&address).unwrap();
    stream
        .set_read_timeout(Some(Duration::from_secs(60)))
        .unwrap();
    let framing = if chunked {
        "Transfer-Encoding: chunked\r\n".to_owned()
    } else {
        format!("Content-Length: {total}\r\n")
    };
    let head = format!(
        "POST /mcp HTTP/1.1\r\nHost: {address}\r\nContent-Type: application/json\r\n\
         Accept: application/json, text/event-stream\r\n{framing}\r\n"
    );
    let mut writer = stream.try_clone().unwrap();
    let upload = std::thread::spawn(move || {
        let chunk = vec![b' '; 64 * 1024];
        let mut sent = 0;
        writer.write_all(head.as_bytes())?;
        while sent < total {
            let n = chunk.len().min(total - sent);
            if chunked {
                writer.write_all(format!("{n:x}\r\n").as_bytes())?;
                writer.write_all(&chunk[..n])?;
                writer.write_all(b"\r\n")?;
            } else {
                writer.write_all(&chunk[..n])?;
            }
            sent += n;
        }
        if chunked {
            writer.write_all(b"0\r\n\r\n")?;
        }
        Ok::<_, std::io::Error>(())
    });
    let mut status = String::new();
    BufReader::new(&stream).read_line(&mut status).unwrap();
    // The server may stop reading once it answered; end the upload either way.
    let _ = stream.shutdown(Shutdown::Both);
    let _ = upload.join();
    status
}

#[tokio::test]
async fn a_20_mb_body_is_413_declared_or_streamed_and_the_daemon_serves_on() {
    let toold = Toold::start();
    let base = toold.base.clone();
    for chunked in [false, true] {
        let base = base.clone();
        let status = tokio::task::spawn_blocking(move || post_large(&base, 20_000_000, chunked))
            .await
            .unwrap();
        assert!(
            status.starts_with("HTTP/1.1 413"),
            "chunked {chunked}: {status}"
        );
        assert_serving(&toold, "a 20 MB body").await;
    }
    // Just past the limit (16 MiB by default) with reqwest, which reports a reset connection
    // rather than the early answer when the server stops reading a much larger upload.
    let mcp = McpClient::new(&toold, "/mcp");
    let huge = mcp.post_raw(&[], vec![b' '; (16 << 20) + 4096]).await;
    assert_eq!(huge.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", huge.text);
    assert_serving(&toold, "a body past the limit").await;
}

/// (case, headers, body, code, the message says)
type HeaderCase = (
    &'static str,
    Vec<(&'static str, &'static str)>,
    Value,
    i32,
    &'static str,
);

#[tokio::test]
async fn protocol_versions_missing_unsupported_or_disagreeing_with_the_headers() {
    let toold = Toold::start();
    let mcp = McpClient::new(&toold, "/mcp");
    let list = |version: &str| {
        json!({"jsonrpc": "2.0", "id": 3, "method": "tools/list",
               "params": {"_meta": meta(version)}})
    };
    let call = json!({"jsonrpc": "2.0", "id": 4, "method": "tools/call", "params": {
        "name": "read_file", "arguments": {"file_path": "x"}, "_meta": meta(STATELESS)}});
    let cases: Vec<HeaderCase> = vec![
        // (case, headers, body, code, the message says); each 400.
        (
            "no MCP-Protocol-Version on a 2026 request",
            vec![("mcp-method", "tools/list")],
            list(STATELESS),
            -32020,
            "MCP-Protocol-Version",
        ),
        (
            "MCP-Protocol-Version disagreeing with _meta",
            vec![
                ("mcp-protocol-version", LEGACY),
                ("mcp-method", "tools/list"),
            ],
            list(STATELESS),
            -32020,
            "does not match",
        ),
        (
            "an unsupported version in _meta",
            vec![
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ],
            list("2099-01-01"),
            -32022,
            "Unsupported protocol version",
        ),
        (
            "no Mcp-Method",
            vec![("mcp-protocol-version", STATELESS)],
            list(STATELESS),
            -32020,
            "Mcp-Method",
        ),
        (
            "Mcp-Method disagreeing with the method",
            vec![
                ("mcp-protocol-version", STATELESS),
                ("mcp-method", "tools/call"),
            ],
            list(STATELESS),
            -32020,
            "does not match",
        ),
        (
            "no Mcp-Name on tools/call",
            vec![
                ("mcp-protocol-version", STATELESS),
                ("mcp-method", "tools/call"),
            ],
            call.clone(),
            -32020,
            "Mcp-Name",
        ),
        (
            "Mcp-Name disagreeing with the tool",
            vec![
                ("mcp-protocol-version", STATELESS),
                ("mcp-method", "tools/call"),
                ("mcp-name", "write_file"),
            ],
            call,
            -32020,
            "does not match",
        ),
        (
            "an initialize whose MCP-Protocol-Version disagrees with its body",
            vec![("mcp-protocol-version", "2025-06-18")],
            json!({"jsonrpc": "2.0", "id": 5, "method": "initialize", "params": {
                "protocolVersion": LEGACY, "capabilities": {},
                "clientInfo": {"name": "t", "version": "1"}}}),
            -32600,
            "does not match",
        ),
    ];
    for (case, headers, body, code, says) in cases {
        let answer = mcp.post_raw(&headers, body.to_string().into_bytes()).await;
        let context = format!("{case}: {} {}", answer.status, answer.text);
        assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{context}");
        assert_eq!(answer.message["error"]["code"], code, "{context}");
        assert!(answer.text.contains(says), "{context}");
        assert_eq!(answer.message["id"], body["id"], "{context}");
        assert_serving(&toold, case).await;
    }
    let unsupported = &list("2099-01-01");
    let answer = mcp
        .post_raw(
            &[
                ("mcp-protocol-version", "2099-01-01"),
                ("mcp-method", "tools/list"),
            ],
            unsupported.to_string().into_bytes(),
        )
        .await;
    assert!(
        answer.message["error"]["data"]["supported"]
            .as_array()
            .unwrap()
            .contains(&json!(STATELESS)),
        "{}",
        answer.text
    );

    // An initialize with a version the server does not know is answered with its own.
    let init = json!({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
        "protocolVersion": "1999-01-01", "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"}}});
    let answer = mcp.post_raw(&[], init.to_string().into_bytes()).await;
    assert_eq!(answer.status, StatusCode::OK, "{}", answer.text);
    assert_eq!(
        answer.result()["protocolVersion"],
        LEGACY,
        "{}",
        answer.text
    );

    // In a legacy session, an MCP-Protocol-Version the server does not know is 400.
    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    let ping = json!({"jsonrpc": "2.0", "id": 2, "method": "ping"});
    let answer = legacy
        .post_raw(
            &[("mcp-protocol-version", "1999-01-01")],
            ping.to_string().into_bytes(),
        )
        .await;
    assert_eq!(answer.status, StatusCode::BAD_REQUEST, "{}", answer.text);
    assert!(answer.text.contains("1999-01-01"), "{}", answer.text);
    let pong = legacy.legacy("ping", json!({})).await;
    assert_eq!(pong.result(), &json!({}));
    assert_serving(&toold, "protocol versions").await;
}

#[tokio::test]
async fn a_foreign_origin_is_refused_before_its_body_is_read() {
    let toold = Toold::start();
    let base = toold.base.clone();
    // The body is declared at 1 MB (under the limit) and never sent: a door that read it
    // before checking the head would wait for it and answer nothing.
    let status = tokio::task::spawn_blocking(move || {
        let address = base.trim_start_matches("http://").to_owned();
        let stream = TcpStream::connect(&address).unwrap();
        stream
            .set_read_timeout(Some(Duration::from_secs(10)))
            .unwrap();
        let head = format!(
            "POST /mcp HTTP/1.1\r\nHost: {address}\r\nOrigin: http://evil.example\r\n\
             Content-Type: application/json\r\nAccept: application/json, text/event-stream\r\n\
             Content-Length: 1000000\r\n\r\n{{\"jsonrpc\""
        );
        (&stream).write_all(head.as_bytes()).unwrap();
        let mut status = String::new();
        BufReader::new(&stream)
            .read_line(&mut status)
            .expect("answered without the rest of the body");
        stream.shutdown(Shutdown::Both).ok();
        status
    })
    .await
    .unwrap();
    assert!(status.starts_with("HTTP/1.1 403"), "{status:?}");
    assert_serving(&toold, "a foreign origin's unread body").await;
}
