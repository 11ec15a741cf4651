//! A bridged server that offloads its own large outputs (another toold, `toold mcp` over
//! stdio, the real binary): the bridge reads the whole output back from it and toold
//! re-offloads it in its own store, so toold's own `read_result` (and `resources/read`)
//! serves it and the model's pointer names toold's id, not the inner server's.

use std::path::Path;

use serde_json::json;

use super::{call, eager, session, start};
use crate::support::mcp_servers::ServerEntry;

#[tokio::test]
async fn a_bridged_offload_is_read_back_through_toolds_own_read_result() {
    let inner = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(inner.path().join("ws")).unwrap();
    let data = inner.path().join("data");
    let ws = inner.path().join("ws");
    let entry = ServerEntry::stdio(
        "inner",
        Path::new(env!("CARGO_BIN_EXE_toold")),
        &[
            Path::new("mcp"),
            Path::new("--data-dir"),
            &data,
            Path::new("--working-directory"),
            &ws,
        ],
    )
    .set("trust_annotations", true);
    let toold = start("", &[eager(entry)]);
    let id = session(&toold, &["inner"]).await;

    let result = call(
        &toold,
        &id,
        "mcp__inner__bash",
        json!({"command": "seq 1 400000"}),
    )
    .await;
    assert_eq!(result["is_error"], false, "{result}");
    let expected: String = (1..=400_000).map(|n| format!("{n}\n")).collect();
    let offloaded = &result["offloaded"];
    let outer_id = offloaded["result_id"].as_str().unwrap().to_owned();
    assert_eq!(
        offloaded["total_chars"].as_u64(),
        Some(expected.chars().count() as u64),
        "{result}"
    );
    // The model's pointer names toold's own result.
    let preview = result["output"].as_str().unwrap();
    assert!(
        preview.contains(&format!("\"result_id\": \"{outer_id}\"")),
        "{preview}"
    );

    // toold's own read_result serves it, from its start and at its end.
    let read = |offset: usize| {
        call(
            &toold,
            &id,
            "read_result",
            json!({"result_id": outer_id, "offset": offset, "limit": 30000}),
        )
    };
    let first = read(0).await;
    assert_eq!(first["metadata"]["total_chars"], expected.len(), "{first}");
    assert_eq!(first["is_error"], false, "{first}");
    assert!(
        first["output"]
            .as_str()
            .unwrap()
            .contains(&expected[..30000]),
        "{first}"
    );
    let last = read(expected.len() - 14).await;
    assert_eq!(last["is_error"], false, "{last}");
    assert!(
        last["output"]
            .as_str()
            .unwrap()
            .contains("\n399999\n400000\n"),
        "{last}"
    );

    // The whole of it, through GET /v1/results/{id} (the same store).
    let mut output = String::new();
    while output.len() < expected.len() {
        let page = toold
            .get(&format!(
                "/v1/results/{outer_id}?offset={}&limit=1000000",
                output.len()
            ))
            .await;
        let text = page.body["content"].as_str().unwrap();
        assert!(!text.is_empty(), "{}", page.body);
        output.push_str(text);
    }
    assert_eq!(output, expected);
}
