//! Semantic phase: the tool's own `validate_input`, after the schema passed.

use std::sync::Arc;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};

pub struct SemanticValidation;

impl Phase for SemanticValidation {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        let Ok(tool) = request.tool.clone() else {
            return run_next(next, request).await;
        };
        match tool
            .tool
            .validate_input(request.input(), &request.ctx)
            .await
        {
            Ok(()) => run_next(next, request).await,
            Err(err) => CallOutcome::refused(&request, err.kind(), err.message()),
        }
    }
}
