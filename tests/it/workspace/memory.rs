//! 1 GiB in and out keeps the daemon's memory flat: an archive streamed up (tar, generated as
//! it is sent) and the same directory streamed down, while `/proc/<pid>/status` is sampled;
//! the resident set grows by less than 64 MiB. Also: forks under each sandbox the machine has
//! (bwrap, landlock) see their own view from `bash`.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use futures::StreamExt;
use reqwest::{Method, StatusCode};
use serde_json::json;

use crate::http::harness::Toold;

const GIB: u64 = 1 << 30;
const FILE: u64 = 64 << 20;

fn rss_kib(pid: u32) -> u64 {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).unwrap();
    let line = status.lines().find(|l| l.starts_with("VmRSS:")).unwrap();
    line.split_whitespace().nth(1).unwrap().parse().unwrap()
}

/// A tar of 16 files of 64 MiB, made chunk by chunk as the body is sent.
fn tar_stream() -> impl futures::Stream<Item = Result<Vec<u8>, std::io::Error>> {
    futures::stream::iter(0..GIB / FILE)
        .flat_map(|i| {
            let mut header = tar::Header::new_gnu();
            header.set_path(format!("big/f{i}")).unwrap();
            header.set_size(FILE);
            header.set_mode(0o644);
            header.set_cksum();
            let head = futures::stream::once(async move { Ok(header.as_bytes().to_vec()) });
            let body = futures::stream::iter(0..FILE / (1 << 20))
                .map(move |j| Ok(vec![(i + j) as u8; 1 << 20]));
            head.chain(body)
        })
        .chain(futures::stream::once(async { Ok(vec![0u8; 1024]) }))
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_gib_up_and_down_keeps_the_daemon_under_64_mib_of_growth() {
    let toold = Toold::start();
    let session = toold.session().await;
    let pid = toold.pid();
    let before = rss_kib(pid);
    let peak = Arc::new(AtomicU64::new(before));
    let sampling = {
        let peak = peak.clone();
        tokio::spawn(async move {
            loop {
                peak.fetch_max(rss_kib(pid), Ordering::Relaxed);
                tokio::time::sleep(Duration::from_millis(50)).await;
            }
        })
    };
    let upload = toold
        .request(Method::POST, &format!("/v1/sessions/{session}/archive"))
        .body(reqwest::Body::wrap_stream(tar_stream()));
    let reply = crate::support::deadline::within(
        Duration::from_secs(600),
        "a 1 GiB upload",
        toold.send(upload),
    )
    .await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    assert_eq!(reply.body["bytes"], GIB);
    let response = toold
        .request(
            Method::GET,
            &format!("/v1/sessions/{session}/archive?path=big"),
        )
        .send()
        .await
        .unwrap();
    assert_eq!(response.status(), StatusCode::OK);
    let mut body = response.bytes_stream();
    let mut received = 0u64;
    crate::support::deadline::within(Duration::from_secs(600), "a 1 GiB download", async {
        while let Some(chunk) = body.next().await {
            received += chunk.unwrap().len() as u64;
        }
    })
    .await;
    sampling.abort();
    assert!(received > GIB, "{received} bytes came down");
    let growth = peak.load(Ordering::Relaxed).saturating_sub(before);
    println!(
        "daemon RSS {before} KiB before, peak growth {growth} KiB over 1 GiB up and 1 GiB down"
    );
    assert!(growth < 64 * 1024, "RSS grew by {growth} KiB");
}

#[tokio::test]
async fn forks_see_their_own_view_under_each_sandbox() {
    for mode in ["bwrap", "landlock"] {
        let toold = Toold::start_with_config(&format!("[sandbox]\nmode = \"{mode}\"\n"));
        let session = toold.session().await;
        super::put_file(&toold, &session, "x.txt", b"base".to_vec()).await;
        let fork = toold
            .post(
                &format!("/v1/sessions/{session}/fork"),
                &json!({"count": 2}),
            )
            .await;
        assert_eq!(fork.status, StatusCode::CREATED, "{mode}: {}", fork.body);
        let ids: Vec<String> = fork.body["sessions"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s["id"].as_str().unwrap().to_owned())
            .collect();
        for (i, id) in ids.iter().enumerate() {
            let wrote = toold
                .call_one(
                    id,
                    "bash",
                    json!({"command": format!("cat x.txt; echo {i} > x.txt")}),
                )
                .await;
            assert_eq!(
                wrote["output"].as_str().unwrap().trim(),
                "base",
                "{mode}: {wrote}"
            );
            assert_eq!(wrote["metadata"]["sandbox"], mode, "{mode}: {wrote}");
        }
        for (i, id) in ids.iter().enumerate() {
            let seen = toold
                .call_one(id, "bash", json!({"command": "cat x.txt"}))
                .await;
            assert_eq!(
                seen["output"].as_str().unwrap().trim(),
                i.to_string(),
                "{mode}: {seen}"
            );
        }
        let parent = toold
            .call_one(&session, "bash", json!({"command": "cat x.txt"}))
            .await;
        assert_eq!(parent["output"].as_str().unwrap().trim(), "base", "{mode}");
    }
}
