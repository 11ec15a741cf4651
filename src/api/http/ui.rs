//! `GET /ui`, the ops dashboard (DESIGN §9): one page and its script and style, embedded in
//! the binary with `include_str!` from `ui/` (plain HTML, CSS and JavaScript: no build step,
//! nothing fetched from elsewhere).
//!
//! The files hold no data, so the gate lets them through without a token
//! (`api::gate::is_dashboard_file`); the page asks for the token in a login form, keeps it in
//! `sessionStorage` (never in a URL) and sends it as `Authorization: Bearer` on every request
//! to the API it makes: the event stream is read with `fetch` (an `EventSource` cannot send
//! headers), opening with the events among the newest 10 000 seqs (`?recent=`) and resuming
//! after a dropped connection from the last seq it delivered (`Last-Event-ID`). Everything
//! the page shows comes from the ordinary API (`/v1/events`, `/v1/sessions`, `/v1/approvals`,
//! `…/batches/{id}` and its `calls`, `/v1/results/{id}`, `/v1/calls` for the audit view).
//!
//! The audit view (`ui/audit.js`) pages `GET /v1/calls` newest first with the filters kept in
//! the URL as `audit.<filter>` (the tail's filters keep their plain names beside them), and
//! links each row's session and trace to the same view filtered by them: the dashboard has no
//! page per session, and a trace's calls are what an operator following a trace wants.
//!
//! Every file is served with a Content-Security-Policy that allows only this origin
//! (`default-src 'none'`; script, style, image and `connect` from `'self'`; no inline script
//! or style, no framing), so even a rendering mistake could not run a tool's output as script;
//! the page itself never builds HTML from data (`textContent` only).
//!
//! Decisions where the issue is silent: the per-tool table, the tiles and the chart are
//! computed in the page from the events it holds, not by a server endpoint: the page already
//! receives every event, and the daemon keeps no per-tool windows. A call's "hooks" are those
//! its audit row names (a hook that decided, or asked), not every hook that ran: the audit row
//! records no other. The tail holds at most the newest 10 000 events (trimmed 1 000 at a time)
//! and renders only the rows in view; its rows are one line each (a virtualised list needs a
//! fixed row height), with the whole text in the row's title and a call's in its details.
//!
//! What the figures mean (issue 35):
//! - **Latency excludes approval waits.** A `tool:post`/`tool:error` event's `duration_ms`
//!   is the whole call, a wait for a person included (the audit phase times everything inside
//!   it). The page pairs each call's `permission:ask` with its `permission:decision` (same
//!   `batch_id` and `call_id`; both carry the daemon's millisecond `ts`): approval wait =
//!   decision − ask (no decision: the outcome's `ts` − ask), latency = `duration_ms` − wait
//!   (never below 0). The p50/p95 columns are latency over the last 5 minutes; the wait is
//!   apart, in its own columns (how many calls asked, their wait's p95).
//! - **Unknown tools are one row.** Calls answered `unknown_tool` are counted together as
//!   "unknown tools (N names)" (the names in its title), not a row per name a model made up.
//! - **Colours by meaning** (`severity` in app.js): red for a failure (`tool:error` of any
//!   kind but the ones below), amber for a refusal, a stop or a wait for a person
//!   (`permission_denied`, `hook_blocked`, `cancelled`, `aborted`, `requires_interaction`,
//!   `permission:ask`, a denying `permission:decision`, a `batch:end` with errors), green for
//!   a call that succeeded or an allow, neutral for the rest (a `session:end` is a session
//!   ending as asked: neutral).
//! - **The chart**: calls (`tool:post` + `tool:error`) and errors (`tool:error`) per UTC
//!   minute over the last 60, drawn as SVG bars by the page. It counts the events the page
//!   holds; when the oldest held event is inside the hour and is not the first the daemon
//!   stored, the chart says from when it counts.
//! - **Approvals show their whole input**, wrapped: `file_path`, `notebook_path`, `path`,
//!   `command`, `url`, `pattern` first (what the call touches), then the rest as JSON.
//! - **"Sign out" only with auth**: the page that got in without a token (a daemon with no
//!   tokens) hides it, as there is nothing to sign out of.
//! - Cells wrap instead of being cut, and under 1100 px the two columns become one (at
//!   800 px nothing is wider than the window).

use axum::http::HeaderValue;
use axum::http::header::{
    CACHE_CONTROL, CONTENT_SECURITY_POLICY, CONTENT_TYPE, REFERRER_POLICY, X_CONTENT_TYPE_OPTIONS,
    X_FRAME_OPTIONS,
};
use axum::response::{IntoResponse, Response};

/// Only this origin, for everything the page loads or connects to.
pub const CONTENT_SECURITY_POLICY_VALUE: &str = "default-src 'none'; script-src 'self'; \
     style-src 'self'; img-src 'self'; connect-src 'self'; form-action 'self'; \
     base-uri 'none'; frame-ancestors 'none'";

const HTML: &str = "text/html; charset=utf-8";
const CSS: &str = "text/css; charset=utf-8";
const JAVASCRIPT: &str = "text/javascript; charset=utf-8";

fn serve(content_type: &'static str, body: &'static str) -> Response {
    let headers = [
        (CONTENT_TYPE, HeaderValue::from_static(content_type)),
        (
            CONTENT_SECURITY_POLICY,
            HeaderValue::from_static(CONTENT_SECURITY_POLICY_VALUE),
        ),
        (X_CONTENT_TYPE_OPTIONS, HeaderValue::from_static("nosniff")),
        (X_FRAME_OPTIONS, HeaderValue::from_static("DENY")),
        (REFERRER_POLICY, HeaderValue::from_static("no-referrer")),
        (CACHE_CONTROL, HeaderValue::from_static("no-cache")),
    ];
    (headers, body).into_response()
}

/// The dashboard page.
#[utoipa::path(get, path = "/ui", tag = "ui",
    responses((status = 200, description = "the dashboard page", body = String, content_type = "text/html")))]
pub async fn page() -> Response {
    serve(HTML, include_str!("ui/index.html"))
}

/// The dashboard's style sheet.
#[utoipa::path(get, path = "/ui/app.css", tag = "ui",
    responses((status = 200, description = "the dashboard's style", body = String, content_type = "text/css")))]
pub async fn style() -> Response {
    serve(CSS, include_str!("ui/app.css"))
}

/// The dashboard's script: login, data, panels.
#[utoipa::path(get, path = "/ui/app.js", tag = "ui",
    responses((status = 200, description = "the dashboard's script", body = String, content_type = "text/javascript")))]
pub async fn script() -> Response {
    serve(JAVASCRIPT, include_str!("ui/app.js"))
}

/// The dashboard's audit view.
#[utoipa::path(get, path = "/ui/audit.js", tag = "ui",
    responses((status = 200, description = "the dashboard's audit view", body = String, content_type = "text/javascript")))]
pub async fn audit_script() -> Response {
    serve(JAVASCRIPT, include_str!("ui/audit.js"))
}

/// The dashboard's event stream reader and virtualised tail.
#[utoipa::path(get, path = "/ui/tail.js", tag = "ui",
    responses((status = 200, description = "the dashboard's tail", body = String, content_type = "text/javascript")))]
pub async fn tail_script() -> Response {
    serve(JAVASCRIPT, include_str!("ui/tail.js"))
}
