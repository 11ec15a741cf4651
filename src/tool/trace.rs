//! Trace context as the core sees it: a W3C `traceparent`/`tracestate` pair as plain data
//! ([`TraceContext`]), the one the request brought in, and the one to hand onward from where
//! a call is now ([`current`]): to a hook (`TRACEPARENT` in its environment, a `traceparent`
//! header), a shell, `web_fetch`, a bridged MCP server.
//!
//! Two kinds of spans, neither naming an OpenTelemetry type here:
//! - **The hot path's own** ([`CoreSpan`]): a door's request, a batch, each call's
//!   `execute_tool`. They are opened and ended through the [`Spans`] port, which
//!   `telemetry::traces` installs when traces are exported (OpenTelemetry's SDK spans,
//!   directly); without it they are inert and nothing is formatted. A core span is current
//!   for the future it runs ([`CoreSpan::within`], a task-local), so the next core span and
//!   [`current`] find it; no `tracing` span is made, entered or closed for them.
//!   (Decision, 2026-11-26: as `tracing` spans through `tracing-opentelemetry` they cost a
//!   single-call batch ~40 000 instructions on the request path — the layer's bookkeeping on
//!   every poll's enter and exit, every field formatted, every record — which put the traced
//!   daemon 20-35 % over the untraced one; issue 20's budget is 15 %. `docs/performance.md`.)
//! - **The rarer children** (a hook, an approval wait, a sandboxed process): `tracing` spans
//!   with [`TARGET`] as their target, made through [`child`] so that, under no `tracing`
//!   parent, the core span they run in becomes their parent. When traces are not exported no
//!   layer is interested in [`TARGET`] and they are disabled callsites.
//!
//! When traces are exported, `telemetry::traces` also installs a [`Source`] that reads the
//! current `tracing` span's context, so what goes onward names the child the call is in (the
//! hook's, the process's), else the current core span. When they are not, the context a
//! request brought in ([`scope`], set by the door) is passed on unchanged, so a caller's
//! trace still reaches the hooks and tools even through a daemon that exports nothing.
//!
//! Spawned work loses the current spans and the incoming context unless it is wrapped in
//! [`carry`], which every task spawn on a call's path uses.

use std::borrow::Cow;
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
    /// The innermost [`CoreSpan`] the running future is within.
    static CURRENT: Option<TraceContext>;
}

/// Installs the reader of the current span's context, once per process (the `tracing`
/// subscriber it reads through is process-wide too); `false` if one was installed already.
pub fn install_source(source: Source) -> bool {
    SOURCE.set(source).is_ok()
}

/// The context to pass onward from here: the current child span's or core span's when
/// spans are exported, else the one the request brought in, else none.
pub fn current() -> Option<TraceContext> {
    if let Some(context) = SOURCE.get().and_then(|source| source()) {
        return Some(context);
    }
    current_core().or_else(incoming)
}

/// The context of the [`CoreSpan`] the running future is within.
fn current_core() -> Option<TraceContext> {
    CURRENT.try_with(Clone::clone).ok().flatten()
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

/// `future` with the current spans and incoming context attached, for a task spawned on a
/// call's path (so its spans stay in the request's tree).
pub fn carry<F: Future>(future: F) -> impl Future<Output = F::Output> {
    scope(
        incoming(),
        CURRENT.scope(current_core(), future.instrument(tracing::Span::current())),
    )
}

/// A span's value for one attribute.
#[derive(Clone, Debug, PartialEq)]
pub enum SpanValue {
    Text(Cow<'static, str>),
    Int(i64),
    Bool(bool),
}

impl From<&'static str> for SpanValue {
    fn from(text: &'static str) -> SpanValue {
        SpanValue::Text(Cow::Borrowed(text))
    }
}

impl From<String> for SpanValue {
    fn from(text: String) -> SpanValue {
        SpanValue::Text(Cow::Owned(text))
    }
}

impl From<i64> for SpanValue {
    fn from(value: i64) -> SpanValue {
        SpanValue::Int(value)
    }
}

impl From<bool> for SpanValue {
    fn from(value: bool) -> SpanValue {
        SpanValue::Bool(value)
    }
}

/// A core span's parent: a context, and whether it came from outside (a caller's
/// `traceparent`) rather than from a span of this process.
#[derive(Clone, Debug, PartialEq)]
pub struct SpanParent {
    pub context: TraceContext,
    pub remote: bool,
}

/// What a core span starts with.
pub struct SpanStart {
    pub name: Cow<'static, str>,
    /// A door's request (`SpanKind::Server`), else internal.
    pub server: bool,
    pub parent: Option<SpanParent>,
    pub attributes: Vec<(&'static str, SpanValue)>,
}

/// Opens core spans: the exporter's side of [`CoreSpan`].
pub trait Spans: Send + Sync {
    fn start(&self, start: SpanStart) -> Box<dyn OpenSpan>;
    /// Makes `parent` the parent of `span`, a child just made, unless the `tracing` span it
    /// was made in is exported (then that one is its parent already).
    fn adopt(&self, span: &tracing::Span, parent: &SpanParent);
}

/// One open span: attributes and status until it ends (when dropped, at the latest).
pub trait OpenSpan: Send + Sync {
    /// Its context (`None`: it is not valid, so nothing should name it as a parent).
    fn context(&self) -> Option<TraceContext>;
    fn set(&mut self, key: &'static str, value: SpanValue);
    /// Marks it failed, with `description` as the status's.
    fn fail(&mut self, description: String);
    fn end(&mut self);
}

static SPANS: OnceLock<Box<dyn Spans>> = OnceLock::new();

/// Whether core spans are exported (a [`Spans`] is installed).
pub fn exporting() -> bool {
    SPANS.get().is_some()
}

/// Installs the exporter's side of the core spans, once per process; `false` if one was
/// installed already.
pub fn install_spans(spans: Box<dyn Spans>) -> bool {
    SPANS.set(spans).is_ok()
}

/// The parent of a door's request span: the context `incoming` with it, else what
/// [`parent_here`] says.
pub fn request_parent(incoming: Option<&TraceContext>) -> Option<SpanParent> {
    match incoming {
        Some(context) => Some(SpanParent {
            context: context.clone(),
            remote: true,
        }),
        None => parent_here(),
    }
}

/// The parent a span made here gets: the core span the future is within, else the context
/// the request brought in.
fn parent_here() -> Option<SpanParent> {
    match current_core() {
        Some(context) => Some(SpanParent {
            context,
            remote: false,
        }),
        None => incoming().map(|context| SpanParent {
            context,
            remote: true,
        }),
    }
}

/// A span of the hot path (see the module header): inert when traces are off; ends when
/// dropped.
pub struct CoreSpan {
    open: Option<Box<dyn OpenSpan>>,
    context: Option<TraceContext>,
}

impl CoreSpan {
    /// Opens a span under `parent`; its name, parent and attributes are only built when
    /// traces are exported.
    pub fn start(
        name: impl FnOnce() -> Cow<'static, str>,
        server: bool,
        parent: impl FnOnce() -> Option<SpanParent>,
        attributes: impl FnOnce() -> Vec<(&'static str, SpanValue)>,
    ) -> CoreSpan {
        let Some(spans) = SPANS.get() else {
            return CoreSpan::inert();
        };
        let open = spans.start(SpanStart {
            name: name(),
            server,
            parent: parent(),
            attributes: attributes(),
        });
        CoreSpan {
            context: open.context(),
            open: Some(open),
        }
    }

    /// [`CoreSpan::start`] under the span the running future is within (else the incoming
    /// context).
    pub fn start_here(
        name: impl FnOnce() -> Cow<'static, str>,
        attributes: impl FnOnce() -> Vec<(&'static str, SpanValue)>,
    ) -> CoreSpan {
        CoreSpan::start(name, false, parent_here, attributes)
    }

    /// A span that records nothing.
    pub fn inert() -> CoreSpan {
        CoreSpan {
            open: None,
            context: None,
        }
    }

    /// Whether it is exported (attributes set on an inert span are dropped unbuilt).
    pub fn is_recording(&self) -> bool {
        self.open.is_some()
    }

    pub fn set(&mut self, key: &'static str, value: impl Into<SpanValue>) {
        if let Some(open) = &mut self.open {
            open.set(key, value.into());
        }
    }

    /// Marks it failed (its status's description is `description`).
    pub fn fail(&mut self, description: impl Into<String>) {
        if let Some(open) = &mut self.open {
            open.fail(description.into());
        }
    }

    /// `future` with this span current (the parent of the spans made in it, and what
    /// [`current`] names).
    pub fn within<F: Future>(&self, future: F) -> impl Future<Output = F::Output> {
        CURRENT.scope(self.context.clone().or_else(current_core), future)
    }
}

impl Drop for CoreSpan {
    fn drop(&mut self) {
        if let Some(open) = &mut self.open {
            open.end();
        }
    }
}

/// `span`, a child span (of [`TARGET`]) just made, under the core span the future is within
/// when it was not made in an exported `tracing` span (call it before anything enters
/// `span`).
pub fn child(span: tracing::Span) -> tracing::Span {
    if let Some(spans) = SPANS.get()
        && !span.is_disabled()
        && let Some(parent) = parent_here()
    {
        spans.adopt(&span, &parent);
    }
    span
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

    /// Without an exporter a core span builds nothing (its name and attributes are never
    /// made) and leaves what is current as it was.
    #[tokio::test]
    async fn core_spans_are_inert_without_an_exporter() {
        assert!(!exporting(), "no unit test installs an exporter");
        let context = TraceContext::parse(VALID, None);
        let seen = scope(context.clone(), async {
            let mut span = CoreSpan::start_here(
                || unreachable!("a name built for an inert span"),
                || unreachable!("attributes built for an inert span"),
            );
            assert!(!span.is_recording());
            span.set("key", "value");
            span.fail("failed");
            span.within(async { tokio::spawn(carry(async { current() })).await.unwrap() })
                .await
        })
        .await;
        assert_eq!(seen, context);
    }
}
