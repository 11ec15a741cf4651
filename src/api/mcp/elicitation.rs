//! Approvals as MCP elicitations (DESIGN §8, the 2025 era), and which channel a request's
//! client is asked on ([`ApprovalChannel`]): while a `tools/call` of a client
//! that declared the `elicitation` capability (form mode) at `initialize` waits for an
//! approval (an `ask` rule), the door sends that client an `elicitation/create` naming the
//! tool, a summary of its input and the rule's reason, with a one-field form (`decision`:
//! `allow` | `deny`), and resolves the approval with the answer through
//! [`ToolService::resolve_approval`] as approver `mcp`, like any door's approver: accepted
//! with `allow` allows, anything else (`deny`, decline, cancel) denies.
//!
//! Decisions:
//! - **The approval stays an approval.** It is recorded, published (`permission:ask`) and
//!   listed over HTTP as before; whichever resolution comes first wins (the store settles it
//!   once), so a person may still answer over HTTP while the elicitation is open, and an
//!   elicitation answered late is refused as already resolved (logged, not an error). An
//!   elicitation the client fails to answer (an error, a closed stream) leaves the approval
//!   pending for HTTP and its timeout.
//! - **The ask is found on the event bus**: the handler subscribes before the batch starts and
//!   takes the batch's `permission:ask`, which carries the approval id, so the service needs
//!   no door-specific hook.
//! - **The elicitation is sent from the request's own task.** rmcp routes a server request to
//!   the stream of the client request it was made while handling (a task-local that does not
//!   cross `tokio::spawn`); sent from elsewhere it would go to the standalone GET stream.
//! - The 2026-07-28 era forbids server-to-client requests (rmcp refuses them); there the same
//!   question goes out inside an input-required result (`input_required`), to a client whose
//!   request declares `elicitation` in its `_meta` capabilities ([`ApprovalChannel`]).

use std::sync::Arc;
use std::time::Duration;

use rmcp::RoleServer;
use rmcp::model::{
    ElicitRequestParams, ElicitResult, ElicitationAction, ElicitationSchema, EnumSchema,
    ProtocolVersion,
};
use rmcp::service::{ElicitationMode, Peer, RequestContext};
use serde_json::Value;
use tokio::sync::broadcast;

use super::handler::McpCaller;
use crate::event::{Event, EventType};
use crate::permission::Approver;
use crate::service::{ResolveApprovalRequest, ToolService};

/// The door approvals answered by elicitation are recorded under.
pub(super) const DOOR: &str = "mcp";
/// How much of a call's input the question shows.
const INPUT_SUMMARY_CHARS: usize = 300;

/// An approval the batch is waiting for.
#[derive(Clone, Debug, PartialEq)]
pub struct ApprovalAsk {
    pub approval_id: String,
    pub call_id: String,
    pub tool: String,
    pub input: Value,
    pub reason: String,
    /// How long the approval waits before it denies (zero when the event did not say).
    pub timeout: Duration,
}

/// How a request's client is asked about the approvals its call waits for.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ApprovalChannel {
    /// `elicitation/create` on the request's stream: a legacy session whose client declared
    /// form elicitation at `initialize`.
    Elicitation,
    /// An input-required result: a 2026-07-28 request declaring form elicitation in its
    /// `_meta` client capabilities (`input_required`).
    InputRequired,
    /// Not at all: the approval waits for HTTP (or gRPC) and its timeout.
    None,
}

impl ApprovalChannel {
    pub fn of(context: &RequestContext<RoleServer>) -> ApprovalChannel {
        let stateless = context
            .protocol_version()
            .is_some_and(|version| version >= ProtocolVersion::V_2026_07_28);
        if stateless {
            // Declared without `form` or `url`, elicitation means form (2025-06-18 clients).
            let form = context
                .client_capabilities()
                .and_then(|capabilities| capabilities.elicitation)
                .is_some_and(|elicitation| elicitation.form.is_some() || elicitation.url.is_none());
            return if form {
                ApprovalChannel::InputRequired
            } else {
                ApprovalChannel::None
            };
        }
        if elicits_form(&context.peer) {
            ApprovalChannel::Elicitation
        } else {
            ApprovalChannel::None
        }
    }
}

fn elicits_form(peer: &Peer<RoleServer>) -> bool {
    peer.supported_elicitation_modes()
        .contains(&ElicitationMode::Form)
}

/// The `permission:ask` events of one batch, subscribed before it starts.
pub struct ApprovalAsks {
    events: Option<broadcast::Receiver<Arc<Event>>>,
}

impl ApprovalAsks {
    /// Listens for asks when the client is asked at all; otherwise never yields one.
    pub fn subscribe(service: &ToolService, channel: ApprovalChannel) -> ApprovalAsks {
        ApprovalAsks {
            events: (channel != ApprovalChannel::None).then(|| service.events().subscribe()),
        }
    }

    /// The batch's next ask; pending forever without a subscription (or once the bus closed).
    pub async fn next(&mut self, batch_id: &str) -> ApprovalAsk {
        loop {
            let Some(events) = self.events.as_mut() else {
                return std::future::pending().await;
            };
            match events.recv().await {
                Ok(event) => {
                    if let Some(ask) = ask_of(&event, batch_id) {
                        return ask;
                    }
                }
                Err(broadcast::error::RecvError::Lagged(missed)) => {
                    tracing::warn!(
                        batch_id,
                        missed,
                        "an MCP call missed events; an ask may wait for HTTP"
                    );
                }
                Err(broadcast::error::RecvError::Closed) => self.events = None,
            }
        }
    }
}

fn ask_of(event: &Event, batch_id: &str) -> Option<ApprovalAsk> {
    if event.event_type != EventType::PermissionAsk || event.batch_id.as_deref() != Some(batch_id) {
        return None;
    }
    let data = event.data.value();
    Some(ApprovalAsk {
        approval_id: data["approval_id"].as_str()?.to_owned(),
        call_id: data["call_id"].as_str().unwrap_or_default().to_owned(),
        tool: data["tool"].as_str().unwrap_or_default().to_owned(),
        reason: data["reason"].as_str().unwrap_or_default().to_owned(),
        input: data["input"].clone(),
        timeout: Duration::from_millis(data["timeout_ms"].as_u64().unwrap_or_default()),
    })
}

/// Asks the client about `ask` and resolves the approval with its answer, as `caller`; its
/// token is recorded (as a fingerprint) like an HTTP approver's.
pub async fn elicit_approval(
    service: &ToolService,
    session: &str,
    peer: &Peer<RoleServer>,
    ask: ApprovalAsk,
    caller: &McpCaller,
) {
    let answer = match peer.create_elicitation(question(&ask)).await {
        Ok(answer) => answer,
        Err(err) => {
            tracing::debug!(approval = %ask.approval_id, %err, "an approval's elicitation went unanswered");
            return;
        }
    };
    let request = resolution(&answer);
    if let Err(err) = service
        .resolve_approval(
            &caller.principal,
            session,
            &ask.approval_id,
            request,
            Approver::new(DOOR, caller.token.as_deref()),
        )
        .await
    {
        // Resolved over HTTP (or timed out) first.
        tracing::debug!(approval = %ask.approval_id, %err, "an elicited answer came too late");
    }
}

/// The form: a message naming the tool, its input (cut short) and why it asks; a decision.
pub(super) fn question(ask: &ApprovalAsk) -> ElicitRequestParams {
    let mut input = ask.input.to_string();
    if input.chars().count() > INPUT_SUMMARY_CHARS {
        input = input.chars().take(INPUT_SUMMARY_CHARS).collect::<String>() + "…";
    }
    let message = format!(
        "Allow \"{}\" with input {input}? ({}; approval \"{}\")",
        ask.tool, ask.reason, ask.approval_id
    );
    let decision = EnumSchema::builder(vec!["allow".to_owned(), "deny".to_owned()]).build();
    let requested_schema = ElicitationSchema::builder()
        .required_enum_schema("decision", decision)
        .build_unchecked();
    ElicitRequestParams::FormElicitationParams {
        meta: None,
        message,
        requested_schema,
    }
}

/// Accepted with `decision: allow` allows; everything else denies.
pub(super) fn resolution(answer: &ElicitResult) -> ResolveApprovalRequest {
    let allowed = answer.action == ElicitationAction::Accept
        && answer
            .content
            .as_ref()
            .is_some_and(|content| content["decision"] == "allow");
    let how = match answer.action {
        ElicitationAction::Accept => "answered",
        ElicitationAction::Decline => "declined",
        ElicitationAction::Cancel => "cancelled",
        _ => "answered in an unknown way",
    };
    ResolveApprovalRequest {
        decision: if allowed { "allow" } else { "deny" }.to_owned(),
        reason: Some(format!("the MCP client {how} the elicitation")),
        remember: false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn answer(action: ElicitationAction, content: Option<Value>) -> ElicitResult {
        let mut result = ElicitResult::new(action);
        result.content = content;
        result
    }

    #[test]
    fn only_an_accepted_allow_allows() {
        let allow = Some(serde_json::json!({"decision": "allow"}));
        let deny = Some(serde_json::json!({"decision": "deny"}));
        let cases = [
            (answer(ElicitationAction::Accept, allow.clone()), "allow"),
            (answer(ElicitationAction::Accept, deny), "deny"),
            (answer(ElicitationAction::Accept, None), "deny"),
            (answer(ElicitationAction::Decline, allow.clone()), "deny"),
            (answer(ElicitationAction::Cancel, allow), "deny"),
        ];
        for (answer, decision) in cases {
            assert_eq!(resolution(&answer).decision, decision, "{answer:?}");
        }
    }

    #[test]
    fn the_question_names_the_tool_and_cuts_a_long_input() {
        let ask = ApprovalAsk {
            approval_id: "appr_1".into(),
            call_id: "c1".into(),
            tool: "bash".into(),
            input: serde_json::json!({"command": "x".repeat(1000)}),
            reason: "rule bash(echo:*) asks".into(),
            timeout: Duration::from_secs(60),
        };
        let ElicitRequestParams::FormElicitationParams {
            message,
            requested_schema,
            ..
        } = question(&ask)
        else {
            panic!("not a form");
        };
        assert!(message.contains("\"bash\""), "{message}");
        assert!(message.contains("appr_1"), "{message}");
        assert!(message.chars().count() < 400, "{message}");
        let schema = serde_json::to_value(&requested_schema).unwrap();
        assert_eq!(schema["required"], serde_json::json!(["decision"]));
        assert_eq!(
            schema["properties"]["decision"]["enum"],
            serde_json::json!(["allow", "deny"])
        );
    }
}
