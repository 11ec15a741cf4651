//! OpenTelemetry traces (DESIGN §9): the `[telemetry]` settings (the standard `OTEL_*`
//! variables land there through `config`), the process's `tracing` subscriber (logs, and the
//! OTLP exporter when an endpoint is set), and the bridge between the core's plain
//! [`TraceContext`] and OpenTelemetry's.
//!
//! Decisions:
//! - **Off without an endpoint, at no cost**: no exporter, no layer. The core's spans (target
//!   [`trace::TARGET`]) are then disabled callsites, since the log layer's filter never
//!   enables that target either; a disabled `info_span!` is a cached-interest check. The
//!   subscriber is then the log layer alone, never with an absent (`None`) span layer: to
//!   `tracing-subscriber` an absent layer is one that is interested in every callsite, so
//!   beside a filtered log layer it made every `toold::trace` span live in the registry
//!   (created, entered on every poll, closed: ~10 000 instructions a single-call batch, the
//!   2026-11-26 regression in `docs/performance.md`); the test `off_is_free` below shows it.
//! - **Endpoints as the specification reads them**: `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT` is
//!   used verbatim; `OTEL_EXPORTER_OTLP_ENDPOINT` is a base URL, to which HTTP appends
//!   `/v1/traces` (gRPC uses it as is). The protocol defaults to `http/protobuf`, the
//!   specification's default. TLS to the collector is not built in (plain `http://` only).
//! - **The sampler** is `OTEL_TRACES_SAMPLER` (`always_on`, `always_off`, `traceidratio`,
//!   `parentbased_always_on` the default, `parentbased_always_off`,
//!   `parentbased_traceidratio`) with `OTEL_TRACES_SAMPLER_ARG` as the ratio.
//! - **toold's own exporter** ([`super::otlp`]) encodes and sends the batches the SDK's batch
//!   processor hands it; it reads `OTEL_EXPORTER_OTLP_[TRACES_]HEADERS` and `…_TIMEOUT`, the
//!   SDK reads `OTEL_BSP_*`; everything else comes from here.
//! - **Two paths into the SDK.** The hot path's spans (a door's request, a batch, each
//!   `execute_tool`) are the core's `CoreSpan`s, opened and ended here as SDK spans directly
//!   ([`SdkSpans`], installed as the core's `Spans` port); the rarer children (a hook, the
//!   approval wait, the sandboxed process) are `tracing` spans of [`trace::TARGET`] through
//!   `tracing-opentelemetry`, adopted by the core span they run in (`trace::child`). The
//!   layer is built without context activation, thread, location and target attributes and
//!   inactivity tracking: nothing reads OpenTelemetry's thread-local context, and each of
//!   those cost work on every enter and exit. Why the hot path left `tracing`: the header of
//!   `tool::trace`.
//! - **Batched export** on the SDK's own thread; [`TracesGuard::shutdown`] flushes it, called
//!   when the daemon has drained (and when `toold mcp` ends).
//! - **rmcp's `info` lines are off** unless the log filter names `rmcp` (then it decides):
//!   rmcp logs every MCP session's start and end, and the stateless door serves each request
//!   as a session of its own, so at `info` every MCP call wrote three log lines (~58 000
//!   instructions and three `write(2)`s; `docs/performance.md`, issue 17).
//! - **Content stays out of spans** unless `capture_content` (then a call's input and output
//!   become `gen_ai.tool.call.arguments`/`gen_ai.tool.call.result`, cut to
//!   `content_limit_bytes`).

use std::str::FromStr;

use opentelemetry::KeyValue;
use opentelemetry::trace::{
    Span as _, SpanContext, SpanId, SpanKind, Status, TraceContextExt, TraceFlags, TraceId,
    TraceState, Tracer as _, TracerProvider as _,
};
use opentelemetry_sdk::Resource;
use opentelemetry_sdk::trace::{Sampler, SdkTracer, SdkTracerProvider};
use serde::{Deserialize, Serialize};
use tracing::Dispatch;
use tracing_opentelemetry::OpenTelemetrySpanExt;
use tracing_subscriber::Layer;
use tracing_subscriber::Registry;
use tracing_subscriber::filter::{LevelFilter, Targets};
use tracing_subscriber::layer::SubscriberExt;
use tracing_subscriber::util::SubscriberInitExt;

use super::otlp;
use crate::tool::trace::{self, TraceContext};

/// The OTLP wire format (`OTEL_EXPORTER_OTLP_PROTOCOL`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub enum OtlpProtocol {
    #[serde(rename = "grpc")]
    Grpc,
    #[default]
    #[serde(rename = "http/protobuf")]
    HttpProtobuf,
}

/// `[telemetry]`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TelemetrySettings {
    /// `OTEL_EXPORTER_OTLP_ENDPOINT`: the collector's base URL; unset or empty: no traces.
    pub otlp_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_TRACES_ENDPOINT`: the full traces URL, before `otlp_endpoint`.
    pub otlp_traces_endpoint: Option<String>,
    /// `OTEL_EXPORTER_OTLP_PROTOCOL`.
    pub otlp_protocol: OtlpProtocol,
    /// `OTEL_SERVICE_NAME`.
    pub service_name: String,
    /// `OTEL_TRACES_SAMPLER`.
    pub traces_sampler: String,
    /// `OTEL_TRACES_SAMPLER_ARG`: the ratio of the `*traceidratio` samplers.
    pub traces_sampler_arg: Option<String>,
    /// Whether spans carry a call's input and output.
    pub capture_content: bool,
    /// How much of each (bytes) when they do.
    pub content_limit_bytes: usize,
    /// The exporter's standard variables that are set ([`otlp::EXPORT_VARIABLES`]: headers,
    /// timeout), as config read them from the environment; not a key of the file.
    #[serde(skip)]
    pub export_variables: Vec<(String, String)>,
}

impl Default for TelemetrySettings {
    fn default() -> Self {
        TelemetrySettings {
            otlp_endpoint: None,
            otlp_traces_endpoint: None,
            otlp_protocol: OtlpProtocol::default(),
            service_name: "toold".to_owned(),
            traces_sampler: "parentbased_always_on".to_owned(),
            traces_sampler_arg: None,
            capture_content: false,
            content_limit_bytes: 1024,
            export_variables: Vec::new(),
        }
    }
}

/// Why the traces could not be set up.
#[derive(Debug, thiserror::Error)]
pub enum TracesError {
    #[error(
        "unknown OTEL_TRACES_SAMPLER {0:?}; expected always_on, always_off, traceidratio, parentbased_always_on, parentbased_always_off or parentbased_traceidratio"
    )]
    Sampler(String),
    #[error("OTEL_TRACES_SAMPLER_ARG {0:?} is not a ratio between 0 and 1")]
    SamplerArg(String),
    #[error("invalid log filter {filter:?}: {problem}")]
    LogFilter { filter: String, problem: String },
    #[error("the OTLP exporter for {endpoint} could not be built: {problem}")]
    Exporter { endpoint: String, problem: String },
    #[error("a tracing subscriber was already installed: {0}")]
    Subscriber(String),
}

impl TelemetrySettings {
    /// Where spans go, `None` when tracing is off.
    pub fn traces_endpoint(&self) -> Option<String> {
        let set = |value: &Option<String>| {
            value
                .as_deref()
                .map(str::trim)
                .filter(|v| !v.is_empty())
                .map(str::to_owned)
        };
        if let Some(endpoint) = set(&self.otlp_traces_endpoint) {
            return Some(endpoint);
        }
        let base = set(&self.otlp_endpoint)?;
        Some(match self.otlp_protocol {
            OtlpProtocol::Grpc => base,
            OtlpProtocol::HttpProtobuf => format!("{}/v1/traces", base.trim_end_matches('/')),
        })
    }

    /// The sampler the settings name (checked by `config` at load).
    pub fn sampler(&self) -> Result<Sampler, TracesError> {
        let ratio = || match self.traces_sampler_arg.as_deref().map(str::trim) {
            None | Some("") => Ok(1.0),
            Some(arg) => arg
                .parse::<f64>()
                .ok()
                .filter(|r| (0.0..=1.0).contains(r))
                .ok_or_else(|| TracesError::SamplerArg(arg.to_owned())),
        };
        let name = self.traces_sampler.trim().to_ascii_lowercase();
        Ok(match name.as_str() {
            "always_on" => Sampler::AlwaysOn,
            "always_off" => Sampler::AlwaysOff,
            "traceidratio" => Sampler::TraceIdRatioBased(ratio()?),
            "parentbased_always_on" => Sampler::ParentBased(Box::new(Sampler::AlwaysOn)),
            "parentbased_always_off" => Sampler::ParentBased(Box::new(Sampler::AlwaysOff)),
            "parentbased_traceidratio" => {
                Sampler::ParentBased(Box::new(Sampler::TraceIdRatioBased(ratio()?)))
            }
            _ => return Err(TracesError::Sampler(self.traces_sampler.clone())),
        })
    }

    /// How much of a call's content a span carries: `None` unless `capture_content`.
    pub fn span_content_limit(&self) -> Option<usize> {
        self.capture_content.then_some(self.content_limit_bytes)
    }
}

/// The exporter, kept to be flushed at the end.
#[must_use = "dropping the guard loses the spans not yet exported"]
pub struct TracesGuard {
    provider: Option<SdkTracerProvider>,
}

impl TracesGuard {
    /// Whether spans are exported.
    pub fn is_exporting(&self) -> bool {
        self.provider.is_some()
    }

    /// Exports what is pending and stops the exporter. Blocks: call it outside the runtime's
    /// tasks (a multi-threaded runtime must still be alive, for the gRPC client).
    pub fn shutdown(mut self) {
        if let Some(provider) = self.provider.take() {
            if let Err(err) = provider.force_flush() {
                tracing::warn!(error = %err, "spans not flushed");
            }
            if let Err(err) = provider.shutdown() {
                tracing::warn!(error = %err, "trace exporter not shut down cleanly");
            }
        }
    }
}

/// Installs the process's subscriber: logs on stderr filtered by `log_filter`, and, when an
/// endpoint is set, the OTLP exporter for the spans of [`trace::TARGET`]. Must run inside
/// the Tokio runtime (the gRPC client lives on it).
pub fn init(log_filter: &str, settings: &TelemetrySettings) -> Result<TracesGuard, TracesError> {
    let logs = log_layer(log_filter)?;
    let provider = match settings.traces_endpoint() {
        Some(endpoint) => Some(provider(settings, endpoint)?),
        None => None,
    };
    subscriber(logs, provider.as_ref())
        .try_init()
        .map_err(|err| TracesError::Subscriber(err.to_string()))?;
    if let Some(provider) = &provider {
        trace::install_source(current_context);
        trace::install_spans(Box::new(SdkSpans {
            tracer: provider.tracer("toold"),
        }));
    }
    Ok(TracesGuard { provider })
}

/// The core spans ([`trace::CoreSpan`]) as OpenTelemetry SDK spans, opened and ended directly
/// (no `tracing` span, see the header of `tool::trace`).
struct SdkSpans {
    tracer: SdkTracer,
}

impl trace::Spans for SdkSpans {
    fn start(&self, start: trace::SpanStart) -> Box<dyn trace::OpenSpan> {
        let parent = match &start.parent {
            Some(parent) => otel_context(&parent.context, parent.remote),
            None => opentelemetry::Context::new(),
        };
        let attributes: Vec<KeyValue> = start
            .attributes
            .into_iter()
            .map(|(key, value)| KeyValue::new(key, otel_value(value)))
            .collect();
        let builder = self
            .tracer
            .span_builder(start.name)
            .with_kind(if start.server {
                SpanKind::Server
            } else {
                SpanKind::Internal
            })
            .with_attributes(attributes);
        Box::new(SdkOpenSpan {
            span: self.tracer.build_with_context(builder, &parent),
        })
    }

    fn adopt(&self, span: &tracing::Span, parent: &trace::SpanParent) {
        // Made in an exported `tracing` span: that one is its parent already.
        if tracing::Span::current()
            .context()
            .span()
            .span_context()
            .is_valid()
        {
            return;
        }
        set_parent(span, &parent.context, parent.remote);
    }
}

struct SdkOpenSpan {
    span: opentelemetry_sdk::trace::Span,
}

impl trace::OpenSpan for SdkOpenSpan {
    fn context(&self) -> Option<TraceContext> {
        let span_context = self.span.span_context();
        span_context.is_valid().then(|| trace_context(span_context))
    }

    fn set(&mut self, key: &'static str, value: trace::SpanValue) {
        self.span
            .set_attribute(KeyValue::new(key, otel_value(value)));
    }

    fn fail(&mut self, description: String) {
        self.span.set_status(Status::error(description));
    }

    fn end(&mut self) {
        self.span.end();
    }
}

fn otel_value(value: trace::SpanValue) -> opentelemetry::Value {
    match value {
        trace::SpanValue::Text(text) => opentelemetry::Value::from(text),
        trace::SpanValue::Int(value) => opentelemetry::Value::I64(value),
        trace::SpanValue::Bool(value) => opentelemetry::Value::Bool(value),
    }
}

/// `context` as an OpenTelemetry parent.
fn otel_context(context: &TraceContext, remote: bool) -> opentelemetry::Context {
    let state = context
        .tracestate
        .as_deref()
        .and_then(|s| TraceState::from_str(s).ok())
        .unwrap_or_default();
    let span_context = SpanContext::new(
        TraceId::from_bytes(context.trace_id),
        SpanId::from_bytes(context.parent_id),
        TraceFlags::new(context.flags),
        remote,
        state,
    );
    opentelemetry::Context::new().with_remote_span_context(span_context)
}

/// An OpenTelemetry span context as the core's.
fn trace_context(span_context: &SpanContext) -> TraceContext {
    let state = span_context.trace_state().header();
    TraceContext {
        trace_id: span_context.trace_id().to_bytes(),
        parent_id: span_context.span_id().to_bytes(),
        flags: span_context.trace_flags().to_u8(),
        tracestate: (!state.is_empty()).then_some(state),
    }
}

/// Logs on stderr, filtered by `log_filter`; spans meant for export never show in them.
fn log_layer(log_filter: &str) -> Result<impl Layer<Registry> + Send + Sync, TracesError> {
    let targets: Targets =
        log_filter
            .parse()
            .map_err(
                |err: tracing_subscriber::filter::ParseError| TracesError::LogFilter {
                    filter: log_filter.to_owned(),
                    problem: err.to_string(),
                },
            )?;
    let targets = targets.with_target(trace::TARGET, LevelFilter::OFF);
    // rmcp logs each MCP session's start and end at `info`: three lines (one a `Debug` of the
    // client's whole `initialize`) for every stateless MCP request. Quiet unless named.
    let targets = if names_target(log_filter, "rmcp") {
        targets
    } else {
        targets.with_target("rmcp", LevelFilter::WARN)
    };
    Ok(tracing_subscriber::fmt::layer()
        .with_writer(std::io::stderr)
        .with_ansi(false)
        .with_filter(targets))
}

/// Whether `log_filter` has a directive for `target` or one of its modules.
fn names_target(log_filter: &str, target: &str) -> bool {
    log_filter.split(',').any(|directive| {
        let name = directive.split('=').next().unwrap_or_default().trim();
        name == target
            || name
                .strip_prefix(target)
                .is_some_and(|rest| rest.starts_with("::"))
    })
}

/// The log layer, and the span layer only when `provider` exports (see "off at no cost" in
/// the module header: never an `Option` of it).
fn subscriber<L>(logs: L, provider: Option<&SdkTracerProvider>) -> Dispatch
where
    L: Layer<Registry> + Send + Sync + 'static,
{
    let registry = tracing_subscriber::registry().with(logs);
    let Some(provider) = provider else {
        return Dispatch::new(registry);
    };
    let spans = tracing_opentelemetry::layer()
        .with_tracer(provider.tracer("toold"))
        .with_location(false)
        .with_threads(false)
        .with_target(false)
        .with_tracked_inactivity(false)
        .with_context_activation(false)
        .with_filter(Targets::new().with_target(trace::TARGET, LevelFilter::TRACE));
    Dispatch::new(registry.with(spans))
}

fn provider(
    settings: &TelemetrySettings,
    endpoint: String,
) -> Result<SdkTracerProvider, TracesError> {
    let failed = |problem: String| TracesError::Exporter {
        endpoint: endpoint.clone(),
        problem,
    };
    let export = otlp::ExportSettings::from_env(|name| {
        let set = settings
            .export_variables
            .iter()
            .find(|(set, _)| set == name);
        set.map(|(_, value)| value.clone())
    })
    .map_err(failed)?;
    let exporter = match settings.otlp_protocol {
        OtlpProtocol::Grpc => otlp::OtlpExporter::grpc(&endpoint, &export),
        OtlpProtocol::HttpProtobuf => otlp::OtlpExporter::http(&endpoint, &export),
    }
    .map_err(failed)?;
    let resource = Resource::builder_empty()
        .with_service_name(settings.service_name.clone())
        .with_attribute(opentelemetry::KeyValue::new(
            "service.version",
            env!("CARGO_PKG_VERSION"),
        ))
        .build();
    Ok(SdkTracerProvider::builder()
        .with_batch_exporter(exporter)
        .with_sampler(settings.sampler()?)
        .with_resource(resource)
        .build())
}

/// The current span's context as the core's [`TraceContext`] (the installed
/// [`trace::Source`]).
fn current_context() -> Option<TraceContext> {
    let current = tracing::Span::current();
    if current.is_none() {
        return None;
    }
    let context = current.context();
    let span = context.span();
    let span_context = span.span_context();
    span_context.is_valid().then(|| trace_context(span_context))
}

/// Makes `parent` the parent of `span` (a child span just made, see [`trace::child`]);
/// nothing when spans are not exported. Call it before anything enters the span.
fn set_parent(span: &tracing::Span, parent: &TraceContext, remote: bool) {
    if span.is_disabled() {
        return;
    }
    if let Err(err) = span.set_parent(otel_context(parent, remote)) {
        tracing::debug!(error = %err, "trace context not attached");
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Traces off: the core's spans are disabled callsites (never created, entered or closed),
    /// and the logs still show what their filter asks for.
    #[test]
    fn off_is_free() {
        let dispatch = subscriber(log_layer("info").unwrap(), None);
        tracing::dispatcher::with_default(&dispatch, || {
            let span = tracing::info_span!(target: trace::TARGET, "request", otel.kind = "server");
            assert!(span.is_disabled(), "a span of {} is live", trace::TARGET);
            assert!(!tracing::enabled!(target: trace::TARGET, tracing::Level::ERROR));
            assert!(tracing::enabled!(target: "toold::server", tracing::Level::INFO));
            assert!(!tracing::enabled!(target: "toold::server", tracing::Level::DEBUG));
        });
    }

    /// rmcp's per-session lines (three a stateless MCP request) are off by default; a filter
    /// that names rmcp gets what it asks for.
    #[test]
    fn rmcp_logs_warnings_unless_named() {
        // `tracing::enabled!` needs a literal target: rmcp's crate-level one (its modules'
        // targets start with it, and `Targets` matches by prefix).
        let level_on = |filter: &str, level| {
            let dispatch = subscriber(log_layer(filter).unwrap(), None);
            tracing::dispatcher::with_default(&dispatch, || match level {
                tracing::Level::INFO => tracing::enabled!(target: "rmcp", tracing::Level::INFO),
                _ => tracing::enabled!(target: "rmcp", tracing::Level::WARN),
            })
        };
        assert!(!level_on("info", tracing::Level::INFO));
        assert!(level_on("info", tracing::Level::WARN));
        assert!(level_on("info,rmcp=info", tracing::Level::INFO));
        assert!(!level_on("info,rmcpx=info", tracing::Level::INFO));
        assert!(names_target("debug, rmcp = trace", "rmcp"));
        assert!(names_target("warn,crate::module=debug", "crate"));
        assert!(!names_target("toold=debug,rmcpx=info", "rmcp"));
    }

    #[test]
    fn endpoints_resolve_as_the_specification_says() {
        let mut settings = TelemetrySettings::default();
        assert_eq!(settings.traces_endpoint(), None);
        settings.otlp_endpoint = Some("http://collector:4318/".into());
        assert_eq!(
            settings.traces_endpoint().as_deref(),
            Some("http://collector:4318/v1/traces")
        );
        settings.otlp_protocol = OtlpProtocol::Grpc;
        assert_eq!(
            settings.traces_endpoint().as_deref(),
            Some("http://collector:4318/")
        );
        settings.otlp_traces_endpoint = Some("http://other:9/x".into());
        assert_eq!(
            settings.traces_endpoint().as_deref(),
            Some("http://other:9/x")
        );
        settings.otlp_traces_endpoint = Some(" ".into());
        settings.otlp_endpoint = Some(String::new());
        assert_eq!(settings.traces_endpoint(), None);
    }

    #[test]
    fn samplers_are_named_as_the_specification_names_them() {
        let with = |name: &str, arg: Option<&str>| TelemetrySettings {
            traces_sampler: name.into(),
            traces_sampler_arg: arg.map(str::to_owned),
            ..TelemetrySettings::default()
        };
        for name in [
            "always_on",
            "always_off",
            "traceidratio",
            "parentbased_always_on",
            "parentbased_always_off",
            "parentbased_traceidratio",
        ] {
            assert!(with(name, Some("0.5")).sampler().is_ok(), "{name}");
        }
        assert!(matches!(
            with("sometimes", None).sampler(),
            Err(TracesError::Sampler(_))
        ));
        assert!(matches!(
            with("traceidratio", Some("2")).sampler(),
            Err(TracesError::SamplerArg(_))
        ));
    }
}
