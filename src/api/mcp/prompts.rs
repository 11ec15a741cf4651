//! Skills as MCP prompts (DESIGN §8): when the daemon has skill directories (`[skills]`) and a
//! session's pool offers the `skill` tool, `prompts/list` names each skill the tool would find
//! (name, its front matter's description, one optional argument `args`), and `prompts/get`
//! answers with what the tool answers: one user message holding the skill's instructions.
//!
//! Decisions:
//! - **Got through the pipeline.** `prompts/get` is a one-call batch of `skill`, so getting a
//!   prompt is validated, permission-checked, hooked, audited and published like any call
//!   (the audit shows who read which skill); a call that fails (a hook blocks it, a skill
//!   removed since it was listed) is a JSON-RPC error carrying the call's message, since a
//!   prompt result has no error flag.
//! - **Listed fresh.** Skills are listed from disk at each `prompts/list` (as the tool reads
//!   them at each call); an unknown name is `-32602`, as an unknown tool is. The list is
//!   short (a skill folder each), so it is one page.

use std::sync::Arc;

use rmcp::model::{
    ErrorData, GetPromptRequestParams, GetPromptResult, Prompt, PromptArgument, PromptMessage, Role,
};
use serde_json::json;

use crate::permission::Principal;
use crate::registry::calls::BatchRequest;
use crate::service::SkillSummary;
use crate::service::{SKILL_TOOL, ToolService};
use crate::tool::ToolCall;

/// The prompt argument passed to the skill as its `args`.
const ARGS: &str = "args";

/// The skills `session` can load, as prompts.
pub async fn list(
    service: &ToolService,
    caller: &Principal,
    session: &str,
) -> Result<Vec<Prompt>, ErrorData> {
    let skills = service
        .skills(caller, session)
        .await
        .map_err(super::handler::rpc_error)?;
    Ok(skills.iter().map(prompt).collect())
}

fn prompt(skill: &SkillSummary) -> Prompt {
    let description = (!skill.description.is_empty()).then(|| skill.description.clone());
    Prompt::new(
        skill.name.clone(),
        description,
        Some(vec![
            PromptArgument::new(ARGS)
                .with_description("Anything the skill should know, appended to its instructions")
                .with_required(false),
        ]),
    )
}

/// `prompts/get`: skill `request.name` loaded by the `skill` tool in `session`, as call
/// `call_id`.
pub async fn get(
    service: &Arc<ToolService>,
    caller: &Principal,
    session: &str,
    call_id: String,
    request: GetPromptRequestParams,
) -> Result<GetPromptResult, ErrorData> {
    let skills = service
        .skills(caller, session)
        .await
        .map_err(super::handler::rpc_error)?;
    let Some(skill) = skills.iter().find(|skill| skill.name == request.name) else {
        return Err(ErrorData::invalid_params(
            format!("unknown prompt \"{}\"", request.name),
            None,
        ));
    };
    let mut input = json!({ "skill": skill.name });
    if let Some(args) = request.arguments.as_ref().and_then(|a| a.get(ARGS)) {
        input["args"] = args.clone();
    }
    let call = ToolCall::new(call_id, SKILL_TOOL, input);
    let batch = BatchRequest::from_calls(vec![call], None)
        .map_err(|err| ErrorData::invalid_params(err.to_string(), None))?;
    let outcome = service
        .execute_batch(caller, session, batch)
        .await
        .map_err(super::handler::rpc_error)?;
    let Some(result) = outcome.results.first() else {
        return Err(ErrorData::internal_error(
            "the batch returned no result",
            None,
        ));
    };
    if result.is_error {
        return Err(ErrorData::invalid_params(result.output.clone(), None));
    }
    let mut answer = GetPromptResult::new(vec![PromptMessage::new_text(
        Role::User,
        result.output.clone(),
    )]);
    if !skill.description.is_empty() {
        answer = answer.with_description(skill.description.clone());
    }
    Ok(answer)
}
