//! Schema phase: the input must be JSON and match the tool's input schema. The error output
//! starts `InputValidationError: ` and names each failing field and why.

use std::sync::Arc;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::tool::{CallInput, ErrorKind};

/// How much of an unparseable input to quote back to the model.
const QUOTED_INPUT_CHARS: usize = 200;

pub struct SchemaValidation;

impl Phase for SchemaValidation {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        let Ok(tool) = &request.tool else {
            return run_next(next, request).await;
        };
        let problem = match &request.call.input {
            CallInput::Malformed { raw, reason } => {
                let quoted: String = raw.chars().take(QUOTED_INPUT_CHARS).collect();
                Some(format!(
                    "the arguments are not valid JSON ({reason}): {quoted}"
                ))
            }
            // A call admitted to a parallel group was found valid then (see the executor).
            CallInput::Json(_) if request.admitted_safe => None,
            CallInput::Json(input) => tool
                .validate_input(input)
                .err()
                .map(|problems| format!("invalid input for \"{}\": {problems}", tool.name())),
        };
        match problem {
            Some(message) => CallOutcome::refused(&request, ErrorKind::InputValidation, &message),
            None => run_next(next, request).await,
        }
    }
}
