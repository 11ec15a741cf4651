//! Offload phase: an executed call's output longer than the tool's `max_result_size_chars` is
//! stored whole, and the model gets a preview (head, or head and tail for shell output), the
//! total size and a `result_id` that `read_result` pages through. Hooks' additional context is
//! appended here, after the preview is made, so it is never cut off or hidden in the store.
//!
//! A spilled output (the tool wrote it to a file because it was too large for memory) is
//! always offloaded: the store reads the result's lead and then the file as a stream, the
//! preview comes from the spill's in-memory head and tail, and the file is deleted after.

use std::sync::Arc;

use tokio::io::AsyncReadExt;

use super::{CallOutcome, CallRequest, Next, Phase, SpilledResult, run_next};
use crate::dispatch::ports::{ResultStore, SinkError};
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
        if let Some(spill) = outcome.spill.take() {
            let preview_chars = limit.unwrap_or(MAX_PREVIEW_CHARS).min(MAX_PREVIEW_CHARS);
            self.offload_spill(&session_id, &mut outcome, spill, preview_chars, style)
                .await;
        } else if let Some(limit) = limit.filter(|_| outcome.executed) {
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
                let ends = Ends {
                    head: output,
                    tail: output,
                };
                let text = preview(ends, total_chars, preview_chars, style, &stored);
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

impl Offload {
    /// Streams the lead and the spilled file into the store, then deletes the file.
    async fn offload_spill(
        &self,
        session_id: &str,
        outcome: &mut CallOutcome,
        spill: SpilledResult,
        preview_chars: usize,
        style: PreviewStyle,
    ) {
        let SpilledResult { lead, output } = spill;
        let stored = match tokio::fs::File::open(output.path()).await {
            Ok(file) => {
                let mut content = lead.as_bytes().chain(file);
                self.store
                    .offload_reader(session_id, &outcome.result.id, &mut content)
                    .await
            }
            Err(err) => Err(SinkError(format!(
                "the spilled output \"{}\" could not be opened: {err}",
                output.path().display()
            ))),
        };
        if let Err(err) = output.remove().await {
            tracing::warn!(path = %output.path().display(), error = %err, "a spilled output could not be deleted");
        }
        let head = format!("{lead}{}", output.head);
        outcome.result.output = match stored {
            Ok(stored) => {
                let total_chars = usize::try_from(stored.total_chars).unwrap_or(usize::MAX);
                let text = preview(
                    Ends {
                        head: &head,
                        tail: &output.tail,
                    },
                    total_chars,
                    preview_chars,
                    style,
                    &stored,
                );
                outcome.result.offloaded = Some(stored);
                text
            }
            Err(err) => {
                let head: String = head.chars().take(preview_chars).collect();
                format!(
                    "{head}\n\n[output cut at {preview_chars} characters of {} bytes; the full output could not be stored: {err}]",
                    output.bytes
                )
            }
        };
    }
}

/// The start and the end of an output (the same text when it was in memory whole).
struct Ends<'a> {
    head: &'a str,
    tail: &'a str,
}

/// The last `chars` characters of `text` (all of it if shorter).
fn last_chars(text: &str, chars: usize) -> &str {
    if chars == 0 {
        return "";
    }
    text.char_indices()
        .rev()
        .nth(chars - 1)
        .map_or(text, |(at, _)| &text[at..])
}

/// The preview text: head (and tail) plus how to read the rest.
fn preview(
    output: Ends<'_>,
    total_chars: usize,
    preview_chars: usize,
    style: PreviewStyle,
    stored: &OffloadedResult,
) -> String {
    let (head_chars, tail_chars) = match style {
        PreviewStyle::Head => (preview_chars, 0),
        PreviewStyle::HeadAndTail => (preview_chars / 2, preview_chars - preview_chars / 2),
    };
    let head: String = output.head.chars().take(head_chars).collect();
    let mut text = head;
    if tail_chars > 0 {
        text.push_str(&format!(
            "\n\n[… {} characters omitted …]\n\n",
            total_chars.saturating_sub(head_chars + tail_chars)
        ));
        text.push_str(last_chars(output.tail, tail_chars));
    }
    text.push_str(&format!(
        "\n\n[output offloaded: {total_chars} characters in total, shown {head_chars} from the start{}; \
         read the rest with read_result {{\"result_id\": \"{id}\", \"offset\": {head_chars}, \"limit\": {MAX_PREVIEW_CHARS}}}]",
        if tail_chars > 0 { format!(" and {tail_chars} from the end") } else { String::new() },
        id = stored.result_id,
    ));
    text
}
