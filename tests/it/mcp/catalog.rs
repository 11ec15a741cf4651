//! What the door lists besides tools, in a default build without skills: no prompts (the
//! methods are not found, the capability is not offered) and no listed resources (the conformance fixtures of the feature `mcp-conformance-fixtures` are not
//! there), completion of the references it knows, and a resource-not-found error that names
//! its URI (SEP-2164).

use serde_json::json;

use super::McpClient;
use crate::http::harness::Toold;

const RESULTS_TEMPLATE: &str = "toold://results/{result_id}{?offset,limit}";

#[tokio::test]
async fn a_default_build_lists_no_fixtures_and_completes_only_known_references() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");

    let tools = mcp.stateless("tools/list", json!({}), None).await;
    let names: Vec<&str> = tools.result()["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|tool| tool["name"].as_str().unwrap())
        .collect();
    assert!(names.contains(&"read_file"), "{names:?}");
    assert!(
        !names.iter().any(|name| name.starts_with("test_")),
        "{names:?}"
    );
    let prompts = mcp.stateless("prompts/list", json!({}), None).await;
    assert_eq!(prompts.message["error"]["code"], -32601, "{}", prompts.text);
    let resources = mcp.stateless("resources/list", json!({}), None).await;
    assert_eq!(
        resources.result()["resources"],
        json!([]),
        "{}",
        resources.text
    );

    let argument = json!({"name": "result_id", "value": "res_"});
    let known = mcp
        .stateless(
            "completion/complete",
            json!({"ref": {"type": "ref/resource", "uri": RESULTS_TEMPLATE}, "argument": argument}),
            None,
        )
        .await;
    assert_eq!(
        known.result()["completion"]["values"],
        json!([]),
        "{}",
        known.text
    );
    let unknown = mcp
        .stateless(
            "completion/complete",
            json!({"ref": {"type": "ref/prompt", "name": "test_prompt_with_arguments"},
                "argument": argument}),
            None,
        )
        .await;
    assert_eq!(unknown.message["error"]["code"], -32602, "{}", unknown.text);
    let missing = mcp
        .stateless(
            "prompts/get",
            json!({"name": "test_simple_prompt"}),
            Some("test_simple_prompt"),
        )
        .await;
    assert_eq!(missing.message["error"]["code"], -32601, "{}", missing.text);
}

#[tokio::test]
async fn an_unknown_resource_is_invalid_params_naming_its_uri() {
    let toold = Toold::start();
    let mut mcp = McpClient::new(&toold, "/mcp");
    for uri in ["toold://results/res_missing", "test://static-text"] {
        let read = mcp
            .stateless("resources/read", json!({"uri": uri}), Some(uri))
            .await;
        let error = &read.message["error"];
        assert_eq!(error["code"], -32602, "{}", read.text);
        assert_eq!(error["data"]["uri"], uri, "{}", read.text);
    }
}
