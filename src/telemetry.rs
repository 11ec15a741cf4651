//! Metrics: the names toold reports, the functions that record them, and the Prometheus
//! recorder they land in (rendered by the HTTP door's `/metrics`). Traces (OTLP, and the
//! process's `tracing` subscriber) are [`traces`]'.
//!
//! Only this module names the exporter. The service and the door record through the
//! functions below (the `metrics` facade), from results they already have; the core
//! (dispatch, tools, …) records nothing, so it stays free of any metrics crate (one exception:
//! the shell records its spawn with [`record_sandbox_spawn`], the only place that time exists): what only the
//! core sees (a call's decision, duration and offload, a hook's run, an approval wait) is
//! recorded by the wrappers in [`metered`], which the server puts around the core's ports.
//!
//! DESIGN §9's series, and where each is recorded:
//! - `toold_tool_calls_total{tool,outcome}`: a finished batch's results ([`record_batch`]).
//! - `toold_tool_call_duration_seconds{tool}`, `toold_permission_decisions_total{decision,
//!   decided_by}`, `toold_offloaded_bytes_total`: each call's audit row ([`metered`]).
//! - `toold_approvals_pending`, `toold_hook_runs_total{event,outcome}`: [`metered`].
//! - `toold_sessions_active`, `toold_mcp_servers{state}`: set from the service's live state
//!   when `/metrics` is rendered ([`set_live_gauges`]), so they cannot drift from what
//!   `GET /v1/sessions` and `GET /v1/mcp/servers` show; every state is present, 0 when none.
//!   (Not counted in `mcp::instance`'s phase changes: the bridge stays untouched, and an
//!   instance dropped without a last phase change cannot leave a stale count behind.)
//! - `toold_event_subscribers`, `toold_events_lagged_total`: the service's event feed.
//! - `toold_sandbox_spawn_seconds{backend}`: the shell, around its process's spawn (every
//!   backend, `none` too, so the cost of a sandbox reads against no sandbox).
//! - `toold_image_pulls_total{outcome}` (`ok`, `error`), `toold_image_cache_bytes` (set when
//!   `/metrics` is rendered), `toold_limit_kills_total{limit}`: environments (DESIGN §12),
//!   recorded by the service (the kills by the shell's limit watch).
//! - `toold_build_info{version}` (always 1) and the `process_*` series ([`process`]).
//!
//! No label carries a session, batch, call or approval id.
//!
//! The recorder is process-global (the `metrics` facade has one slot), installed on first use;
//! several daemons or routers in one test process share it.
//!
//! A histogram keeps each recorded value until it is folded into its buckets, which happens
//! when `/metrics` is rendered or at the recorder's upkeep; `build_recorder` (unlike the
//! exporter's `install`) runs no upkeep, so a daemon nobody scraped kept every call's and
//! batch's duration: the soak's RSS climbed ~85 bytes a batch, without end (issue 21). A
//! thread of its own (`metrics-upkeep`) runs the upkeep every [`UPKEEP_EVERY`], the
//! exporter's own default, bounding what waits to five seconds' worth of samples.

use std::sync::OnceLock;
use std::time::Duration;

use metrics_exporter_prometheus::{Matcher, PrometheusBuilder, PrometheusHandle};

use crate::tool::ToolResult;

pub mod metered;
pub mod otlp;
mod process;
pub mod traces;

/// HTTP requests, by matched route, method and status.
pub const HTTP_REQUESTS: &str = "toold_http_requests_total";
/// gRPC requests, by method (`/package.Service/Method`, `unknown` for one not served) and
/// the status the response head carries (`OK` when it carries none: answered, the status
/// following in the trailers).
pub const GRPC_REQUESTS: &str = "toold_grpc_requests_total";
/// Tool calls, by tool and outcome (`ok` or the error kind).
pub const TOOL_CALLS: &str = "toold_tool_calls_total";
/// Wall time of a batch from being recorded to being completed, in seconds.
pub const BATCH_DURATION: &str = "toold_batch_duration_seconds";

/// Calls, by tool: wall time from the call being received to its result, in seconds.
pub const TOOL_CALL_DURATION: &str = "toold_tool_call_duration_seconds";
/// Permission decisions, by decision (`allow`, `deny`) and who decided (`mode`, `rule`,
/// `hook`, `approver`, `timeout`).
pub const PERMISSION_DECISIONS: &str = "toold_permission_decisions_total";
/// Approvals waiting for an answer.
pub const APPROVALS_PENDING: &str = "toold_approvals_pending";
/// Hook runs, by event (`PreToolUse`, …) and outcome (see [`metered`]).
pub const HOOK_RUNS: &str = "toold_hook_runs_total";
/// Live sessions.
pub const SESSIONS_ACTIVE: &str = "toold_sessions_active";
/// Event-stream subscribers (SSE, gRPC, WebSocket) connected now.
pub const EVENT_SUBSCRIBERS: &str = "toold_event_subscribers";
/// Subscribers cut off for falling behind (each got a `lagged` item).
pub const EVENTS_LAGGED: &str = "toold_events_lagged_total";
/// Output sent to the offload store instead of the model (characters of text).
pub const OFFLOADED_BYTES: &str = "toold_offloaded_bytes_total";
/// Time to spawn a sandboxed process, by sandbox backend.
pub const SANDBOX_SPAWN: &str = "toold_sandbox_spawn_seconds";
/// Bridged MCP server instances, by state.
pub const MCP_SERVERS: &str = "toold_mcp_servers";
/// Audit exports started (`GET /v1/calls/export`), by format.
pub const AUDIT_EXPORTS: &str = "toold_audit_exports_total";
/// Always 1, labelled with the daemon's version.
pub const IMAGE_PULLS: &str = "toold_image_pulls_total";
pub const IMAGE_CACHE_BYTES: &str = "toold_image_cache_bytes";
pub const LIMIT_KILLS: &str = "toold_limit_kills_total";
pub const BUILD_INFO: &str = "toold_build_info";
/// Bearer tokens accepted, by kind (`static`, `session`, `oidc`) (DESIGN §13).
pub const AUTH_TOKENS_ACCEPTED: &str = "toold_auth_tokens_accepted_total";
/// Bearer tokens refused, by reason (`expired`, `bad_signature`, `wrong_audience`, …).
pub const AUTH_TOKENS_REFUSED: &str = "toold_auth_tokens_refused_total";
/// Bytes carried into and out of sessions' workspaces (uploads, downloads), by `direction`.
pub const WORKSPACE_BYTES: &str = "toold_workspace_bytes_total";
/// Snapshots taken (forks' included).
pub const SNAPSHOTS: &str = "toold_snapshots_total";
/// How long a fork took (the snapshot and its sessions).
pub const FORK_DURATION: &str = "toold_fork_duration_seconds";

/// The states an MCP server instance can be in (`mcp::Phase::as_str`), each always reported.
const MCP_STATES: &[&str] = &["starting", "ready", "restarting", "failed", "stopped"];

/// Histogram buckets for spawn times: 100 µs to 5 s.
const SPAWN_BUCKETS: &[f64] = &[0.0001, 0.0005, 0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0];

/// Histogram buckets for batch durations: a millisecond to the shell's ten-minute maximum.
const BATCH_BUCKETS: &[f64] = &[
    0.001, 0.005, 0.01, 0.05, 0.1, 0.5, 1.0, 5.0, 10.0, 60.0, 300.0, 600.0,
];

static RECORDER: OnceLock<Option<PrometheusHandle>> = OnceLock::new();

/// How often recorded histogram values are folded into their buckets.
const UPKEEP_EVERY: Duration = Duration::from_secs(5);

/// The thread that runs the recorder's upkeep.
const UPKEEP_THREAD: &str = "metrics-upkeep";

/// Installs the Prometheus recorder (once per process) and returns its handle; `None` when
/// another recorder was installed first, in which case `/metrics` has nothing to render.
pub fn prometheus() -> Option<&'static PrometheusHandle> {
    RECORDER.get_or_init(install).as_ref()
}

fn install() -> Option<PrometheusHandle> {
    let builder = PrometheusBuilder::new()
        .set_buckets_for_metric(Matcher::Full(BATCH_DURATION.to_owned()), BATCH_BUCKETS)
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full(TOOL_CALL_DURATION.to_owned()), BATCH_BUCKETS)
        })
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full(SANDBOX_SPAWN.to_owned()), SPAWN_BUCKETS)
        })
        .and_then(|b| {
            b.set_buckets_for_metric(Matcher::Full(FORK_DURATION.to_owned()), SPAWN_BUCKETS)
        })
        .map_err(|err| tracing::warn!(error = %err, "metrics buckets refused"))
        .ok()?;
    let recorder = builder.build_recorder();
    let handle = recorder.handle();
    match metrics::set_global_recorder(recorder) {
        Ok(()) => {
            let upkept = handle.clone();
            let started = std::thread::Builder::new()
                .name(UPKEEP_THREAD.to_owned())
                .spawn(move || {
                    loop {
                        std::thread::sleep(UPKEEP_EVERY);
                        upkept.run_upkeep();
                    }
                });
            if let Err(err) = started {
                tracing::warn!(error = %err, "no metrics upkeep: histograms fold only when scraped");
            }
            describe();
            metrics::gauge!(BUILD_INFO, "version" => env!("CARGO_PKG_VERSION")).set(1.0);
            // Present from the start (0), not only after the first subscriber or wait.
            metrics::gauge!(APPROVALS_PENDING).set(0.0);
            metrics::gauge!(EVENT_SUBSCRIBERS).set(0.0);
            metrics::counter!(EVENTS_LAGGED).absolute(0);
            metrics::counter!(OFFLOADED_BYTES).absolute(0);
            metrics::counter!(WORKSPACE_BYTES, "direction" => "in").absolute(0);
            metrics::counter!(WORKSPACE_BYTES, "direction" => "out").absolute(0);
            metrics::counter!(SNAPSHOTS).absolute(0);
            Some(handle)
        }
        Err(err) => {
            tracing::warn!(error = %err, "a metrics recorder was already installed");
            None
        }
    }
}

/// `# HELP` lines for DESIGN §9's series.
fn describe() {
    use metrics::{describe_counter, describe_gauge, describe_histogram};
    describe_counter!(
        HTTP_REQUESTS,
        "HTTP requests, by matched route, method and status."
    );
    describe_counter!(GRPC_REQUESTS, "gRPC requests, by method and status.");
    describe_histogram!(BATCH_DURATION, metrics::Unit::Seconds, "Batch wall time.");
    describe_counter!(
        TOOL_CALLS,
        "Tool calls, by tool and outcome (ok or the error kind)."
    );
    describe_histogram!(
        TOOL_CALL_DURATION,
        metrics::Unit::Seconds,
        "Tool call wall time."
    );
    describe_counter!(
        PERMISSION_DECISIONS,
        "Permission decisions, by decision and who decided."
    );
    describe_gauge!(APPROVALS_PENDING, "Approvals waiting for an answer.");
    describe_counter!(HOOK_RUNS, "Hook runs, by event and outcome.");
    describe_gauge!(SESSIONS_ACTIVE, "Live sessions.");
    describe_gauge!(EVENT_SUBSCRIBERS, "Event-stream subscribers connected now.");
    describe_counter!(
        EVENTS_LAGGED,
        "Event subscribers cut off for falling behind."
    );
    describe_counter!(
        OFFLOADED_BYTES,
        "Output characters sent to the offload store."
    );
    describe_histogram!(
        SANDBOX_SPAWN,
        metrics::Unit::Seconds,
        "Sandboxed process spawn time."
    );
    describe_gauge!(MCP_SERVERS, "Bridged MCP server instances, by state.");
    describe_counter!(AUDIT_EXPORTS, "Audit exports started, by format.");
    describe_gauge!(BUILD_INFO, "Always 1, labelled with the daemon's version.");
    describe_counter!(
        AUTH_TOKENS_ACCEPTED,
        "Bearer tokens accepted, by kind (static, session, oidc)."
    );
    describe_counter!(
        AUTH_TOKENS_REFUSED,
        "Bearer tokens refused, by reason (expired, bad_signature, wrong_audience, ...)."
    );
    describe_counter!(
        WORKSPACE_BYTES,
        metrics::Unit::Bytes,
        "Bytes uploaded into (in) and downloaded from (out) sessions' workspaces."
    );
    describe_counter!(SNAPSHOTS, "Snapshots taken, forks' included.");
    describe_histogram!(
        FORK_DURATION,
        metrics::Unit::Seconds,
        "Fork time: the snapshot and every session made from it."
    );
    describe_counter!(IMAGE_PULLS, "Environment image pulls, by outcome.");
    describe_gauge!(
        IMAGE_CACHE_BYTES,
        "Bytes of unpacked images in the image cache."
    );
    describe_counter!(
        LIMIT_KILLS,
        "Environment calls ended over a limit, by limit."
    );
}

/// The metrics in Prometheus text format (empty when no recorder of ours is installed),
/// followed by the process series.
pub fn render() -> String {
    let mut text = prometheus()
        .map(PrometheusHandle::render)
        .unwrap_or_default();
    text.push_str(&process::render());
    text
}

/// Sets the gauges read from the service's live state: sessions, and MCP server instances
/// per state (`states` holds one entry per instance).
pub fn set_live_gauges<'a>(sessions: usize, states: impl IntoIterator<Item = &'a str>) {
    metrics::gauge!(SESSIONS_ACTIVE).set(sessions as f64);
    let mut counts = [0u32; MCP_STATES.len()];
    for state in states {
        if let Some(index) = MCP_STATES.iter().position(|known| *known == state) {
            counts[index] += 1;
        }
    }
    for (state, count) in MCP_STATES.iter().zip(counts) {
        metrics::gauge!(MCP_SERVERS, "state" => *state).set(f64::from(count));
    }
}

/// One event-stream subscriber connected; dropping the guard counts it gone.
pub fn event_subscriber() -> SubscriberGuard {
    metrics::gauge!(EVENT_SUBSCRIBERS).increment(1.0);
    SubscriberGuard
}

/// See [`event_subscriber`].
pub struct SubscriberGuard;

impl Drop for SubscriberGuard {
    fn drop(&mut self) {
        metrics::gauge!(EVENT_SUBSCRIBERS).decrement(1.0);
    }
}

/// An audit export started, in `format` (`ndjson`, `csv`).
pub fn record_audit_export(format: &'static str) {
    metrics::counter!(AUDIT_EXPORTS, "format" => format).increment(1);
}

/// `bytes` carried `direction` (`in` or `out`) across a workspace's boundary.
pub fn record_workspace_bytes(direction: &'static str, bytes: u64) {
    metrics::counter!(WORKSPACE_BYTES, "direction" => direction).increment(bytes);
}

/// A snapshot taken.
pub fn record_snapshot() {
    metrics::counter!(SNAPSHOTS).increment(1);
}

/// A fork that took `elapsed`.
pub fn record_fork(elapsed: Duration) {
    metrics::histogram!(FORK_DURATION).record(elapsed.as_secs_f64());
}

/// A subscriber fell behind and was cut off.
pub fn record_event_lag() {
    metrics::counter!(EVENTS_LAGGED).increment(1);
}

/// Runs `spawn` (starting a shell under the sandbox `backend`: `bwrap`, `landlock`, `none`)
/// and records how long it took, whether it succeeded or not.
pub fn time_sandbox_spawn<T>(backend: &'static str, spawn: impl FnOnce() -> T) -> T {
    let started = std::time::Instant::now();
    let spawned = spawn();
    record_sandbox_spawn(backend, started.elapsed());
    spawned
}

/// One image pull (ahead of time or for a session) ended.
pub fn record_image_pull(ok: bool) {
    let outcome = if ok { "ok" } else { "error" };
    metrics::counter!(IMAGE_PULLS, "outcome" => outcome).increment(1);
}

/// The image cache's size, set when `/metrics` is rendered.
pub fn set_image_cache_bytes(bytes: u64) {
    metrics::gauge!(IMAGE_CACHE_BYTES).set(bytes as f64);
}

/// A call of an environment session ended over one of its limits (`memory_mb`, `pids`):
/// recorded by `bash` when it stops the call (a write past `disk_mb` is the command's own
/// ENOSPC, and `cpus` only slows).
pub fn record_limit_kill(limit: &'static str) {
    metrics::counter!(LIMIT_KILLS, "limit" => limit).increment(1);
}

/// Records a shell's spawn under the sandbox `backend` that took `elapsed` (for a spawn that
/// is awaited, which [`time_sandbox_spawn`] cannot wrap).
pub fn record_sandbox_spawn(backend: &'static str, elapsed: Duration) {
    metrics::histogram!(SANDBOX_SPAWN, "backend" => backend).record(elapsed.as_secs_f64());
}

/// One HTTP request answered. `route` is the matched route template (`/v1/sessions/{id}`),
/// never the raw path, so ids do not explode the label space.
pub fn record_http_request(route: &str, method: &str, status: u16) {
    metrics::counter!(
        HTTP_REQUESTS,
        "route" => route.to_owned(),
        "method" => method.to_owned(),
        "status" => status.to_string()
    )
    .increment(1);
}

/// A bearer token accepted, of `kind` (`static`, `session`, `oidc`).
pub fn record_token_accepted(kind: &'static str) {
    metrics::counter!(AUTH_TOKENS_ACCEPTED, "kind" => kind).increment(1);
}

/// A bearer token refused, for `reason` (a fixed word per refusal: the label set is bounded).
pub fn record_token_refused(reason: &'static str) {
    metrics::counter!(AUTH_TOKENS_REFUSED, "reason" => reason).increment(1);
}

/// One gRPC request answered (see [`GRPC_REQUESTS`] for the labels).
pub fn record_grpc_request(method: String, code: &'static str) {
    metrics::counter!(GRPC_REQUESTS, "method" => method, "code" => code).increment(1);
}

/// A finished batch: one count per call by tool and outcome, and the batch's duration.
pub fn record_batch(results: &[ToolResult], duration: Duration) {
    // Counted per (tool, outcome) first: a batch of a hundred reads is one registry lookup.
    let mut counts: Vec<(&str, &'static str, u64)> = Vec::new();
    for result in results {
        let outcome = match result.error_kind {
            Some(kind) => kind.as_str(),
            None if result.is_error => "error",
            None => "ok",
        };
        match counts
            .iter_mut()
            .find(|(tool, seen, _)| *tool == result.name && *seen == outcome)
        {
            Some((_, _, count)) => *count += 1,
            None => counts.push((&result.name, outcome, 1)),
        }
    }
    for (tool, outcome, count) in counts {
        metrics::counter!(TOOL_CALLS, "tool" => tool.to_owned(), "outcome" => outcome)
            .increment(count);
    }
    metrics::histogram!(BATCH_DURATION).record(duration.as_secs_f64());
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_recorded_batch_shows_in_the_rendered_text() {
        assert!(prometheus().is_some());
        let ok = ToolResult {
            id: "c1".into(),
            name: "telemetry_probe".into(),
            is_error: false,
            output: String::new(),
            error_kind: None,
            duration_ms: 1.0,
            offloaded: None,
            structured: None,
            metadata: serde_json::Map::new(),
        };
        record_batch(&[ok], Duration::from_millis(3));
        let text = render();
        assert!(
            text.contains(r#"toold_tool_calls_total{tool="telemetry_probe",outcome="ok"} 1"#),
            "{text}"
        );
        assert!(
            text.contains("toold_batch_duration_seconds_bucket"),
            "{text}"
        );
    }

    /// Without the upkeep, histogram values wait for a scrape that may never come.
    #[test]
    fn the_recorder_runs_its_upkeep_on_a_thread_of_its_own() {
        assert!(prometheus().is_some());
        let names = || -> Vec<String> {
            let threads = std::fs::read_dir("/proc/self/task").expect("/proc/self/task");
            threads
                .filter_map(|task| std::fs::read_to_string(task.ok()?.path().join("comm")).ok())
                .map(|name| name.trim().to_owned())
                .collect()
        };
        // A new thread names itself once it runs (until then it shows its parent's name), so
        // its name may take a moment to appear.
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(5);
        let mut seen = names();
        while !seen.iter().any(|name| name == UPKEEP_THREAD) && std::time::Instant::now() < deadline
        {
            std::thread::sleep(std::time::Duration::from_millis(10));
            seen = names();
        }
        assert!(seen.iter().any(|name| name == UPKEEP_THREAD), "{seen:?}");
    }
}
