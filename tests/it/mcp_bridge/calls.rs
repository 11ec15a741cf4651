//! Calls through the bridge and what the model sees: server-filesystem's `read_text_file`
//! returns the file, its error result becomes an `execution` error, an image becomes a short
//! placeholder, and a long output (server-everything's `echo` of a large message) is
//! offloaded like any tool's and reads back in full from `/v1/results`.

use serde_json::json;

use super::{call, eager, ok_output, servers, session, start, workspace_file};

#[tokio::test]
async fn read_text_file_through_the_bridge_returns_the_file() {
    let Some(servers) = servers("read_text_file through the bridge") else {
        return;
    };
    let toold = start("", &[eager(servers.filesystem("fs", "."))]);
    let id = session(&toold, &["fs"]).await;
    let content = "first line\nsecond line, ünïcode\n";
    let path = workspace_file(&toold, &id, "notes.txt", content).await;
    let result = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": path}),
    )
    .await;
    assert_eq!(ok_output(&result), content);
    assert_eq!(result["name"], "mcp__fs__read_text_file");
}

#[tokio::test]
async fn a_server_s_error_result_is_an_execution_error() {
    let Some(servers) = servers("an MCP isError result") else {
        return;
    };
    let toold = start("", &[eager(servers.filesystem("fs", "."))]);
    let id = session(&toold, &["fs"]).await;
    let missing = toold.workspace(&id).await.join("missing.txt");
    let result = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": missing}),
    )
    .await;
    assert_eq!(result["is_error"], true, "{result}");
    assert_eq!(result["error_kind"], "execution", "{result}");
    assert!(
        result["output"].as_str().unwrap().contains("ENOENT"),
        "the server's own message reaches the model: {result}"
    );
}

#[tokio::test]
async fn an_image_becomes_a_placeholder_with_its_type_and_size() {
    let Some(servers) = servers("image content through the bridge") else {
        return;
    };
    let toold = start("", &[eager(servers.everything("every"))]);
    let id = session(&toold, &["every"]).await;
    let result = call(&toold, &id, "mcp__every__get-tiny-image", json!({})).await;
    let output = ok_output(&result);
    let placeholder = output
        .split("[image: image/png, ")
        .nth(1)
        .and_then(|rest| rest.split_once(" bytes]"))
        .map(|(size, _)| size.parse::<u64>());
    assert!(
        matches!(placeholder, Some(Ok(size)) if size > 0),
        "no `[image: image/png, N bytes]` in {output:?}"
    );
    assert!(output.len() < 1_000, "no base64 in the output: {output:?}");
}

#[tokio::test]
async fn a_long_output_is_offloaded_and_reads_back_in_full() {
    let Some(servers) = servers("a long bridged output offloaded") else {
        return;
    };
    let toold = start("", &[eager(servers.everything("every"))]);
    let id = session(&toold, &["every"]).await;
    let message: String = (0..60_000).map(|n| format!("{:09}\n", n)).collect();
    let result = call(&toold, &id, "mcp__every__echo", json!({"message": message})).await;
    assert_eq!(result["is_error"], false, "{result}");
    let offloaded = &result["offloaded"];
    let result_id = offloaded["result_id"]
        .as_str()
        .unwrap_or_else(|| panic!("600 kB of output is offloaded: {offloaded}"));
    let expected = format!("Echo: {message}");
    assert_eq!(offloaded["total_chars"], expected.chars().count());
    assert!(
        result["output"].as_str().unwrap().len() < expected.len() / 4,
        "the model sees a preview, not the whole output"
    );
    let mut content = String::new();
    while content.len() < expected.len() {
        let page = toold
            .get(&format!(
                "/v1/results/{result_id}?offset={}&limit=1000000",
                content.chars().count()
            ))
            .await;
        let part = page.body["content"].as_str().unwrap_or_default();
        assert!(!part.is_empty(), "{}", page.body);
        content.push_str(part);
    }
    assert_eq!(content, expected);
}

#[tokio::test]
async fn a_50_mb_result_is_contained_and_the_server_still_answers() {
    let Some(servers) = servers("a 50 MB bridged result") else {
        return;
    };
    // server-filesystem answers it in about 2 s (a 101 MB message: the text, and again as
    // structuredContent); the timeout is there to keep a failure short.
    let toold = start(
        "",
        &[eager(servers.filesystem("fs", ".")).set("tool_timeout_ms", 30_000)],
    );
    let id = session(&toold, &["fs"]).await;
    let line = format!("{}\n", "x".repeat(99));
    let path = workspace_file(&toold, &id, "big.txt", &line.repeat(500_000)).await;
    let result = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": path}),
    )
    .await;
    // The contract leaves the choice open: offloaded like any long output, or a clear error
    // for that call (not a timeout: the server did answer); either way the model never gets
    // 50 MB inline, and the daemon lives on.
    if result["is_error"] == true {
        assert_eq!(result["error_kind"], "execution", "{result}");
    } else {
        assert_eq!(result["offloaded"]["total_chars"], 50_000_000, "{result}");
    }
    assert!(result["output"].as_str().unwrap().len() < 1_000_000);
    let small = workspace_file(&toold, &id, "small.txt", "after").await;
    let next = call(
        &toold,
        &id,
        "mcp__fs__read_text_file",
        json!({"path": small}),
    )
    .await;
    assert_eq!(ok_output(&next), "after");
}
