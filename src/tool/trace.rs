//! Trace context as the core sees it: a W3C `traceparent`/`tracestate` pair as plain data
//! ([`TraceContext`]), the one the request brought in, and the one to hand onward from where
//! a call is now ([`current`]): to a hook (`TRACEPARENT` in its environment, a `traceparent`
//! header), a shell, `web_fetch`, a bridged MCP server.
//!
//! The core's spans are `tracing` spans with [`TARGET`] as their target; nothing here names an
//! OpenTelemetry type. When traces are exported, `telemetry::traces` installs a [`Source`] that
//! reads the current span's OpenTelemetry context, so what goes onward names the span the call
//! is in (the hook's, the process's). When they are not, nothing is installed and the spans
//! are disabled callsites (no layer is interested in [`TARGET`]): then the context a request
//! brought in ([`scope`], set by the door) is passed on unchanged, so a caller's trace still
//! reaches the hooks and tools even through a daemon that exports nothing.
//!
//! Spawned work loses both the current span and the incoming context unless it is wrapped in
//! [`carry`], which every task spawn on a call's path uses.

use std::future::Future;
use std::sync::OnceLock;

use tracing::Instrument;

/// The `tracing` target of every span meant for export (the log filter never shows them).
pub const TARGET: &str = "toold::trace";

/// The environment variable a command (hook, shell) finds the context in.
pub const TRACEPARENT_ENV: &str = "TRACEPARENT";
/// Its companion, when the context carries vendor state.
pub const TRACESTATE_ENV: &str = "TRACESTATE";

/// The longest `tracestate` passed on (W3C: 512 characters is the limit a vendor may rely on).
const MAX_TRACESTATE: usize = 512;

/// A W3C trace context: which trace, which span is the parent, the flags, vendor state.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TraceContext {
    pub trace_id: [u8; 16],
    pub parent_id: [u8; 8],
    /// Bit 0 is `sampled`.
    pub flags: u8,
    pub tracestate: Option<String>,
}

impl TraceContext {
    /// Parses a `traceparent` (`00-<32 hex>-<16 hex>-<2 hex>`, lowercase) and its
    /// `tracestate`; `None` for anything malformed (the W3C rule: an invalid `traceparent` is
    /// ignored, and a new trace starts). A later version's longer value is read by its first
    /// four fields, as the specification asks; version `ff` is invalid.
    pub fn parse(traceparent: &str, tracestate: Option<&str>) -> Option<TraceContext> {
        let value = traceparent.trim();
        let mut fields = value.split('-');
        let version = fields.next()?;
        let trace_id = fields.next()?;
        let parent_id = fields.next()?;
        let flags = fields.next()?;
        let extra = fields.next();
        if version.len() != 2 || version == "ff" || (version == "00" && extra.is_some()) {
            return None;
        }
        let _: [u8; 1] = hex(version)?;
        let trace_id: [u8; 16] = hex(trace_id)?;
        let parent_id: [u8; 8] = hex(parent_id)?;
        let [flags] = hex::<1>(flags)?;
        if trace_id == [0; 16] || parent_id == [0; 8] {
            return None;
        }
        let tracestate = tracestate
            .map(str::trim)
            .filter(|state| {
                !state.is_empty()
                    && state.len() <= MAX_TRACESTATE
                    && state.bytes().all(|b| (0x20..0x7f).contains(&b))
            })
            .map(str::to_owned);
        Some(TraceContext {
            trace_id,
            parent_id,
            flags,
            tracestate,
        })
    }

    /// The `traceparent` value (version 00).
    pub fn traceparent(&self) -> String {
        format!(
            "00-{}-{}-{:02x}",
            to_hex(&self.trace_id),
            to_hex(&self.parent_id),
            self.flags
        )
    }

    /// The trace id, 32 lowercase hex digits (what the audit row keeps).
    pub fn trace_id_hex(&self) -> String {
        to_hex(&self.trace_id)
    }

    /// The variables a command gets: `TRACEPARENT`, and `TRACESTATE` when there is state.
    pub fn environment(&self) -> Vec<(&'static str, String)> {
        let mut env = vec![(TRACEPARENT_ENV, self.traceparent())];
        if let Some(state) = &self.tracestate {
            env.push((TRACESTATE_ENV, state.clone()));
        }
        env
    }
}

/// `N` bytes from exactly `2N` lowercase hex digits.
fn hex<const N: usize>(text: &str) -> Option<[u8; N]> {
    let digits = text.as_bytes();
    if digits.len() != 2 * N {
        return None;
    }
    let value = |d: u8| match d {
        b'0'..=b'9' => Some(d - b'0'),
        b'a'..=b'f' => Some(d - b'a' + 10),
        _ => None,
    };
    let mut out = [0u8; N];
    for (byte, pair) in out.iter_mut().zip(digits.chunks_exact(2)) {
        *byte = value(pair[0])? << 4 | value(pair[1])?;
    }
    Some(out)
}

fn to_hex(bytes: &[u8]) -> String {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    let mut out = String::with_capacity(bytes.len() * 2);
    for byte in bytes {
        out.push(char::from(DIGITS[usize::from(byte >> 4)]));
        out.push(char::from(DIGITS[usize::from(byte & 0x0f)]));
    }
    out
}

/// Reads the context of the span that is current now (installed by the exporter).
pub type Source = fn() -> Option<TraceContext>;

static SOURCE: OnceLock<Source> = OnceLock::new();

tokio::task_local! {
    static INCOMING: Option<TraceContext>;
}

/// Installs the reader of the current span's context, once per process (the `tracing`
/// subscriber it reads through is process-wide too); `false` if one was installed already.
pub fn install_source(source: Source) -> bool {
    SOURCE.set(source).is_ok()
}

/// The context to pass onward from here: the current span's when spans are exported, else
/// the one the request brought in, else none.
pub fn current() -> Option<TraceContext> {
    if let Some(context) = SOURCE.get().and_then(|source| source()) {
        return Some(context);
    }
    incoming()
}

/// The context the request brought in (see [`scope`]).
pub fn incoming() -> Option<TraceContext> {
    INCOMING.try_with(Clone::clone).ok().flatten()
}

/// Runs `future` with `incoming` as the context the request brought in.
pub fn scope<F: Future>(
    incoming: Option<TraceContext>,
    future: F,
) -> impl Future<Output = F::Output> {
    INCOMING.scope(incoming, future)
}

/// `future` with the current span and incoming context attached, for a task spawned on a
/// call's path (so its spans stay in the request's tree).
pub fn carry<F: Future>(future: F) -> impl Future<Output = F::Output> {
    scope(incoming(), future.instrument(tracing::Span::current()))
}

/// `text` cut to at most `limit` bytes (on a character boundary), for span attributes that
/// carry content (`[telemetry] capture_content`); the cut is marked with `…`.
pub fn truncated(text: &str, limit: usize) -> String {
    if text.len() <= limit {
        return text.to_owned();
    }
    let mut end = limit;
    while !text.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}…", &text[..end])
}

#[cfg(test)]
mod tests {
    use super::*;

    const VALID: &str = "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01";

    #[test]
    fn a_valid_traceparent_round_trips() {
        let context = TraceContext::parse(VALID, Some("congo=t61rcWkgMzE")).unwrap();
        assert_eq!(context.traceparent(), VALID);
        assert_eq!(context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
        assert_eq!(context.flags, 1);
        assert_eq!(
            context.environment(),
            [
                ("TRACEPARENT", VALID.to_owned()),
                ("TRACESTATE", "congo=t61rcWkgMzE".to_owned())
            ]
        );
    }

    #[test]
    fn malformed_traceparents_are_ignored() {
        for bad in [
            "",
            "garbage",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7",
            "00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01",
            "00-00000000000000000000000000000000-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01",
            "ff-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01-extra",
            "00-4bf92f3577b34da6a3ce929d0e0e473-00f067aa0ba902b7-01",
            "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-1",
            "0x-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
        ] {
            assert_eq!(TraceContext::parse(bad, None), None, "{bad:?}");
        }
    }

    #[test]
    fn a_later_version_is_read_by_its_first_fields() {
        let later = format!("{}-more", VALID.replacen("00", "01", 1));
        let context = TraceContext::parse(&later, None).unwrap();
        assert_eq!(context.trace_id_hex(), "4bf92f3577b34da6a3ce929d0e0e4736");
    }

    #[test]
    fn oversized_or_binary_tracestate_is_dropped() {
        let long = "a=".to_owned() + &"b".repeat(MAX_TRACESTATE);
        assert_eq!(
            TraceContext::parse(VALID, Some(&long)).unwrap().tracestate,
            None
        );
        assert_eq!(
            TraceContext::parse(VALID, Some("a=\u{7}"))
                .unwrap()
                .tracestate,
            None
        );
    }

    #[test]
    fn truncation_keeps_whole_characters() {
        assert_eq!(truncated("héllo", 2), "h…");
        assert_eq!(truncated("short", 10), "short");
    }

    #[tokio::test]
    async fn the_incoming_context_follows_carried_tasks() {
        let context = TraceContext::parse(VALID, None);
        let seen = scope(context.clone(), async {
            tokio::spawn(carry(async { current() })).await.unwrap()
        })
        .await;
        assert_eq!(seen, context);
        assert_eq!(current(), None);
    }
}
