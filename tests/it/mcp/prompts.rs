//! Skills as prompts: a daemon with a skill directory offers the `prompts` capability, lists
//! each skill with its description, and answers `prompts/get` with the skill's instructions
//! by calling the `skill` tool through the pipeline (the audit shows it). A daemon without
//! skills has no prompts.

use reqwest::StatusCode;
use serde_json::json;

use super::{McpClient, audit_rows};
use crate::http::harness::Toold;

/// A daemon whose `[skills]` directory holds `review` (with front matter) and `notes`.
fn daemon_with_skills() -> (Toold, tempfile::TempDir) {
    let skills = tempfile::tempdir().unwrap();
    let review = skills.path().join("review");
    std::fs::create_dir(&review).unwrap();
    std::fs::write(
        review.join("SKILL.md"),
        "---\nname: review\ndescription: Reviews a change carefully\n---\nRead the diff twice.\n",
    )
    .unwrap();
    let notes = skills.path().join("notes");
    std::fs::create_dir(&notes).unwrap();
    std::fs::write(notes.join("SKILL.md"), "Keep notes short.\n").unwrap();
    let toml = format!(
        "[skills]\ndirectories = [{:?}]\n",
        skills.path().to_str().unwrap()
    );
    (Toold::start_with_config(&toml), skills)
}

#[tokio::test]
async fn skills_are_listed_as_prompts_and_got_through_the_skill_tool() {
    let (toold, _skills) = daemon_with_skills();
    let mut client = McpClient::new(&toold, "/mcp");
    let init = client.initialize().await;
    assert!(
        init.result()["capabilities"]["prompts"].is_object(),
        "{}",
        init.text
    );

    let listed = client.legacy("prompts/list", json!({})).await;
    let prompts = listed.result()["prompts"].as_array().unwrap().clone();
    let names: Vec<&str> = prompts
        .iter()
        .map(|p| p["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, ["notes", "review"]);
    assert_eq!(prompts[1]["description"], "Reviews a change carefully");
    assert_eq!(prompts[1]["arguments"][0]["name"], "args");
    assert_eq!(prompts[1]["arguments"][0]["required"], false);

    let got = client
        .legacy(
            "prompts/get",
            json!({"name": "review", "arguments": {"args": "PR 7"}}),
        )
        .await;
    let result = got.result();
    assert_eq!(result["description"], "Reviews a change carefully");
    let message = &result["messages"][0];
    assert_eq!(message["role"], "user");
    let text = message["content"]["text"].as_str().unwrap();
    assert!(text.contains("Read the diff twice."), "{text}");
    assert!(text.contains("ARGUMENTS: PR 7"), "{text}");
    assert!(
        !text.contains("description:"),
        "front matter left out: {text}"
    );

    let unknown = client
        .legacy("prompts/get", json!({"name": "../etc"}))
        .await;
    assert_eq!(unknown.message["error"]["code"], -32602, "{}", unknown.text);

    // The prompt was a call of `skill` in the MCP session's own toold session.
    let sessions = toold.get("/v1/sessions").await;
    assert_eq!(sessions.status, StatusCode::OK);
    let session = sessions.body["sessions"][0]["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let rows = audit_rows(&toold, &session).await;
    let skill_rows: Vec<_> = rows.iter().filter(|row| row["tool"] == "skill").collect();
    assert_eq!(skill_rows.len(), 1, "{rows:?}");
    assert_eq!(skill_rows[0]["input"]["skill"], "review");
}

#[tokio::test]
async fn a_stateless_client_lists_and_gets_prompts_too() {
    let (toold, _skills) = daemon_with_skills();
    let mut client = McpClient::new(&toold, "/mcp");
    let listed = client.stateless("prompts/list", json!({}), None).await;
    assert_eq!(listed.result()["prompts"].as_array().unwrap().len(), 2);
    let got = client
        .stateless("prompts/get", json!({"name": "notes"}), Some("notes"))
        .await;
    let text = got.result()["messages"][0]["content"]["text"]
        .as_str()
        .unwrap();
    assert!(text.contains("Keep notes short."), "{text}");
}

#[tokio::test]
async fn without_skills_there_are_no_prompts() {
    let toold = Toold::start();
    let mut client = McpClient::new(&toold, "/mcp");
    let init = client.initialize().await;
    assert!(
        init.result()["capabilities"].get("prompts").is_none(),
        "{}",
        init.text
    );
    let listed = client.legacy("prompts/list", json!({})).await;
    assert_eq!(listed.message["error"]["code"], -32601, "{}", listed.text);
}
