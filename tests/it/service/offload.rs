//! A several-MB bash output spilled, streamed into SQLite, and read back byte-identical
//! through the store's pages and through `read_result`.

use super::harness::admin;
use serde_json::json;

use crate::service::harness::{Daemon, calls};
use crate::support::deadline::{OutputWithin, STEP};

/// About 6.9 MB, with a two-byte character in most lines (so characters and bytes differ).
const COMMAND: &str = "seq 1 900000 | sed 's/5/é/g'";

fn run_directly(command: &str) -> String {
    let output = std::process::Command::new("bash")
        .arg("-c")
        .arg(command)
        .output_within(STEP, "bash")
        .expect("bash runs");
    String::from_utf8(output.stdout).expect("the command writes UTF-8")
}

/// The text of a `read_result` answer: its header line and its footer (how to continue, or
/// the end) removed.
fn read_result_content(output: &str) -> &str {
    let (_, rest) = output.split_once('\n').expect("a header line");
    rest.rsplit_once("\n[").expect("a footer").0
}

#[tokio::test]
async fn a_multi_megabyte_output_reads_back_whole_through_pages_and_read_result() {
    let daemon = Daemon::start().await;
    let session = daemon
        .session(json!({"permission_mode": "danger_full_access"}))
        .await;
    let expected = run_directly(COMMAND);
    let started = std::time::Instant::now();
    let body = daemon
        .batch(
            &session.id,
            calls(json!([{"id": "big", "name": "bash", "input": {"command": COMMAND}}])),
        )
        .await;
    let result = &body["results"][0];
    let result_id = result["offloaded"]["result_id"]
        .as_str()
        .expect("offloaded");
    let total = result["offloaded"]["total_chars"].as_u64().unwrap();
    assert_eq!(total, expected.chars().count() as u64);
    let preview = result["output"].as_str().unwrap();
    assert!(preview.len() < 10_000, "the model sees a preview only");
    assert!(preview.starts_with("1\n2\n3\n4\né\n"), "{preview}");
    assert!(preview.contains("899999\n900000\n"), "the tail: {preview}");
    eprintln!(
        "{} bytes ({total} characters) run and stored in {:?}",
        expected.len(),
        started.elapsed()
    );

    let mut paged = String::with_capacity(expected.len());
    while (paged.chars().count() as u64) < total {
        let offset = paged.chars().count() as u64;
        let page = daemon
            .service
            .read_result(&admin(), result_id, offset, 1_000_000)
            .await
            .unwrap();
        assert_eq!(page.total_chars, total);
        paged.push_str(&page.content);
    }
    assert!(
        paged == expected,
        "pages of the store are the output, byte for byte"
    );

    let mut via_tool = String::with_capacity(expected.len());
    let mut offset = 0u64;
    let mut round = 0;
    while offset < total {
        let call = json!([{"id": format!("r{round}"), "name": "read_result",
            "input": {"result_id": result_id, "offset": offset}}]);
        round += 1;
        let body = daemon.batch(&session.id, calls(call)).await;
        let output = body["results"][0]["output"].as_str().expect("output");
        let shown = body["results"][0]["metadata"]["offset"].as_u64();
        assert_eq!(shown, Some(offset), "{output:.200}");
        let content = read_result_content(output);
        offset += content.chars().count() as u64;
        via_tool.push_str(content);
    }
    assert!(
        via_tool == expected,
        "read_result pages are the output, byte for byte"
    );
}
