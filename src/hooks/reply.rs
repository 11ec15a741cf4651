//! What a hook run leaves behind before anyone interprets it ([`HookReply`]), and the cap on
//! how much a hook may say ([`MAX_HOOK_OUTPUT_BYTES`]).
//!
//! A file of its own so that the transports ([`super::command`], [`super::url_hook`]), which
//! produce replies, and [`super::runner`], which reads them, each import it and not each other.

/// stdout and stderr (or an HTTP hook's body) are each read up to this; more is a hook failure.
pub const MAX_HOOK_OUTPUT_BYTES: usize = 1024 * 1024;

/// How a hook run ended, before interpretation.
#[derive(Debug)]
pub(crate) enum HookReply {
    /// Exit 0 or HTTP 2xx, with stdout or the body.
    Answered(Vec<u8>),
    /// Exit 2, with the reason (stderr).
    Blocked(String),
    /// Anything else, with what went wrong.
    Failed(String),
}
