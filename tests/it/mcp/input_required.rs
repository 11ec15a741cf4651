//! The same pipeline as `pipeline`, in the 2026-07-28 era: an approval a stateless client
//! declaring `elicitation` must give is asked in an input-required result (multi round-trip
//! requests: `inputRequests`, a `requestState` the client echoes on its retry with
//! `inputResponses`). The retry's answer resolves the approval (approver `mcp`) and gets the
//! call's one result; an altered, foreign or misapplied `requestState` is `-32602`; an answer
//! over HTTP wins if it comes first; a client without the capability waits as before.

use std::time::Duration;

use reqwest::StatusCode;
use serde_json::{Value, json};

use super::pipeline::{assert_unique_call_ids, error_kind, row, session, start, start_with};
use super::{McpClient, McpReply, audit_rows};
use crate::http::approvals::{pending, resolve};
use crate::http::harness::Toold;

fn elicits(client: McpClient<'_>) -> McpClient<'_> {
    client.capabilities(json!({"elicitation": {"form": {}}}))
}

/// The `requestState` of an input-required result asking about the approval, after checking
/// the question is the approval's form.
fn asked(reply: &McpReply, command: &str) -> String {
    let result = reply.result();
    assert_eq!(result["resultType"], "input_required", "{}", reply.text);
    let requests = result["inputRequests"].as_object().unwrap();
    assert_eq!(requests.len(), 1, "{}", reply.text);
    let question = &requests["approval"];
    assert_eq!(question["method"], "elicitation/create", "{question}");
    assert_eq!(question["params"]["mode"], "form", "{question}");
    let message = question["params"]["message"].as_str().unwrap();
    assert!(message.contains("\"bash\""), "{message}");
    assert!(message.contains(command), "{message}");
    assert_eq!(
        question["params"]["requestedSchema"]["properties"]["decision"]["enum"],
        json!(["allow", "deny"])
    );
    result["requestState"].as_str().unwrap().to_owned()
}

fn retry(arguments: &Value, state: &str, responses: Option<Value>) -> Value {
    let mut params = json!({"name": "bash", "arguments": arguments, "requestState": state});
    if let Some(responses) = responses {
        params["inputResponses"] = responses;
    }
    params
}

fn answer(action: &str, decision: &str) -> Value {
    json!({"approval": {"action": action, "content": {"decision": decision}}})
}

fn assert_invalid_params(reply: &McpReply) {
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text);
    assert_eq!(reply.message["error"]["code"], -32602, "{}", reply.text);
    let message = reply.message["error"]["message"].as_str().unwrap();
    assert!(message.contains("requestState"), "{message}");
}

/// The event types of `batch` on the session's stream (replayed from the start), up to its
/// `tool:post` or `tool:error`.
async fn batch_events(toold: &Toold, session: &str, batch: &str) -> Vec<Value> {
    let mut stream = toold
        .sse(&format!("/v1/sessions/{session}/events"), None, Some(0))
        .await;
    let mut events = Vec::new();
    loop {
        let frame = tokio::time::timeout(Duration::from_secs(10), stream.next())
            .await
            .unwrap_or_else(|_| panic!("events so far: {events:?}"))
            .expect("the event stream stays open");
        if frame.data["batch_id"] == batch {
            let end = frame.event == "tool:post" || frame.event == "tool:error";
            events.push(frame.data);
            if end {
                return events;
            }
        }
    }
}

fn types(events: &[Value]) -> Vec<&str> {
    events
        .iter()
        .map(|event| event["type"].as_str().unwrap())
        .collect()
}

#[tokio::test]
async fn an_approval_is_asked_by_an_input_required_result_and_the_retry_gets_the_one_result() {
    let (toold, _scripts) = start();
    let id = session(&toold, json!({"interactive": true})).await;
    let mut client = elicits(McpClient::new(&toold, &format!("/v1/sessions/{id}/mcp")));

    let echo = json!({"command": "echo asked by result"});
    let first = client.call_tool("bash", echo.clone()).await;
    let state = asked(&first, "echo asked by result");
    // The batch waits on its approval, pending over HTTP like any other.
    let approval = pending(&toold, &id).await;
    let approval_id = approval["id"].as_str().unwrap();
    let message = first.result()["inputRequests"]["approval"]["params"]["message"]
        .as_str()
        .unwrap();
    assert!(message.contains(approval_id), "{message}");

    let done = client
        .call_tool_with(
            "bash",
            retry(&echo, &state, Some(answer("accept", "allow"))),
        )
        .await;
    assert_eq!(done.result()["isError"], false, "{}", done.text);
    assert!(
        done.result()
            .get("resultType")
            .is_none_or(|t| t == "complete")
    );
    assert!(
        done.text_content().contains("asked by result"),
        "{}",
        done.text
    );
    let approvals = toold.get(&format!("/v1/sessions/{id}/approvals")).await;
    assert_eq!(approvals.body["approvals"], json!([]), "{}", approvals.body);

    // One call, run once, decided by the MCP client's answer.
    let rows = audit_rows(&toold, &id).await;
    assert_unique_call_ids(&rows);
    assert_eq!(rows.len(), 1, "{rows:?}");
    let call = row(&rows, 1, &echo);
    let decided_by = &call["decision"]["decided_by"];
    assert_eq!(call["decision"]["decision"], "allow", "{call}");
    assert_eq!(decided_by["by"], "approver", "{call}");
    assert_eq!(decided_by["approver"], "mcp", "{call}");
    assert_eq!(decided_by["approval_id"], approval_id, "{call}");
    assert_eq!(decided_by["asked_by"]["rule"], "bash(echo:*)", "{call}");

    let events = batch_events(&toold, &id, call["batch_id"].as_str().unwrap()).await;
    let seen = types(&events);
    for expected in [
        "tool:queued",
        "permission:ask",
        "permission:decision",
        "tool:pre",
        "tool:post",
    ] {
        assert!(seen.contains(&expected), "{expected}: {seen:?}");
    }
    let decision = events
        .iter()
        .find(|event| event["type"] == "permission:decision")
        .unwrap();
    assert_eq!(
        decision["data"]["decided_by"]["approver"], "mcp",
        "{decision}"
    );
}

#[tokio::test]
async fn a_declined_input_response_denies_and_a_retry_without_one_is_asked_again() {
    let (toold, _scripts) = start();
    let id = session(&toold, json!({"interactive": true})).await;
    let mut client = elicits(McpClient::new(&toold, &format!("/v1/sessions/{id}/mcp")));

    let echo = json!({"command": "echo never"});
    let state = asked(&client.call_tool("bash", echo.clone()).await, "echo never");
    // No answer in the retry: the same question, the same state.
    let again = client
        .call_tool_with("bash", retry(&echo, &state, None))
        .await;
    assert_eq!(asked(&again, "echo never"), state);
    // An answer that is not an elicitation result is refused; the approval stays pending.
    let garbled = client
        .call_tool_with(
            "bash",
            retry(&echo, &state, Some(json!({"approval": "allow"}))),
        )
        .await;
    assert_eq!(garbled.message["error"]["code"], -32602, "{}", garbled.text);
    pending(&toold, &id).await;

    let denied = client
        .call_tool_with(
            "bash",
            retry(&echo, &state, Some(answer("decline", "allow"))),
        )
        .await;
    assert_eq!(error_kind(&denied), "permission_denied");

    let rows = audit_rows(&toold, &id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let call = row(&rows, 1, &echo);
    assert_eq!(call["decision"]["decision"], "deny", "{call}");
    assert_eq!(call["decision"]["decided_by"]["approver"], "mcp", "{call}");
    assert_eq!(call["error_kind"], "permission_denied", "{call}");
}

#[tokio::test]
async fn an_altered_or_foreign_request_state_is_refused_and_an_http_answer_wins() {
    let (toold, _scripts) = start_with(&["--auth-token", "token-one", "--auth-token", "token-two"]);
    let id = session(&toold, json!({"interactive": true})).await;
    let path = format!("/v1/sessions/{id}/mcp");
    let mut client = elicits(McpClient::new(&toold, &path));

    let echo = json!({"command": "echo guarded"});
    let state = asked(
        &client.call_tool("bash", echo.clone()).await,
        "echo guarded",
    );
    let allow = || Some(answer("accept", "allow"));

    // One character changed in the middle of the state.
    let mut altered = state.clone().into_bytes();
    let middle = altered.len() / 2;
    altered[middle] = if altered[middle] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    let reply = client
        .call_tool_with("bash", retry(&echo, &altered, allow()))
        .await;
    assert_invalid_params(&reply);
    // Another caller presenting the state.
    let mut other = elicits(McpClient::new(&toold, &path).token("token-two"));
    let reply = other
        .call_tool_with("bash", retry(&echo, &state, allow()))
        .await;
    assert_invalid_params(&reply);
    // The state on a call with other arguments.
    let reply = client
        .call_tool_with(
            "bash",
            retry(&json!({"command": "echo other"}), &state, allow()),
        )
        .await;
    assert_invalid_params(&reply);
    // A state that is not one.
    let reply = client
        .call_tool_with("bash", retry(&echo, "rs1.bogus", allow()))
        .await;
    assert_invalid_params(&reply);

    // None of them answered the approval: a person denies it over HTTP, first.
    let approval = pending(&toold, &id).await;
    let resolved = toold
        .post(
            &format!(
                "/v1/sessions/{id}/approvals/{}",
                approval["id"].as_str().unwrap()
            ),
            &json!({"decision": "deny"}),
        )
        .await;
    assert_eq!(resolved.status, StatusCode::OK, "{}", resolved.body);
    // The retry's late "allow" changes nothing: it gets the batch's result.
    let done = client
        .call_tool_with("bash", retry(&echo, &state, allow()))
        .await;
    assert_eq!(error_kind(&done), "permission_denied");

    let rows = audit_rows(&toold, &id).await;
    assert_eq!(rows.len(), 1, "{rows:?}");
    let call = row(&rows, 1, &echo);
    assert_eq!(call["decision"]["decision"], "deny", "{call}");
    assert_eq!(call["decision"]["decided_by"]["approver"], "http", "{call}");
}

#[tokio::test]
async fn a_2026_client_without_elicitation_waits_for_an_approval_over_http() {
    let (toold, _scripts) = start();
    let id = session(&toold, json!({"interactive": true})).await;
    // Sampling, but not elicitation: nothing may be asked of it.
    let mut client = McpClient::new(&toold, &format!("/v1/sessions/{id}/mcp"))
        .capabilities(json!({"sampling": {}}));

    let echo = json!({"command": "echo waited"});
    let call = client.call_tool("bash", echo.clone());
    let approve = async {
        let approval = pending(&toold, &id).await;
        let approval = approval["id"].as_str().unwrap();
        let reply = resolve(&toold, &id, approval, json!({"decision": "allow"})).await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.body);
    };
    let (done, ()) = tokio::join!(call, approve);
    assert_eq!(done.result()["isError"], false, "{}", done.text);
    assert!(
        done.result().get("inputRequests").is_none(),
        "{}",
        done.text
    );
    assert!(done.text_content().contains("waited"), "{}", done.text);
    let rows = audit_rows(&toold, &id).await;
    let call = row(&rows, 1, &echo);
    assert_eq!(call["decision"]["decided_by"]["approver"], "http", "{call}");
}
