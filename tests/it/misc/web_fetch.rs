//! `web_fetch` against servers on loopback: conversion, redirects, caps, timeouts, schemes,
//! and server-side request forgery refused by literal, by resolution and by redirect.

use std::net::IpAddr;
use std::sync::Arc;

use serde_json::{Value, json};
use toold::permission::matcher::web_fetch_host;
use toold::session::{SessionConfig, SessionState};
use toold::tool::{ErrorKind, Tool, ToolContext, ToolError, ToolOutput};
use toold::tools::{AddressPolicy, WebFetchSettings, WebFetchTool};

use crate::misc::harness::{Env, EnvOptions, execution_message, run_detached, validation_message};
use crate::misc::http_server::{Reply, TestServer};

fn settings(allow_private: bool) -> WebFetchSettings {
    WebFetchSettings {
        allow_private_addresses: allow_private,
        timeout_ms: 5_000,
        max_redirects: 3,
        max_body_bytes: 50_000,
    }
}

fn session() -> Arc<SessionState> {
    Arc::new(SessionState::new(SessionConfig::new(
        "sess_web",
        std::env::temp_dir(),
    )))
}

async fn fetch_with(tool: &WebFetchTool, input: Value) -> Result<ToolOutput, ToolError> {
    run_detached(tool, &session(), input).await
}

async fn fetch(url: &str) -> Result<ToolOutput, ToolError> {
    let tool = WebFetchTool::new(settings(true)).unwrap();
    fetch_with(&tool, json!({ "url": url })).await
}

/// A server with the routes the fetch tests use.
async fn site() -> TestServer {
    TestServer::start("127.0.0.1", |path| match path {
        "/page" => Reply::ok(
            "text/html; charset=utf-8",
            "<!doctype html><html><head><title>T</title><style>body{}</style></head><body>\
             <h1>Welcome</h1><script>alert('x')</script><p>Read <a href=\"/docs\">the docs</a>.</p>\
             <ul><li>first</li><li>second</li></ul></body></html>",
        ),
        "/plain" => Reply::ok("text/plain", "line one\nline two\n"),
        "/json" => Reply::ok("application/json", r#"{"a": [1, 2]}"#),
        "/png" => Reply::ok("image/png", b"\x89PNG\r\n\x1a\n\0\0\0\rIHDR".to_vec()),
        "/octet-binary" => Reply::ok("application/octet-stream", vec![0u8, 1, 2, 255, 254]),
        "/octet-text" => Reply::ok("", "just text, undeclared"),
        "/undeclared-html" => Reply::ok("", "<html><body><h2>Sniffed</h2></body></html>"),
        "/missing" => Reply::with_status(404, "text/plain", "no such page"),
        "/big" => Reply::ok("text/plain", "a".repeat(120_000)),
        "/hang" => Reply::Hang,
        "/to-plain" => Reply::redirect(301, "/plain"),
        "/ftp" => Reply::redirect(302, "ftp://example.com/file"),
        "/creds" => Reply::redirect(302, "http://user:secret@127.0.0.1/plain"),
        "/metadata" => Reply::redirect(302, "http://169.254.169.254/latest/meta-data/"),
        "/ten" => Reply::redirect(307, "http://10.0.0.1/"),
        path if path.starts_with("/hops/") => {
            let left: u32 = path["/hops/".len()..].parse().unwrap();
            if left == 0 {
                Reply::ok("text/plain", "arrived")
            } else {
                Reply::redirect(302, &format!("/hops/{}", left - 1))
            }
        }
        _ => Reply::with_status(404, "text/plain", "unrouted"),
    })
    .await
}

#[tokio::test]
async fn html_becomes_markdown() {
    let server = site().await;
    let output = fetch(&server.url("/page")).await.unwrap();
    assert!(!output.is_error);
    let text = &output.text;
    assert!(
        text.starts_with(&format!("URL: {}", server.url("/page"))),
        "{text}"
    );
    assert!(text.contains("Status: 200 OK"), "{text}");
    assert!(text.contains("# Welcome"), "{text}");
    assert!(text.contains("[the docs](/docs)"), "{text}");
    assert!(text.contains("first") && text.contains("second"), "{text}");
    assert!(
        !text.contains("alert") && !text.contains("body{}"),
        "{text}"
    );
    assert_eq!(output.metadata["status"], json!(200));
    assert_eq!(output.metadata["content_type"], json!("text/html"));
    assert_eq!(output.metadata["redirects"], json!(0));
    let head = &server.requests()[0];
    assert!(head.starts_with("GET /page HTTP/1.1"), "{head}");
    assert!(
        head.to_ascii_lowercase()
            .contains("user-agent: toold-web-fetch/"),
        "{head}"
    );
}

#[tokio::test]
async fn text_types_come_back_as_they_are() {
    let server = site().await;
    let cases = [
        ("/plain", "line one\nline two"),
        ("/json", r#"{"a": [1, 2]}"#),
        ("/octet-text", "just text, undeclared"),
        ("/undeclared-html", "## Sniffed"),
    ];
    for (path, expected) in cases {
        let output = fetch(&server.url(path)).await.unwrap();
        assert!(output.text.contains(expected), "{path}: {}", output.text);
    }
}

#[tokio::test]
async fn binary_bodies_are_refused() {
    let server = site().await;
    for path in ["/png", "/octet-binary"] {
        let message = execution_message(fetch(&server.url(path)).await);
        assert!(message.contains("binary content"), "{path}: {message}");
    }
}

#[tokio::test]
async fn an_http_error_status_is_a_failure_with_the_body() {
    let server = site().await;
    let output = fetch(&server.url("/missing")).await.unwrap();
    assert!(output.is_error);
    assert!(
        output.text.contains("Status: 404 Not Found"),
        "{}",
        output.text
    );
    assert!(output.text.contains("no such page"), "{}", output.text);
}

#[tokio::test]
async fn redirects_are_followed_up_to_the_limit() {
    let server = site().await;
    let output = fetch(&server.url("/hops/3")).await.unwrap();
    assert!(output.text.contains("arrived"), "{}", output.text);
    assert!(output.text.contains("Redirected from:"), "{}", output.text);
    assert_eq!(output.metadata["redirects"], json!(3));
    assert_eq!(output.metadata["final_url"], json!(server.url("/hops/0")));

    let fresh = site().await;
    let message = execution_message(fetch(&fresh.url("/hops/4")).await);
    assert!(message.contains("too many redirects"), "{message}");
    assert!(message.contains("/hops/0"), "{message}");
    // The fourth redirect was never followed: the original request and three hops.
    assert_eq!(fresh.requests().len(), 4, "{:?}", fresh.requests());
    assert!(
        !fresh
            .requests()
            .iter()
            .any(|r| r.starts_with("GET /hops/0 "))
    );

    let output = fetch(&server.url("/to-plain")).await.unwrap();
    assert!(output.text.contains("line one"), "{}", output.text);
}

#[tokio::test]
async fn bodies_over_the_cap_are_cut() {
    let server = site().await;
    let tool = WebFetchTool::new(WebFetchSettings {
        max_body_bytes: 1_000,
        ..settings(true)
    })
    .unwrap();
    let output = fetch_with(&tool, json!({"url": server.url("/big")}))
        .await
        .unwrap();
    assert_eq!(output.metadata["bytes"], json!(1_000));
    assert_eq!(output.metadata["body_truncated"], json!(true));
    assert!(
        output.text.contains("larger than 1000 bytes"),
        "{}",
        output.text
    );
}

#[tokio::test]
async fn max_chars_cuts_the_text_with_a_note() {
    let server = site().await;
    let tool = WebFetchTool::new(settings(true)).unwrap();
    let output = fetch_with(&tool, json!({"url": server.url("/big"), "max_chars": 10}))
        .await
        .unwrap();
    assert!(
        output.text.contains(&format!(
            "\n\n{}\n\n[content cut at 10 of 50000 characters",
            "a".repeat(10)
        )),
        "{}",
        output.text
    );
    assert_eq!(output.metadata["truncated"], json!(true));
    // The session's runtime setting is the default when the call gives none.
    let session = session();
    session.apply(&[toold::tool::ContextUpdate::RuntimeSetting {
        key: "web_fetch_max_chars".into(),
        value: json!(20),
    }]);
    let output = run_detached(&tool, &session, json!({"url": server.url("/big")}))
        .await
        .unwrap();
    assert!(
        output.text.contains("content cut at 20 of"),
        "{}",
        output.text
    );
}

#[tokio::test]
async fn a_silent_server_times_out() {
    let server = site().await;
    let tool = WebFetchTool::new(WebFetchSettings {
        timeout_ms: 300,
        ..settings(true)
    })
    .unwrap();
    let message = match fetch_with(&tool, json!({"url": server.url("/hang")})).await {
        Err(ToolError::Timeout(message)) => message,
        other => panic!("expected a timeout, got {other:?}"),
    };
    assert!(message.contains("timed out after 300 ms"), "{message}");
}

#[tokio::test]
async fn cancellation_stops_a_fetch() {
    let server = site().await;
    let tool = WebFetchTool::new(settings(true)).unwrap();
    let ctx = ToolContext::detached(session());
    let cancel = ctx.cancellation.clone();
    tokio::spawn(async move {
        tokio::time::sleep(std::time::Duration::from_millis(50)).await;
        cancel.cancel();
    });
    let result = tool
        .execute(json!({"url": server.url("/hang")}), &ctx)
        .await;
    assert!(execution_message(result).contains("cancelled"));
}

#[tokio::test]
async fn a_closed_port_is_a_connection_error() {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let addr = listener.local_addr().unwrap();
    drop(listener);
    let message = execution_message(fetch(&format!("http://{addr}/")).await);
    assert!(message.contains("could not connect"), "{message}");
}

#[tokio::test]
async fn bad_urls_are_validation_errors() {
    let cases = [
        ("ftp://example.com/file", "only http and https"),
        ("file:///etc/passwd", "only http and https"),
        ("javascript:alert(1)", "only http and https"),
        ("data:text/plain,hi", "only http and https"),
        ("gopher://127.0.0.1:70/", "only http and https"),
        ("not a url", "is not a valid URL"),
        ("http://", "is not a valid URL"),
        ("/relative/path", "is not a valid URL"),
        ("http://user:pass@example.com/", "credentials"),
        ("https://token@example.com/", "credentials"),
    ];
    for (url, expected) in cases {
        let message = validation_message(fetch(url).await);
        assert!(message.contains(expected), "{url}: {message}");
    }
}

#[tokio::test]
async fn redirects_to_bad_schemes_or_credentials_are_refused() {
    let server = site().await;
    for (path, expected) in [("/ftp", "only http and https"), ("/creds", "credentials")] {
        let message = execution_message(fetch(&server.url(path)).await);
        assert!(message.contains(expected), "{path}: {message}");
    }
}

#[tokio::test]
async fn private_literals_are_refused_by_default() {
    // A live server on loopback, so a refusal cannot be a connection failure.
    let server = site().await;
    let port = server.addr.port();
    let tool = WebFetchTool::new(settings(false)).unwrap();
    let cases = [
        (format!("http://127.0.0.1:{port}/plain"), "loopback"),
        (format!("http://[::1]:{port}/plain"), "loopback"),
        (
            format!("http://[::ffff:127.0.0.1]:{port}/plain"),
            "loopback",
        ),
        // Other spellings of 127.0.0.1 that URL parsing normalises.
        (format!("http://2130706433:{port}/plain"), "loopback"),
        (format!("http://0x7f.1:{port}/plain"), "loopback"),
        (format!("http://0.0.0.0:{port}/plain"), "unspecified"),
        ("http://10.1.2.3/".to_owned(), "private"),
        ("http://192.168.0.1/".to_owned(), "private"),
        ("http://100.64.0.1/".to_owned(), "CGNAT"),
        (
            "http://169.254.169.254/latest/meta-data/".to_owned(),
            "cloud metadata",
        ),
        ("http://[fd00:ec2::254]/".to_owned(), "cloud metadata"),
        ("http://[fe80::1]/".to_owned(), "link-local"),
    ];
    for (url, reason) in &cases {
        let message = validation_message(fetch_with(&tool, json!({"url": url})).await);
        assert!(message.contains(reason), "{url}: {message}");
        assert!(
            message.contains("allow_private_addresses"),
            "{url}: {message}"
        );
    }
    assert!(server.requests().is_empty(), "{:?}", server.requests());
}

#[tokio::test]
async fn host_names_are_checked_after_resolution() {
    let server = site().await;
    let tool = WebFetchTool::new(settings(false)).unwrap();
    let url = format!("http://localhost:{}/plain", server.addr.port());
    let message = execution_message(fetch_with(&tool, json!({"url": url})).await);
    assert!(message.contains("resolved from \"localhost\""), "{message}");
    assert!(message.contains("loopback"), "{message}");
    assert!(server.requests().is_empty());
}

#[tokio::test]
async fn redirects_to_refused_addresses_are_refused() {
    let server = site().await;
    let loopback: IpAddr = "127.0.0.1".parse().unwrap();
    // Loopback is allowed so the first hop reaches the test server; the rest stays refused.
    let tool = WebFetchTool::with_policy(
        settings(false),
        AddressPolicy::deny_private().allowing(loopback),
    )
    .unwrap();
    let plain = fetch_with(&tool, json!({"url": server.url("/plain")}))
        .await
        .unwrap();
    assert!(plain.text.contains("line one"));
    for (path, reason) in [("/metadata", "cloud metadata"), ("/ten", "private")] {
        let message = execution_message(fetch_with(&tool, json!({"url": server.url(path)})).await);
        assert!(message.contains(reason), "{path}: {message}");
        let from = format!("(reached by a redirect from \"{}\")", server.url(path));
        assert!(message.ends_with(&from), "{path}: {message}");
    }
}

#[tokio::test]
async fn a_redirect_to_a_name_is_checked_after_resolution() {
    // The first server is on 127.0.0.2, the only address allowed; it redirects to
    // "localhost", which resolves to 127.0.0.1 (or ::1), both refused.
    let target = site().await;
    let location = format!("http://localhost:{}/plain", target.addr.port());
    let origin = TestServer::start("127.0.0.2", move |_| Reply::redirect(302, &location)).await;
    let allowed: IpAddr = "127.0.0.2".parse().unwrap();
    let tool = WebFetchTool::with_policy(
        settings(false),
        AddressPolicy::deny_private().allowing(allowed),
    )
    .unwrap();
    let message = execution_message(fetch_with(&tool, json!({"url": origin.url("/go")})).await);
    assert!(message.contains("resolved from \"localhost\""), "{message}");
    assert_eq!(origin.requests().len(), 1);
    assert!(target.requests().is_empty());
}

#[tokio::test]
async fn through_the_dispatcher_by_alias_and_with_bad_input() {
    let server = site().await;
    let env = Env::with(EnvOptions {
        web_fetch: settings(true),
        ..EnvOptions::default()
    });
    let result = env
        .call("WebFetch", json!({"url": server.url("/plain")}))
        .await;
    assert!(!result.is_error, "{}", result.output);
    assert!(result.output.contains("line one"));

    let cases = [
        (json!({}), ErrorKind::InputValidation),
        (json!({"url": 5}), ErrorKind::InputValidation),
        (
            json!({"url": "http://x/", "max_chars": 0}),
            ErrorKind::InputValidation,
        ),
        (
            json!({"url": "http://x/", "max_chars": "10"}),
            ErrorKind::InputValidation,
        ),
        (
            json!({"url": "http://x/", "extra": true}),
            ErrorKind::InputValidation,
        ),
        (
            json!({"url": "x".repeat(10_000)}),
            ErrorKind::InputValidation,
        ),
        (json!({"url": "file:///etc/passwd"}), ErrorKind::Validation),
    ];
    for (input, kind) in cases {
        let result = env.call("web_fetch", input.clone()).await;
        assert_eq!(result.error_kind, Some(kind), "{input}: {}", result.output);
    }
    // The default settings refuse private addresses.
    let strict = Env::new();
    let result = strict
        .call("web_fetch", json!({"url": server.url("/plain")}))
        .await;
    assert_eq!(
        result.error_kind,
        Some(ErrorKind::Validation),
        "{}",
        result.output
    );
}

#[test]
fn the_host_is_what_permission_rules_match() {
    let cases = [
        (
            json!({"url": "https://Docs.Example.org/a?b"}),
            Some("docs.example.org"),
        ),
        (json!({"url": "http://127.0.0.1:8080/"}), Some("127.0.0.1")),
        (json!({"url": "http://[::1]/"}), Some("[::1]")),
        (json!({"url": "ftp://example.org/"}), None),
        (json!({"url": "nonsense"}), None),
        (json!({"url": 3}), None),
        (json!({}), None),
    ];
    for (input, expected) in cases {
        assert_eq!(web_fetch_host(&input).as_deref(), expected, "{input}");
    }
}
