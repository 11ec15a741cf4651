//! One file in and out: a 20 MiB binary round trip with `Range` and `ETag`; uploads refused
//! in a `read_only` session and outside the workspace; audit rows and events; agents kept to
//! their own sessions.

use reqwest::{Method, StatusCode};
use serde_json::json;

use super::{audit_rows, get_bytes, put_file};
use crate::http::harness::Toold;

/// 20 MiB with NUL bytes and every other byte value.
fn binary() -> Vec<u8> {
    (0..20u32 << 20)
        .map(|i| (i.wrapping_mul(2_654_435_761) >> 13) as u8)
        .collect()
}

#[tokio::test]
async fn a_binary_file_goes_in_and_comes_out_whole_and_by_range() {
    let toold = Toold::start();
    let session = toold.session().await;
    let data = binary();
    assert!(data.contains(&0));
    let reply = put_file(&toold, &session, "bin/blob.dat", data.clone()).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["bytes"], data.len());
    let path = format!("/v1/sessions/{session}/files/bin/blob.dat");
    let (status, headers, body) = get_bytes(&toold, &path, &[]).await;
    assert_eq!(status, StatusCode::OK);
    assert!(body == data, "the download equals the upload");
    let etag = headers["etag"].to_str().unwrap().to_owned();
    assert_eq!(headers["accept-ranges"], "bytes");

    let (status, headers, part) = get_bytes(&toold, &path, &[("range", "bytes=1000-1999")]).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(part, data[1000..2000]);
    assert_eq!(
        headers["content-range"],
        format!("bytes 1000-1999/{}", data.len())
    );
    // A client generated from the OpenAPI document percent-encodes the slashes of `{path}`.
    let encoded = format!("/v1/sessions/{session}/files/bin%2Fblob.dat");
    let (status, _, part) = get_bytes(&toold, &encoded, &[("range", "bytes=0-9")]).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(part, data[..10]);
    let (status, _, tail) = get_bytes(&toold, &path, &[("range", "bytes=-10")]).await;
    assert_eq!(status, StatusCode::PARTIAL_CONTENT);
    assert_eq!(tail, data[data.len() - 10..]);
    let past = format!("bytes={}-", data.len());
    let (status, headers, _) = get_bytes(&toold, &path, &[("range", &past)]).await;
    assert_eq!(status, StatusCode::RANGE_NOT_SATISFIABLE);
    assert_eq!(headers["content-range"], format!("bytes */{}", data.len()));
    let (status, _, empty) = get_bytes(&toold, &path, &[("if-none-match", &etag)]).await;
    assert_eq!(status, StatusCode::NOT_MODIFIED);
    assert!(empty.is_empty());

    // The same bytes have the same tag; other bytes another.
    put_file(&toold, &session, "copy.dat", data.clone()).await;
    let (_, same, _) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/files/copy.dat"),
        &[],
    )
    .await;
    assert_eq!(same["etag"], etag.as_str());
    put_file(&toold, &session, "copy.dat", b"other".to_vec()).await;
    let (_, other, body) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/files/copy.dat"),
        &[],
    )
    .await;
    assert_ne!(other["etag"], etag.as_str());
    assert_eq!(body, b"other");
    // A read_file of the uploaded text sees it: the tools and the endpoints share one view.
    let read = toold
        .call_one(&session, "read_file", json!({"file_path": "copy.dat"}))
        .await;
    assert!(read["output"].as_str().unwrap().contains("other"), "{read}");
}

#[tokio::test]
async fn modes_apply_and_missing_files_are_not_found() {
    let toold = Toold::start();
    let session = toold.session().await;
    let put = toold
        .request(
            Method::PUT,
            &format!("/v1/sessions/{session}/files/run.sh?mode=755"),
        )
        .body("#!/bin/sh\necho ran\n");
    assert_eq!(toold.send(put).await.status, StatusCode::OK);
    let ran = toold
        .call_one(&session, "bash", json!({"command": "./run.sh"}))
        .await;
    assert_eq!(ran["output"].as_str().unwrap().trim(), "ran", "{ran}");
    let bad = toold
        .request(
            Method::PUT,
            &format!("/v1/sessions/{session}/files/x?mode=9z"),
        )
        .body("x");
    assert_eq!(toold.send(bad).await.status, StatusCode::BAD_REQUEST);
    let unknown = toold
        .request(
            Method::PUT,
            &format!("/v1/sessions/{session}/files/x?owner=root"),
        )
        .body("x");
    assert_eq!(toold.send(unknown).await.status, StatusCode::BAD_REQUEST);
    let (status, _, body) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/files/nothing.txt"),
        &[],
    )
    .await;
    assert_eq!(
        status,
        StatusCode::NOT_FOUND,
        "{}",
        String::from_utf8_lossy(&body)
    );
    // A directory is not a file, either way.
    toold
        .call_one(&session, "bash", json!({"command": "mkdir d"}))
        .await;
    assert_eq!(
        put_file(&toold, &session, "d", b"x".to_vec()).await.status,
        StatusCode::BAD_REQUEST
    );
    let (status, _, _) = get_bytes(&toold, &format!("/v1/sessions/{session}/files/d"), &[]).await;
    assert_eq!(status, StatusCode::BAD_REQUEST);
}

#[tokio::test]
async fn uploads_are_refused_in_a_read_only_session_and_outside_the_workspace() {
    let toold = Toold::start();
    let read_only = toold
        .session_with(&json!({"permission_mode": "read_only"}))
        .await;
    let reply = put_file(&toold, &read_only, "a.txt", b"no".to_vec()).await;
    assert_eq!(reply.status, StatusCode::FORBIDDEN, "{}", reply.body);
    assert_eq!(reply.body["error"]["code"], "permission_denied");
    let workspace = toold.workspace(&read_only).await;
    assert!(!workspace.join("a.txt").exists());

    let session = toold.session().await;
    let workspace = toold.workspace(&session).await;
    let outside = tempfile::tempdir().unwrap();
    std::os::unix::fs::symlink(outside.path(), workspace.join("out")).unwrap();
    for path in [
        "%2E%2E%2Fescape.txt",
        "out/escape.txt",
        "%2Ftmp%2Fescape.txt",
    ] {
        let reply = put_file(&toold, &session, path, b"no".to_vec()).await;
        assert_eq!(
            reply.status,
            StatusCode::FORBIDDEN,
            "{path}: {}",
            reply.body
        );
        assert_eq!(reply.body["error"]["code"], "permission_denied", "{path}");
    }
    assert_eq!(std::fs::read_dir(outside.path()).unwrap().count(), 0);
    assert!(!workspace.parent().unwrap().join("escape.txt").exists());
    // Reads outside are refused alike.
    let (status, _, _) = get_bytes(
        &toold,
        &format!("/v1/sessions/{session}/files/%2Fetc%2Fpasswd"),
        &[],
    )
    .await;
    assert_eq!(status, StatusCode::FORBIDDEN);
}

#[tokio::test]
async fn each_transfer_is_one_audit_row_and_its_events() {
    let toold = Toold::start();
    let session = toold.session().await;
    assert_eq!(
        put_file(&toold, &session, "a.bin", vec![7; 4096])
            .await
            .status,
        StatusCode::OK
    );
    let (status, _, _) =
        get_bytes(&toold, &format!("/v1/sessions/{session}/files/a.bin"), &[]).await;
    assert_eq!(status, StatusCode::OK);
    let refused = toold
        .session_with(&json!({"permission_mode": "read_only"}))
        .await;
    put_file(&toold, &refused, "a.bin", vec![1]).await;

    let uploads = audit_rows(&toold, &session, "upload").await;
    assert_eq!(uploads.len(), 1, "{uploads:?}");
    assert_eq!(uploads[0]["input"]["path"], "a.bin");
    assert_eq!(uploads[0]["input"]["bytes"], 4096);
    assert_eq!(uploads[0]["input"]["entries"], 1);
    assert_eq!(uploads[0]["is_error"], false);
    assert_eq!(uploads[0]["principal"], "local");
    let downloads = audit_rows(&toold, &session, "download").await;
    assert_eq!(downloads.len(), 1);
    assert_eq!(downloads[0]["input"]["bytes"], 4096);
    let denied = audit_rows(&toold, &refused, "upload").await;
    assert_eq!(denied.len(), 1);
    assert_eq!(denied[0]["is_error"], true);
    assert_eq!(denied[0]["error_kind"], "permission_denied");

    let mut events = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    let mut seen = Vec::new();
    while seen.len() < 4 {
        let frame = events.next().await.expect("events go on");
        let text = frame.data.to_string();
        let transfer = text.contains("\"upload\"") || text.contains("\"download\"");
        if (frame.event == "tool:pre" || frame.event == "tool:post") && transfer {
            seen.push(frame.event.clone());
        }
    }
    assert_eq!(
        seen,
        ["tool:pre", "tool:post", "tool:pre", "tool:post"],
        "upload, then download"
    );
}

#[tokio::test]
async fn another_agents_session_is_not_there() {
    use crate::auth::{AGENT_A, AGENT_B, call, daemon};
    let toold = daemon();
    let created = call(
        &toold,
        AGENT_A,
        Method::POST,
        "/v1/sessions",
        Some(json!({})),
    )
    .await;
    let session = created.body["id"].as_str().unwrap().to_owned();
    let own = toold
        .request_as(
            Some(AGENT_A),
            Method::PUT,
            &format!("/v1/sessions/{session}/files/a.txt"),
        )
        .body("mine");
    assert_eq!(toold.send(own).await.status, StatusCode::OK);
    let paths = [
        (Method::PUT, format!("/v1/sessions/{session}/files/a.txt")),
        (Method::GET, format!("/v1/sessions/{session}/files/a.txt")),
        (Method::GET, format!("/v1/sessions/{session}/files/d/a.txt")),
        (Method::POST, format!("/v1/sessions/{session}/archive")),
        (Method::GET, format!("/v1/sessions/{session}/archive")),
    ];
    for (method, path) in paths {
        let request = toold
            .request_as(Some(AGENT_B), method.clone(), &path)
            .body("x");
        let reply = toold.send(request).await;
        assert_eq!(
            reply.status,
            StatusCode::NOT_FOUND,
            "{method} {path}: {}",
            reply.body
        );
        assert_eq!(
            reply.body["error"]["message"],
            format!("unknown session \"{session}\"")
        );
    }
    let (status, _, body) = {
        let request = toold.request_as(
            Some(AGENT_A),
            Method::GET,
            &format!("/v1/sessions/{session}/files/a.txt"),
        );
        let response = request.send().await.unwrap();
        (response.status(), (), response.bytes().await.unwrap())
    };
    assert_eq!(status, StatusCode::OK);
    assert_eq!(&body[..], b"mine");
}
