//! Offload phase: an executed call's output longer than the tool's `max_result_size_chars` is
//! stored whole, and the model gets a preview (head, or head and tail for shell output), the
//! total size and a `result_id` that `read_result` pages through. Hooks' additional context is
//! appended here, after the preview is made, so it is never cut off or hidden in the store.

use std::sync::Arc;

use super::{CallOutcome, CallRequest, Next, Phase, run_next};
use crate::dispatch::sinks::ResultStore;
use crate::tool::{OffloadedResult, PreviewStyle};

/// The largest preview the model gets, whatever the tool's limit.
const MAX_PREVIEW_CHARS: usize = 2000;

pub struct Offload {
    store: Arc<dyn ResultStore>,
}

impl Offload {
    pub fn new(store: Arc<dyn ResultStore>) -> Offload {
        Offload { store }
    }
}

impl Phase for Offload {
    async fn run<S: Next>(self: Arc<Self>, request: Box<CallRequest>, next: S) -> Box<CallOutcome> {
        let limit = match &request.tool {
            Ok(tool) => tool.spec().max_result_size_chars,
            Err(_) => None,
        };
        let style = match &request.tool {
            Ok(tool) => tool.spec().preview_style,
            Err(_) => PreviewStyle::Head,
        };
        let session_id = request.ctx.session_id.clone();
        let mut outcome = run_next(next, request).await;
        if let Some(limit) = limit.filter(|_| outcome.executed) {
            self.offload_if_needed(&session_id, &mut outcome, limit, style)
                .await;
        }
        for extra in std::mem::take(&mut outcome.additional_context) {
            outcome.result.output.push_str("\n\n");
            outcome.result.output.push_str(&extra);
        }
        outcome
    }
}

impl Offload {
    async fn offload_if_needed(
        &self,
        session_id: &str,
        outcome: &mut CallOutcome,
        limit: usize,
        style: PreviewStyle,
    ) {
        let output = &outcome.result.output;
        // Byte length bounds char count from above: most outputs skip the count entirely.
        if output.len() <= limit {
            return;
        }
        let total_chars = output.chars().count();
        if total_chars <= limit {
            return;
        }
        let preview_chars = limit.min(MAX_PREVIEW_CHARS);
        let stored = self
            .store
            .offload(session_id, &outcome.result.id, output)
            .await;
        outcome.result.output = match stored {
            Ok(stored) => {
                let text = preview(output, total_chars, preview_chars, style, &stored);
                outcome.result.offloaded = Some(stored);
                text
            }
            Err(err) => {
                // Losing the rest is better than flooding the model's context.
                let head: String = output.chars().take(preview_chars).collect();
                format!(
                    "{head}\n\n[output cut at {preview_chars} of {total_chars} characters; the full output could not be stored: {err}]"
                )
            }
        };
    }
}

/// The preview text: head (and tail) plus how to read the rest.
fn preview(
    output: &str,
    total_chars: usize,
    preview_chars: usize,
    style: PreviewStyle,
    stored: &OffloadedResult,
) -> String {
    let (head_chars, tail_chars) = match style {
        PreviewStyle::Head => (preview_chars, 0),
        PreviewStyle::HeadAndTail => (preview_chars / 2, preview_chars - preview_chars / 2),
    };
    let head: String = output.chars().take(head_chars).collect();
    let mut text = head;
    if tail_chars > 0 {
        let tail: String = output.chars().skip(total_chars - tail_chars).collect();
        let omitted = total_chars - head_chars - tail_chars;
        text.push_str(&format!("\n\n[… {omitted} characters omitted …]\n\n"));
        text.push_str(&tail);
    }
    text.push_str(&format!(
        "\n\n[output offloaded: {total_chars} characters in total, shown {head_chars} from the start{}; \
         read the rest with read_result {{\"result_id\": \"{id}\", \"offset\": {head_chars}, \"limit\": {MAX_PREVIEW_CHARS}}}]",
        if tail_chars > 0 { format!(" and {tail_chars} from the end") } else { String::new() },
        id = stored.result_id,
    ));
    text
}
