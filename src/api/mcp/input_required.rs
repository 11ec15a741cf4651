//! Approvals as input-required results (DESIGN §8, the 2026-07-28 era; multi round-trip
//! requests, SEP-2322): when a `tools/call` whose request declares form elicitation in its
//! `_meta` client capabilities reaches an `ask`, the door answers it with an
//! `InputRequiredResult` holding one elicitation (`inputRequests.approval`: the same form the
//! 2025 era's `elicitation/create` asks, see `elicitation`) and a sealed `requestState` naming
//! the session, the batch, the call and the approval. The client's retry (the same tool and
//! arguments plus `inputResponses` and that `requestState`) resolves the approval with the
//! answer as approver `mcp` (accepted with `allow` allows, anything else denies) and is
//! answered with the batch's result.
//!
//! Decisions:
//! - **The batch keeps running; the call is not run twice.** A streamed batch runs in its own
//!   task (`service::streams`), so the first request returns while its batch waits on the
//!   approval like any other: recorded, published (`permission:ask`), listed over HTTP and
//!   answerable there, first answer wins. The retry collects the batch's result with
//!   [`ToolService::batch_results`] (awaited while it runs, read back while kept); it never
//!   starts a batch. A retry whose approval was already answered over HTTP (or timed out)
//!   just gets the result: its own answer is refused as late (logged, not an error).
//! - **What the state is bound to.** The state is sealed with HMAC-SHA256 (rmcp's
//!   `RequestStateCodec`) over associated data that is not stored in it: the session, the
//!   caller's token fingerprint (as an approver's), the method, the tool and a digest of its
//!   arguments (keys sorted). A state that was altered, forged, presented by another caller,
//!   in another session or on a call with other arguments fails to open: `-32602`. It also
//!   expires: the approval's timeout plus [`STATE_GRACE`], after which the batch's result is
//!   no longer what a retry should wait for (`-32602`, "call the tool again").
//! - **The key is per process** (random at first use), so a state outlives neither a restart
//!   (the batch it names is gone too) nor a move to another daemon of a fleet; either is
//!   refused as not opening. A fleet would need a shared key, and a retry routed to the
//!   session's owner: not built.
//! - **A retry without the answer is asked again** with the same state while the approval is
//!   pending (the spec: a server SHOULD ask again rather than fail); an answer that is not an
//!   elicitation result is `-32602`.
//! - **Another ask of the same call** (a pre-tool-use hook asking after the rule's approval)
//!   makes the retry answer a new input-required result for it, with a new state; the retry
//!   subscribes to the bus before it answers the first, and looks at the pending approvals
//!   for one published before it subscribed.
//! - **A client that never retries** leaves the approval to its timeout
//!   (`[permissions] approval_timeout_ms`, default 60 s), which denies the call as for any
//!   approval; until then the call holds nothing back (the session's call gate is entered
//!   only after the decision, `session::gate`), as for any pending approval. A person may
//!   still answer it over HTTP. The first request's answer does not cancel the batch (it is
//!   an answer, not a disconnect); a retry whose client goes away cancels it, as a cancelled
//!   call does.
//! - The key `approval` names the input request; the result type is rmcp's
//!   `input_required` (later drafts of the spec call it `incomplete`).

use std::sync::{Arc, OnceLock};
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    CallToolRequestParams, ElicitRequest, ElicitResult, ErrorData, InputRequest, InputRequests,
    InputRequiredResult, InputResponses, RequestStateCodec, RequestStateError, SealOptions,
};
use rmcp::service::RequestContext;
use serde::{Deserialize, Serialize};
use serde_json::Value;
use sha2::{Digest, Sha256};

use super::calls::MCP_CLIENT;
use super::elicitation::{ApprovalAsk, ApprovalAsks, ApprovalChannel, DOOR, question, resolution};
use super::handler::{McpCaller, rpc_error};
use crate::permission::Approver;
use crate::service::{PendingApproval, ResolveApprovalRequest, ToolService};
use crate::tool::ToolResult;

/// The key of the approval's elicitation in `inputRequests` and `inputResponses`.
pub const APPROVAL_INPUT: &str = "approval";

/// How long past the approval's own timeout a state still opens.
const STATE_GRACE: Duration = Duration::from_secs(10 * 60);

/// What a `requestState` names: the approval a call waits for, and where.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ApprovalState {
    pub session: String,
    pub batch: String,
    pub call: String,
    pub approval: String,
}

/// What a state is bound to (mixed into its seal, not stored in it): the session, the caller
/// and the call as its request names it.
pub struct StateBinding(Vec<u8>);

impl StateBinding {
    pub fn new(session: &str, caller: Option<&str>, tool: &str, arguments: &Value) -> StateBinding {
        let caller = Approver::new(DOOR, caller).token_id.unwrap_or_default();
        let digest = Sha256::digest(canonical(arguments).to_string().as_bytes());
        let digest: String = digest.iter().map(|b| format!("{b:02x}")).collect();
        StateBinding(
            format!("toold/approval\n{session}\n{caller}\ntools/call\n{tool}\n{digest}")
                .into_bytes(),
        )
    }
}

/// `value` with every object's keys sorted, so the same arguments digest alike whatever order
/// the client sent them in (serde_json keeps insertion order here).
fn canonical(value: &Value) -> Value {
    match value {
        Value::Object(map) => {
            let mut keys: Vec<&String> = map.keys().collect();
            keys.sort();
            Value::Object(
                keys.into_iter()
                    .map(|key| (key.clone(), canonical(&map[key])))
                    .collect(),
            )
        }
        Value::Array(items) => Value::Array(items.iter().map(canonical).collect()),
        other => other.clone(),
    }
}

/// The per-process key states are sealed with (shared with the conformance fixtures).
pub fn request_state_codec() -> Result<&'static RequestStateCodec, ErrorData> {
    static CODEC: OnceLock<Result<RequestStateCodec, String>> = OnceLock::new();
    let codec = CODEC.get_or_init(|| {
        // Four v7 UUIDs: 64 bytes holding 4 x 74 random bits (uuid's `fast-rng`).
        let key: Vec<u8> = (0..4)
            .flat_map(|_| uuid::Uuid::now_v7().into_bytes())
            .collect();
        RequestStateCodec::try_new(key).map_err(|err| err.to_string())
    });
    codec
        .as_ref()
        .map_err(|err| ErrorData::internal_error(format!("the requestState key: {err}"), None))
}

/// The input-required result asking about `ask`, its state sealed for `binding`.
pub fn ask(
    ask: &ApprovalAsk,
    state: &ApprovalState,
    binding: &StateBinding,
) -> Result<InputRequiredResult, ErrorData> {
    let options = SealOptions::new()
        .associated_data(&binding.0)
        .ttl(ask.timeout + STATE_GRACE);
    let sealed = request_state_codec()?
        .seal_json_with(state, &options)
        .map_err(|err| ErrorData::internal_error(format!("sealing a requestState: {err}"), None))?;
    Ok(ask_again(ask, sealed))
}

/// The input-required result asking about `ask` with an already sealed state.
fn ask_again(ask: &ApprovalAsk, sealed: String) -> InputRequiredResult {
    let elicitation = InputRequest::Elicitation(ElicitRequest::new(question(ask)));
    let requests = InputRequests::from([(APPROVAL_INPUT.to_owned(), elicitation)]);
    InputRequiredResult::new(Some(requests), Some(sealed))
}

/// Opens a retry's `requestState`: `-32602` unless this daemon sealed it for this binding
/// and it has not expired.
pub fn open(sealed: &str, binding: &StateBinding) -> Result<ApprovalState, ErrorData> {
    request_state_codec()?
        .open_json_with(sealed, &binding.0)
        .map_err(|err| {
            let why = match err {
                RequestStateError::Expired => {
                    "it has expired; call the tool again without it".to_owned()
                }
                other => format!(
                    "{other}: it was altered, or issued for another caller, session or call, or \
                     before the daemon restarted"
                ),
            };
            ErrorData::invalid_params(format!("requestState refused: {why}"), None)
        })
}

/// The answer to the approval in a retry's `inputResponses`: `None` when there is none.
pub fn answer(
    responses: Option<&InputResponses>,
) -> Result<Option<ResolveApprovalRequest>, ErrorData> {
    let Some(response) = responses.and_then(|r| r.get(APPROVAL_INPUT)) else {
        return Ok(None);
    };
    let result: ElicitResult = serde_json::from_value(response.clone()).map_err(|err| {
        ErrorData::invalid_params(
            format!("inputResponses[\"{APPROVAL_INPUT}\"] is not an elicitation result: {err}"),
            None,
        )
    })?;
    Ok(Some(resolution(&result)))
}

/// How a call asked about in rounds goes on.
pub enum Round {
    /// Its batch's result.
    Done(ToolResult),
    /// Another question (or the same one again).
    InputRequired(InputRequiredResult),
}

/// A retry of a call asked about by an input-required result; see the module header.
pub struct Retry<'a> {
    pub service: &'a Arc<ToolService>,
    pub session: &'a str,
    pub caller: &'a McpCaller,
    pub request: &'a CallToolRequestParams,
    pub context: &'a RequestContext<RoleServer>,
}

impl Retry<'_> {
    pub async fn run(self, sealed: &str) -> Result<Round, ErrorData> {
        let arguments = Value::Object(self.request.arguments.clone().unwrap_or_default());
        let token = self.caller.token.as_deref();
        let binding = StateBinding::new(self.session, token, &self.request.name, &arguments);
        let state = open(sealed, &binding)?;
        // Subscribed before the answer goes in, so an ask it leads to cannot be missed.
        let mut asks = ApprovalAsks::subscribe(self.service, ApprovalChannel::InputRequired);
        match answer(self.request.input_responses.as_ref())? {
            Some(resolution) => self.resolve(&state, resolution).await,
            None => {
                if let Some(pending) = self.pending(|a| a.id == state.approval).await? {
                    return Ok(Round::InputRequired(ask_again(
                        &pending_ask(pending),
                        sealed.to_owned(),
                    )));
                }
            }
        }
        // Another ask of this call published before the subscription.
        if let Some(pending) = self.pending(|a| a.call_id == state.call).await? {
            let next = pending_ask(pending);
            return self.ask_next(&state, &next, &binding);
        }
        self.wait(&state, &mut asks, &binding).await
    }

    async fn resolve(&self, state: &ApprovalState, resolution: ResolveApprovalRequest) {
        let approver = Approver::new(DOOR, self.caller.token.as_deref());
        let caller = &self.caller.principal;
        if let Err(err) = self
            .service
            .resolve_approval(caller, self.session, &state.approval, resolution, approver)
            .await
        {
            // Answered over HTTP, or timed out, first: the batch's result says how.
            tracing::debug!(approval = %state.approval, %err, "an input response came too late");
        }
    }

    /// The session's first pending approval that `wanted`.
    async fn pending(
        &self,
        wanted: impl Fn(&PendingApproval) -> bool,
    ) -> Result<Option<PendingApproval>, ErrorData> {
        let pending = self
            .service
            .pending_approvals(&self.caller.principal, self.session)
            .await
            .map_err(rpc_error)?;
        Ok(pending.into_iter().find(|approval| wanted(approval)))
    }

    fn ask_next(
        &self,
        state: &ApprovalState,
        next: &ApprovalAsk,
        binding: &StateBinding,
    ) -> Result<Round, ErrorData> {
        let state = ApprovalState {
            approval: next.approval_id.clone(),
            ..state.clone()
        };
        ask(next, &state, binding).map(Round::InputRequired)
    }

    /// The batch's result, or its next ask; a retry that goes away cancels the batch.
    async fn wait(
        &self,
        state: &ApprovalState,
        asks: &mut ApprovalAsks,
        binding: &StateBinding,
    ) -> Result<Round, ErrorData> {
        let caller = &self.caller.principal;
        let results = self
            .service
            .batch_results(caller, self.session, &state.batch);
        tokio::pin!(results);
        let mut cancelled = false;
        loop {
            tokio::select! {
                results = &mut results => {
                    let results = results.map_err(rpc_error)?;
                    return results.first().cloned().map(Round::Done).ok_or_else(|| {
                        ErrorData::internal_error("the batch returned no result", None)
                    });
                }
                next = asks.next(&state.batch) => return self.ask_next(state, &next, binding),
                () = self.context.ct.cancelled(), if !cancelled => {
                    cancelled = true;
                    if let Err(err) = self.service.cancel_batch(caller, self.session, &state.batch, MCP_CLIENT) {
                        tracing::debug!(%err, "an MCP cancellation found no running call");
                    }
                }
            }
        }
    }
}

/// A pending approval as the ask it was published as (its timeout no longer matters: the
/// state it is asked with was sealed when it was first asked, or gets the grace alone).
fn pending_ask(pending: PendingApproval) -> ApprovalAsk {
    ApprovalAsk {
        approval_id: pending.id,
        call_id: pending.call_id,
        tool: pending.tool,
        input: pending.input,
        reason: pending.reason,
        timeout: Duration::ZERO,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn ask_of_bash() -> ApprovalAsk {
        ApprovalAsk {
            approval_id: "appr_1".into(),
            call_id: "mcp-x-1".into(),
            tool: "bash".into(),
            input: json!({"command": "echo hi"}),
            reason: "rule bash(echo:*) asks".into(),
            timeout: Duration::from_secs(60),
        }
    }

    fn state() -> ApprovalState {
        ApprovalState {
            session: "s1".into(),
            batch: "b1".into(),
            call: "mcp-x-1".into(),
            approval: "appr_1".into(),
        }
    }

    fn sealed(binding: &StateBinding) -> String {
        let result = ask(&ask_of_bash(), &state(), binding).unwrap();
        result.request_state.unwrap()
    }

    #[test]
    fn a_state_opens_only_for_its_session_caller_and_call() {
        let arguments = json!({"command": "echo hi", "timeout": 5});
        let binding = StateBinding::new("s1", Some("token-a"), "bash", &arguments);
        let state_text = sealed(&binding);
        assert_eq!(open(&state_text, &binding).unwrap(), state());
        // The same arguments in another order are the same call.
        let reordered = json!({"timeout": 5, "command": "echo hi"});
        let same = StateBinding::new("s1", Some("token-a"), "bash", &reordered);
        assert_eq!(open(&state_text, &same).unwrap(), state());
        let others = [
            StateBinding::new("s2", Some("token-a"), "bash", &arguments),
            StateBinding::new("s1", Some("token-b"), "bash", &arguments),
            StateBinding::new("s1", None, "bash", &arguments),
            StateBinding::new("s1", Some("token-a"), "read_file", &arguments),
            StateBinding::new(
                "s1",
                Some("token-a"),
                "bash",
                &json!({"command": "echo ho"}),
            ),
        ];
        for other in &others {
            let err = open(&state_text, other).unwrap_err();
            assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
        }
        let mut tampered = state_text.clone().into_bytes();
        let last = tampered.len() - 1;
        tampered[last] = if tampered[last] == b'A' { b'B' } else { b'A' };
        let tampered = String::from_utf8(tampered).unwrap();
        assert!(open(&tampered, &binding).is_err());
        assert!(open("not a state", &binding).is_err());
    }

    #[test]
    fn the_result_asks_the_approval_form_under_its_key() {
        let binding = StateBinding::new("s1", None, "bash", &json!({}));
        let result = ask(&ask_of_bash(), &state(), &binding).unwrap();
        let wire = serde_json::to_value(&result).unwrap();
        assert_eq!(wire["resultType"], "input_required", "{wire}");
        let request = &wire["inputRequests"][APPROVAL_INPUT];
        assert_eq!(request["method"], "elicitation/create", "{wire}");
        let message = request["params"]["message"].as_str().unwrap();
        assert!(
            message.contains("appr_1") && message.contains("bash"),
            "{message}"
        );
        assert_eq!(
            request["params"]["requestedSchema"]["properties"]["decision"]["enum"],
            json!(["allow", "deny"])
        );
    }

    #[test]
    fn an_answer_is_read_from_the_approval_key_and_must_be_an_elicitation_result() {
        let responses = |value: Value| InputResponses::from([(APPROVAL_INPUT.to_owned(), value)]);
        let allow = responses(json!({"action": "accept", "content": {"decision": "allow"}}));
        assert_eq!(answer(Some(&allow)).unwrap().unwrap().decision, "allow");
        let declined = responses(json!({"action": "decline"}));
        assert_eq!(answer(Some(&declined)).unwrap().unwrap().decision, "deny");
        assert!(answer(None).unwrap().is_none());
        let elsewhere = InputResponses::from([("other".to_owned(), json!({"action": "accept"}))]);
        assert!(answer(Some(&elsewhere)).unwrap().is_none());
        let err = answer(Some(&responses(json!("allow")))).unwrap_err();
        assert_eq!(err.code, rmcp::model::ErrorCode::INVALID_PARAMS);
    }
}
