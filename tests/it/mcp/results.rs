//! Offloaded outputs over MCP: a call whose output was offloaded answers with its preview and a
//! `resource_link`, and `resources/read` pages through the whole output by character range
//! (`toold://results/{result_id}{?offset,limit}`), in both eras.

use serde_json::{Value, json};

use super::McpClient;
use crate::http::harness::Toold;

/// `resources/read` of `uri`, stateless (the URI is also the `Mcp-Name`).
async fn read(mcp: &mut McpClient<'_>, uri: &str) -> super::McpReply {
    mcp.stateless("resources/read", json!({"uri": uri}), Some(uri))
        .await
}

#[tokio::test]
async fn an_offloaded_output_is_a_resource_link_read_back_in_pages() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    let called = mcp
        .call_tool("bash", json!({"command": "seq 1 400000"}))
        .await;
    let content = called.result()["content"].as_array().unwrap().clone();
    assert_eq!(content.len(), 2, "{}", called.text);
    let link = &content[1];
    assert_eq!(link["type"], "resource_link", "{link}");
    let uri = link["uri"].as_str().unwrap().to_owned();
    assert!(uri.starts_with("toold://results/"), "{uri}");
    let total = link["size"].as_u64().unwrap();

    let templates = mcp
        .stateless("resources/templates/list", json!({}), None)
        .await;
    assert_eq!(
        templates.result()["resourceTemplates"][0]["uriTemplate"],
        "toold://results/{result_id}{?offset,limit}"
    );

    let mut output = String::new();
    while (output.len() as u64) < total {
        let page_uri = format!("{uri}?offset={}&limit=1000000", output.len());
        let page = read(&mut mcp, &page_uri).await;
        let text = page.result()["contents"][0]["text"].as_str().unwrap();
        assert!(!text.is_empty(), "{}", page.text);
        output.push_str(text);
    }
    let expected: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    assert_eq!(output, expected);

    // The legacy era reads the same resource.
    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    let first = legacy
        .legacy("resources/read", json!({"uri": format!("{uri}?limit=6")}))
        .await;
    assert_eq!(first.result()["contents"][0]["text"], "1\n2\n3\n");

    let unknown = read(&mut mcp, "toold://results/res_unknown").await;
    assert!(unknown.message["error"].is_object(), "{}", unknown.text);
    let foreign = read(&mut mcp, "file:///etc/passwd").await;
    assert!(foreign.message["error"].is_object(), "{}", foreign.text);
    assert_eq!(foreign.message.get("result"), None::<&Value>);
}

#[tokio::test]
async fn a_page_asked_past_the_cap_is_clamped_and_says_so_within_one_sse_event() {
    let toold = Toold::start();
    let mut legacy = McpClient::new(&toold, "/mcp");
    legacy.initialize().await;
    // About 14.9 million characters.
    let called = legacy
        .call_tool("bash", json!({"command": "seq 1 2000000"}))
        .await;
    let link = &called.result()["content"][1];
    let uri = link["uri"].as_str().unwrap().to_owned();
    let total = link["size"].as_u64().unwrap();
    assert!(total > 5_000_000, "{total}");

    let page = legacy
        .legacy(
            "resources/read",
            json!({"uri": format!("{uri}?offset=0&limit=5000000")}),
        )
        .await;
    let text = page.result()["contents"][0]["text"].as_str().unwrap();
    let cap = 256 * 1024;
    assert_eq!(text.chars().count(), cap, "a page of the cap");
    let expected: String = (1..=2_000_000).map(|n| format!("{n}\n")).collect();
    assert!(expected.starts_with(text));
    let bounds = &page.result()["_meta"]["dev.toold/page"];
    assert_eq!(bounds["clamped"], true, "{bounds}");
    assert_eq!(bounds["limit_asked"], 5_000_000, "{bounds}");
    assert_eq!(bounds["limit"], cap, "{bounds}");
    assert_eq!(bounds["next_offset"], cap, "{bounds}");
    assert!(bounds["note"].as_str().unwrap().contains("cap"), "{bounds}");
    // The answer is one SSE event, under the Python SDK's 1 MiB event limit.
    let content_type = page.headers["content-type"].to_str().unwrap();
    assert!(
        content_type.starts_with("text/event-stream"),
        "{content_type}"
    );
    let largest = page
        .text
        .split("\n\n")
        .map(str::len)
        .max()
        .unwrap_or_default();
    assert!(largest < 1 << 20, "an SSE event of {largest} bytes");

    // A limit within the cap is served as asked, and says nothing of a clamp.
    let small = legacy
        .legacy("resources/read", json!({"uri": format!("{uri}?limit=6")}))
        .await;
    assert_eq!(small.result()["contents"][0]["text"], "1\n2\n3\n");
    let bounds = &small.result()["_meta"]["dev.toold/page"];
    assert_eq!(bounds.get("clamped"), None, "{bounds}");
}
