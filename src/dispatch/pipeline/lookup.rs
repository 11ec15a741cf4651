//! Lookup phase: refuses a call the executor already refused before it could start, or whose
//! name resolved to no tool in the batch's pool.

use std::sync::Arc;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::tool::ErrorKind;

pub struct Lookup;

impl Phase for Lookup {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        if let Some((kind, message)) = &request.refusal {
            return CallOutcome::refused(&request, *kind, message);
        }
        match &request.tool {
            Ok(_) => run_next(next, request).await,
            Err(unknown) => {
                let message = unknown.to_string();
                CallOutcome::refused(&request, ErrorKind::UnknownTool, &message)
            }
        }
    }
}
