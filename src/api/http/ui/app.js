// toold dashboard: login, the panels and a call's details (src/api/http/ui.rs says why it is
// built this way). Every value from the daemon reaches the page through textContent, never
// as HTML. The token lives in sessionStorage and travels only in the Authorization header.

import { EventFeed, VirtualList } from "/ui/tail.js";
import { AuditView } from "/ui/audit.js";

const TOKEN_KEY = "toold.token";
const MAX_EVENTS = 10000;
const TRIM_EVENTS = 1000;
const WINDOW_MS = 5 * 60 * 1000;
const CHART_MINUTES = 60;
const MINUTE_MS = 60 * 1000;
const ROW_HEIGHT = 22;
const EVENT_TYPES = [
  "session:start", "session:end", "batch:start", "batch:end", "tool:queued", "tool:pre",
  "tool:progress", "tool:post", "tool:error", "permission:ask", "permission:decision",
];
const DENIAL_KINDS = new Set(["permission_denied", "hook_blocked"]);
/// Kinds that mean the call was stopped or refused, not that something broke: amber.
const WARNING_KINDS = new Set([...DENIAL_KINDS, "cancelled", "aborted", "requires_interaction"]);
/// The input fields an operator must see first in an approval, in this order.
const LEADING_FIELDS = ["file_path", "notebook_path", "path", "command", "url", "pattern"];

const $ = (id) => document.getElementById(id);

const state = {
  token: null,
  feed: null,
  events: [], // the newest MAX_EVENTS events, in seq order
  shown: [], // the events passing the filters
  filters: { session: "", tool: "", type: "" },
  paused: false,
  refreshTimers: {},
  // Per call ("batch\ncall"): when its approval was asked and decided (ms since the epoch),
  // from its permission:ask and permission:decision events.
  approvals: new Map(),
};

// ---- the API -------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, message) {
    super(message);
    this.status = status;
  }
}

async function api(path, { method = "GET", body } = {}) {
  const headers = {};
  if (state.token) headers.Authorization = "Bearer " + state.token;
  if (body !== undefined) headers["Content-Type"] = "application/json";
  const response = await fetch(path, {
    method, headers, cache: "no-store",
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  const text = await response.text();
  let json = null;
  try {
    json = text ? JSON.parse(text) : null;
  } catch {
    json = null;
  }
  if (!response.ok) {
    const message = json && json.error ? json.error.message : "HTTP " + response.status;
    if (response.status === 401) showLogin("the daemon refused the token: " + message);
    throw new ApiError(response.status, message);
  }
  return json;
}

// ---- small DOM helpers (text only) -------------------------------------------------------

function el(tag, text, className) {
  const node = document.createElement(tag);
  if (text !== undefined && text !== null) node.textContent = String(text);
  if (className) node.className = className;
  return node;
}

/// A table row of text cells (they wrap: nothing is cut).
function cells(row, values) {
  for (const value of values) {
    const cell = el("td", value);
    cell.title = String(value ?? "");
    row.append(cell);
  }
  return row;
}

/// An id's distinctive end (ids made together share their time-ordered start).
function short(id) {
  const s = String(id ?? "");
  return s.length > 12 ? "…" + s.slice(-10) : s;
}

function clip(text, max) {
  const s = String(text ?? "");
  return s.length > max ? s.slice(0, max) + "…" : s;
}

function json(value) {
  return JSON.stringify(value, null, 2);
}

// ---- login ---------------------------------------------------------------------------------

function showLogin(message) {
  if (state.feed) state.feed.stop();
  state.feed = null;
  sessionStorage.removeItem(TOKEN_KEY);
  $("dashboard").hidden = true;
  $("login").hidden = false;
  $("login-error").textContent = message || "";
  $("login-token").focus();
}

async function tryToken(token) {
  state.token = token;
  try {
    await api("/v1/sessions");
    return true;
  } catch (err) {
    if (err instanceof ApiError && err.status === 401) return false;
    throw err;
  }
}

async function login(event) {
  event.preventDefault();
  const token = $("login-token").value.trim();
  $("login-error").textContent = "";
  try {
    if (await tryToken(token)) {
      sessionStorage.setItem(TOKEN_KEY, token);
      $("login-token").value = "";
      startDashboard();
    } else {
      showLogin("the daemon refused that token");
    }
  } catch (err) {
    $("login-error").textContent = "cannot reach the daemon: " + err.message;
  }
}

// ---- filters (kept in the URL's query string) ------------------------------------------------

function readFilters() {
  const params = new URLSearchParams(location.search);
  for (const name of ["session", "tool", "type"]) state.filters[name] = params.get(name) || "";
  $("filter-session").value = state.filters.session;
  $("filter-tool").value = state.filters.tool;
  $("filter-type").value = state.filters.type;
}

function writeFilters() {
  state.filters.session = $("filter-session").value.trim();
  state.filters.tool = $("filter-tool").value.trim();
  state.filters.type = $("filter-type").value;
  // Other views' parameters (the audit view's `audit.*`) stay.
  const params = new URLSearchParams(location.search);
  for (const [name, value] of Object.entries(state.filters)) {
    if (value) params.set(name, value);
    else params.delete(name);
  }
  const query = params.toString();
  history.replaceState(null, "", location.pathname + (query ? "?" + query : ""));
  state.shown = state.events.filter(matches);
  showTail();
}

function matches(event) {
  const f = state.filters;
  return (!f.session || event.session_id === f.session)
    && (!f.tool || event.tool === f.tool)
    && (!f.type || event.type === f.type);
}

const known = new Set();

/// Offers `value` in the datalist `listId` (the filters' suggestions), once.
function remember(listId, value) {
  if (!value || known.has(listId + "\n" + value)) return;
  known.add(listId + "\n" + value);
  const option = document.createElement("option");
  option.value = value;
  $(listId).append(option);
}

// ---- the tail --------------------------------------------------------------------------------

let tail;

function onEvent(event) {
  state.events.push(event);
  if (matches(event)) state.shown.push(event);
  noteApproval(event);
  if (state.events.length > MAX_EVENTS) {
    // A thousand at a time, so trimming costs nothing per event.
    state.events.splice(0, state.events.length - (MAX_EVENTS - TRIM_EVENTS));
    const oldest = state.events[0].seq;
    state.shown = state.shown.filter((e) => e.seq >= oldest);
    state.approvals.clear();
    state.events.forEach(noteApproval);
  }
  remember("known-sessions", event.session_id);
  remember("known-tools", event.tool);
  if (event.type === "session:start" || event.type === "session:end") refreshSoon("sessions", loadSessions);
  if (event.type === "permission:ask" || event.type === "permission:decision" || event.type === "batch:end") {
    refreshSoon("approvals", loadApprovals);
  }
  scheduleStats();
  if (!state.paused) showTail();
  else $("tail-count").textContent = state.shown.length + " events (paused)";
}

function showTail() {
  tail.setCount(state.shown.length);
  $("tail-count").textContent = state.shown.length + " events" + (state.paused ? " (paused)" : "");
}

function summary(event) {
  const d = event.data || {};
  switch (event.type) {
    case "tool:post":
      return `${event.call_id} ${d.duration_ms?.toFixed?.(1) ?? "?"} ms${waited(event)}, ${d.output_chars} chars`
        + (d.offloaded ? ", offloaded" : "");
    case "tool:error":
      return `${event.call_id} ${d.error_kind ?? "error"} ${d.duration_ms?.toFixed?.(1) ?? "?"} ms${waited(event)}: ${clip(d.output, 160)}`;
    case "tool:pre":
      return `${event.call_id} ${clip(JSON.stringify(d.input), 160)}`;
    case "permission:ask":
      return `${event.call_id} asks: ${clip(d.reason, 120)}`;
    case "permission:decision":
      return `${event.call_id} ${d.decision} by ${describeDecidedBy(d.decided_by)}`;
    case "batch:end":
      return `${event.batch_id} ${d.calls} calls, ${d.errors} errors`;
    default:
      return event.call_id || event.batch_id || "";
  }
}

/// What an event means for an operator: "error" (red: something broke), "warn" (amber: a
/// call refused, stopped or waiting for a person), "ok" (green: a call succeeded) or
/// "neutral" (the ordinary life of sessions and batches, a normal session:end included).
function severity(event) {
  const d = event.data || {};
  switch (event.type) {
    case "tool:error":
      return WARNING_KINDS.has(d.error_kind) ? "warn" : "error";
    case "tool:post":
      return "ok";
    case "permission:ask":
      return "warn";
    case "permission:decision":
      return d.decision === "deny" ? "warn" : "ok";
    case "batch:end":
      return d.errors > 0 ? "warn" : "neutral";
    default:
      return "neutral";
  }
}

/// ", N ms of it waiting for approval" for a call that waited for a person.
function waited(outcome) {
  const wait = approvalWait(outcome);
  return wait === null ? "" : ` (${wait} ms of it waiting for approval)`;
}

function fillRow(row, index) {
  const event = state.shown[index];
  row.classList.add("type-" + event.type.replace(":", "-"), "sev-" + severity(event));
  if (event.call_id && event.batch_id) row.classList.add("clickable");
  row.dataset.seq = String(event.seq);
  const time = String(event.ts || "").slice(11, 23);
  const text = summary(event);
  row.append(
    el("span", event.seq, "c-seq"), el("span", time, "c-time"), el("span", event.type, "c-type"),
    el("span", short(event.session_id), "c-session"), el("span", event.tool || "", "c-tool"),
    el("span", text, "c-summary"),
  );
  // A row is one line (the tail is virtualised); the whole text is in its title, and a
  // call's row opens its details.
  row.title = `${event.type} ${event.session_id || ""} ${event.tool || ""}\n${text}`;
}

function togglePause() {
  state.paused = !state.paused;
  $("pause").textContent = state.paused ? "Resume" : "Pause";
  $("pause").setAttribute("aria-pressed", String(state.paused));
  showTail();
}

function setConnection(status) {
  const badge = $("connection");
  badge.textContent = status;
  badge.className = "badge " + status;
  if (status === "live") {
    refreshSoon("sessions", loadSessions);
    refreshSoon("approvals", loadApprovals);
  }
}

// ---- tiles, the per-tool table (the last WINDOW_MS) and the chart (the last hour) ------------------

function percentile(sorted, p) {
  if (sorted.length === 0) return null;
  const rank = Math.ceil((p / 100) * sorted.length) - 1;
  return sorted[Math.min(sorted.length - 1, Math.max(0, rank))];
}

function callKey(event) {
  return event.batch_id && event.call_id ? event.batch_id + "\n" + event.call_id : null;
}

/// Remembers when a call's approval was asked and decided (the events' own times).
function noteApproval(event) {
  if (event.type !== "permission:ask" && event.type !== "permission:decision") return;
  const key = callKey(event);
  if (!key) return;
  const entry = state.approvals.get(key) || { asked: null, decided: null };
  const at = Date.parse(event.ts);
  if (event.type === "permission:ask") entry.asked = at;
  else if (entry.asked !== null) entry.decided = at;
  if (entry.asked !== null) state.approvals.set(key, entry);
}

/// How long the call of this outcome waited for a person (ms), or null if it never asked:
/// from its permission:ask to its permission:decision (or, undecided, to its outcome).
function approvalWait(outcome) {
  const key = callKey(outcome);
  const entry = key && state.approvals.get(key);
  if (!entry) return null;
  const until = entry.decided ?? Date.parse(outcome.ts);
  return Math.max(0, until - entry.asked);
}

let statsPending = null;

/// Renders the tiles, the table and the chart soon (at most every 250 ms while events flow).
function scheduleStats() {
  if (statsPending === null) statsPending = setTimeout(renderStats, 250);
}

function newToolEntry() {
  return { calls: 0, errors: 0, latencies: [], waits: [], names: new Set() };
}

function renderStats() {
  clearTimeout(statsPending);
  statsPending = null;
  const now = Date.now();
  const perTool = new Map();
  const unknown = newToolEntry();
  const currentMinute = Math.floor(now / MINUTE_MS);
  const minutes = Array.from({ length: CHART_MINUTES }, () => ({ calls: 0, errors: 0 }));
  let lastMinute = 0;
  let outcomes = 0;
  let errors = 0;
  let denials = 0;
  for (let i = state.events.length - 1; i >= 0; i--) {
    const event = state.events[i];
    const at = Date.parse(event.ts);
    const ago = currentMinute - Math.floor(at / MINUTE_MS);
    if (ago >= CHART_MINUTES) break;
    if (event.type !== "tool:post" && event.type !== "tool:error") continue;
    const failed = event.type === "tool:error";
    if (ago >= 0) {
      minutes[CHART_MINUTES - 1 - ago].calls++;
      if (failed) minutes[CHART_MINUTES - 1 - ago].errors++;
    }
    if (now - at > WINDOW_MS) continue;
    outcomes++;
    if (failed) errors++;
    if (failed && DENIAL_KINDS.has(event.data?.error_kind)) denials++;
    if (now - at <= 60000) lastMinute++;
    const name = event.tool || "?";
    const isUnknown = failed && event.data?.error_kind === "unknown_tool";
    const entry = isUnknown ? unknown : perTool.get(name) || newToolEntry();
    if (!isUnknown) perTool.set(name, entry);
    entry.names.add(name);
    entry.calls++;
    if (failed) entry.errors++;
    if (typeof event.data?.duration_ms === "number") {
      const wait = approvalWait(event);
      if (wait !== null) entry.waits.push(wait);
      entry.latencies.push(Math.max(0, event.data.duration_ms - (wait ?? 0)));
    }
  }
  $("tile-rate").textContent = String(lastMinute);
  $("tile-errors").textContent = outcomes ? ((100 * errors) / outcomes).toFixed(1) + "%" : "—";
  $("tile-denials").textContent = String(denials);
  const entries = [...perTool.entries()].sort(([a], [b]) => a.localeCompare(b));
  if (unknown.calls > 0) {
    const names = unknown.names.size === 1 ? "1 name" : unknown.names.size + " names";
    entries.push([`unknown tools (${names})`, unknown]);
  }
  const rows = entries.map(([name, entry]) => {
    const ms = (v) => (v === null ? "—" : v.toFixed(1));
    const latencies = entry.latencies.sort((a, b) => a - b);
    const waits = entry.waits.sort((a, b) => a - b);
    const row = cells(document.createElement("tr"), [
      name, entry.calls, entry.errors, ms(percentile(latencies, 50)), ms(percentile(latencies, 95)),
      waits.length, ms(percentile(waits, 95)),
    ]);
    if (entry === unknown) {
      row.dataset.tool = "(unknown)";
      row.classList.add("unknown-tools");
      row.cells[0].title = [...unknown.names].sort().join(", ");
    } else {
      row.dataset.tool = name;
    }
    return row;
  });
  $("tools").tBodies[0].replaceChildren(...rows);
  renderChart(minutes, currentMinute);
}

/// Calls and errors per minute over the last hour as bars, drawn in the page's own SVG.
/// The page holds the newest MAX_EVENTS events; when older ones within the hour are not
/// held, the chart says from when it counts.
function renderChart(minutes, currentMinute) {
  const svg = $("chart");
  // The SVG namespace, from the element the HTML parser made (the files name no URL).
  const ns = svg.namespaceURI;
  const width = 600;
  const height = 120;
  const top = 14;
  const bottom = 16;
  const slot = width / CHART_MINUTES;
  const peak = Math.max(1, ...minutes.map((m) => m.calls));
  const scale = (n) => ((height - top - bottom) * n) / peak;
  const nodes = [];
  const line = (y, className) => {
    const node = document.createElementNS(ns, "line");
    for (const [k, v] of Object.entries({ x1: 0, x2: width, y1: y, y2: y })) node.setAttribute(k, v);
    node.setAttribute("class", className);
    return node;
  };
  const label = (x, y, text, anchor) => {
    const node = document.createElementNS(ns, "text");
    node.setAttribute("x", x);
    node.setAttribute("y", y);
    node.setAttribute("text-anchor", anchor);
    node.setAttribute("class", "axis");
    node.textContent = text;
    return node;
  };
  nodes.push(line(height - bottom, "baseline"), line(top, "gridline"));
  minutes.forEach((m, i) => {
    const minute = currentMinute - (CHART_MINUTES - 1 - i);
    const stamp = new Date(minute * MINUTE_MS).toISOString().slice(11, 16);
    for (const [kind, n] of [["calls", m.calls], ["errors", m.errors]]) {
      if (n === 0) continue;
      const bar = document.createElementNS(ns, "rect");
      const h = Math.max(1, scale(n));
      bar.setAttribute("x", (i * slot + 1).toFixed(1));
      bar.setAttribute("width", (slot - 2).toFixed(1));
      bar.setAttribute("y", (height - bottom - h).toFixed(1));
      bar.setAttribute("height", h.toFixed(1));
      bar.setAttribute("class", kind);
      bar.setAttribute("data-minute", stamp);
      bar.setAttribute("data-count", String(n));
      const title = document.createElementNS(ns, "title");
      title.textContent = `${stamp} UTC: ${m.calls} calls, ${m.errors} errors`;
      bar.append(title);
      nodes.push(bar);
    }
  });
  nodes.push(label(0, top - 3, `${peak} / min`, "start"));
  nodes.push(label(0, height - 3, "60 min ago", "start"), label(width, height - 3, "now", "end"));
  svg.replaceChildren(...nodes);
  const oldest = state.events[0];
  const since = oldest && oldest.seq > 1 ? Date.parse(oldest.ts) : null;
  const partial = since !== null && since > (currentMinute - CHART_MINUTES + 1) * MINUTE_MS;
  $("chart-note").textContent = partial
    ? `counted from ${new Date(since).toISOString().slice(11, 19)} UTC (the oldest event this page holds)`
    : "";
}

// ---- sessions and approvals --------------------------------------------------------------------

function refreshSoon(name, load) {
  if (state.refreshTimers[name]) return;
  state.refreshTimers[name] = setTimeout(() => {
    state.refreshTimers[name] = null;
    load().catch(() => {});
  }, 100);
}

/// Where an environment session runs (DESIGN §12): its image (or the root it was given), its
/// isolation tier and its limits; empty cells for a plain session.
function environmentCells(environment) {
  if (!environment) return ["", "", ""];
  const limits = ["memory_mb", "cpus", "pids", "disk_mb"]
    .filter((name) => environment.limits?.[name] != null)
    .map((name) => `${name}=${environment.limits[name]}`)
    .join(", ");
  return [environment.image ?? environment.rootfs ?? "", environment.isolation ?? "", limits];
}

async function loadSessions() {
  const { sessions } = await api("/v1/sessions");
  const rows = sessions.map((s) => {
    remember("known-sessions", s.id);
    const row = cells(document.createElement("tr"), [
      short(s.id), s.permission_mode, s.working_directory, s.owner, s.interactive ? "yes" : "no",
      ...environmentCells(s.environment),
    ]);
    row.cells[0].title = s.id;
    row.dataset.session = s.id;
    return row;
  });
  $("sessions").tBodies[0].replaceChildren(...rows);
}

async function loadApprovals() {
  const { approvals } = await api("/v1/approvals");
  $("tile-approvals").textContent = String(approvals.length);
  $("approvals-empty").hidden = approvals.length > 0;
  const rows = approvals.map((a) => {
    const row = cells(document.createElement("tr"), [short(a.session_id), a.tool]);
    row.cells[0].title = a.session_id;
    const input = el("td", undefined, "approval-input");
    input.append(approvalInput(a.input));
    row.append(input, el("td", a.reason));
    row.dataset.approval = a.id;
    const actions = el("td");
    for (const decision of ["allow", "deny"]) {
      const button = el("button", decision === "allow" ? "Allow" : "Deny", "decide-" + decision);
      button.type = "button";
      button.addEventListener("click", () => resolveApproval(a, decision, row));
      actions.append(button);
    }
    row.append(actions);
    return row;
  });
  $("approvals").tBodies[0].replaceChildren(...rows);
}

/// An approval's whole input, nothing cut: the fields that say what the call touches (the
/// path, the command, …) first, each on its own line, then the rest as JSON.
function approvalInput(input) {
  const wrap = el("div");
  if (input === null || typeof input !== "object" || Array.isArray(input)) {
    wrap.append(el("pre", json(input)));
    return wrap;
  }
  const rest = { ...input };
  for (const name of LEADING_FIELDS) {
    if (!(name in rest)) continue;
    const value = rest[name];
    delete rest[name];
    const line = el("div", undefined, "lead");
    line.dataset.field = name;
    line.append(el("span", name, "field"), el("code", typeof value === "string" ? value : json(value)));
    wrap.append(line);
  }
  if (Object.keys(rest).length > 0) wrap.append(el("pre", json(rest), "rest"));
  return wrap;
}

async function resolveApproval(approval, decision, row) {
  for (const button of row.querySelectorAll("button")) button.disabled = true;
  try {
    await api(`/v1/sessions/${encodeURIComponent(approval.session_id)}/approvals/${encodeURIComponent(approval.id)}`,
      { method: "POST", body: { decision, reason: `${decision} from the dashboard` } });
  } catch (err) {
    row.append(el("td", err.message, "error"));
  }
  await loadApprovals().catch(() => {});
}

// ---- a call's details ----------------------------------------------------------------------------

function describeDecidedBy(by) {
  if (!by) return "—";
  if (typeof by === "string") return by;
  switch (by.by) {
    case "mode": return `mode ${by.mode}`;
    case "rule": return `rule ${by.rule} (${by.source})`;
    case "hook": return `hook ${by.hook}`;
    case "approver": return `${by.approver}${by.token ? " token " + by.token : ""} (asked by ${describeDecidedBy(by.asked_by)})`;
    case "timeout": return `timeout after ${by.timeout_ms} ms (asked by ${describeDecidedBy(by.asked_by)})`;
    default: return JSON.stringify(by);
  }
}

function hooksOf(decidedBy) {
  const hooks = [];
  for (let by = decidedBy; by; by = by.asked_by) if (by.by === "hook") hooks.push(by.hook);
  return hooks;
}

/// The audit row of a call, from its batch's rows (closed sessions' too) (a whole batch's rows are written when the
/// batch ends: null before).
async function auditRow(sessionId, batchId, callId) {
  const path = `/v1/calls?session=${encodeURIComponent(sessionId)}&batch_id=${encodeURIComponent(batchId)}`;
  const { calls } = await api(path);
  return calls.find((row) => row.call_id === callId) || null;
}

async function batchResult(sessionId, batchId, callId) {
  try {
    const batch = await api(`/v1/sessions/${encodeURIComponent(sessionId)}/batches/${encodeURIComponent(batchId)}`);
    if (!batch.results) return { note: `the batch is ${batch.status}; its output is not available yet` };
    return { result: batch.results.find((r) => r.id === callId) || null };
  } catch (err) {
    return { note: "the output is no longer kept (" + err.message + ")" };
  }
}

function field(list, name, value, className) {
  list.append(el("dt", name));
  const dd = el("dd", undefined, className);
  if (value instanceof Node) dd.append(value);
  else dd.textContent = value === undefined || value === null || value === "" ? "—" : String(value);
  dd.dataset.field = name;
  list.append(dd);
}

async function showDetails(event) {
  if (!event || !event.call_id || !event.batch_id) return;
  const panel = $("details");
  panel.hidden = false;
  $("details-title").textContent = `${event.tool || "?"} ${event.call_id}`;
  const list = $("details-fields");
  list.replaceChildren(el("dd", "loading…"));
  panel.dataset.call = event.call_id;
  panel.dataset.state = "loading";
  const [row, output] = await Promise.all([
    auditRow(event.session_id, event.batch_id, event.call_id).catch(() => null),
    batchResult(event.session_id, event.batch_id, event.call_id),
  ]);
  if (panel.dataset.call !== event.call_id) return;
  const related = state.events.filter((e) => e.batch_id === event.batch_id && e.call_id === event.call_id);
  const pre = related.find((e) => e.type === "tool:pre");
  const outcome = related.find((e) => e.type === "tool:post" || e.type === "tool:error");
  list.replaceChildren();
  field(list, "session", event.session_id);
  field(list, "batch", event.batch_id);
  field(list, "status", row ? (row.is_error ? "error " + (row.error_kind || "") : "ok") : outcome?.type);
  field(list, "input", el("pre", json(row ? row.input : pre?.data?.input)));
  const result = output.result;
  const preview = result ? result.output : outcome?.data?.output ?? output.note;
  field(list, "output", el("pre", preview ?? "—", "output"));
  const offloaded = (result && result.offloaded) || row?.offloaded || outcome?.data?.offloaded;
  if (offloaded) field(list, "full result", fullResultLink(offloaded));
  const decision = row?.decision;
  field(list, "decision", decision ? `${decision.decision} by ${describeDecidedBy(decision.decided_by)}` : "—");
  const hooks = decision ? hooksOf(decision.decided_by) : [];
  field(list, "hooks", hooks.length ? "decided by " + hooks.join(", ") : "no hook decided");
  const duration = row?.duration_ms ?? outcome?.data?.duration_ms;
  field(list, "duration", typeof duration === "number" ? duration.toFixed(2) + " ms" : "—");
  field(list, "trace id", row?.trace_id || outcome?.data?.trace_id || "—");
  panel.dataset.state = "loaded";
  panel.scrollIntoView({ block: "start" });
}

function fullResultLink(offloaded) {
  const wrap = el("div");
  const link = el("a", `${offloaded.result_id} (${offloaded.total_chars} characters)`);
  link.href = "#";
  link.className = "full-result";
  link.addEventListener("click", async (event) => {
    event.preventDefault();
    const page = await api(`/v1/results/${encodeURIComponent(offloaded.result_id)}?limit=1048576`);
    const text = page.content + (page.total_chars > page.content.length ? "\n… (first 1 Mi characters)" : "");
    wrap.replaceChildren(link, el("pre", text, "output"));
  });
  wrap.append(link);
  return wrap;
}

// ---- start -----------------------------------------------------------------------------------------

let statsTimer = null;

function startDashboard() {
  $("login").hidden = true;
  $("dashboard").hidden = false;
  // Without a token the daemon has no auth configured: there is nothing to sign out of.
  $("logout").hidden = !state.token;
  if (state.feed) state.feed.stop();
  state.feed = new EventFeed({
    token: state.token,
    onEvent,
    onState: setConnection,
    onAuthError: () => showLogin("the daemon refused the token"),
  });
  state.feed.start();
  if (!statsTimer) statsTimer = setInterval(renderStats, 1000);
  renderStats();
  loadSessions().catch(() => {});
  loadApprovals().catch(() => {});
  if (!state.audit) state.audit = new AuditView({ api, el });
  state.audit.start();
}

async function boot() {
  const typeSelect = $("filter-type");
  for (const type of EVENT_TYPES) typeSelect.append(new Option(type, type));
  readFilters();
  tail = new VirtualList({
    viewport: $("tail"),
    rowHeight: ROW_HEIGHT,
    fill: fillRow,
    onSelect: (index) => showDetails(state.shown[index]).catch((err) => {
      $("details-fields").replaceChildren(el("dd", err.message, "error"));
    }),
  });
  $("login-form").addEventListener("submit", login);
  $("filters").addEventListener("input", writeFilters);
  $("filters").addEventListener("change", writeFilters);
  $("filters").addEventListener("submit", (event) => event.preventDefault());
  $("pause").addEventListener("click", togglePause);
  $("logout").addEventListener("click", () => showLogin(""));
  $("details-close").addEventListener("click", () => ($("details").hidden = true));
  // A stored token first; else try without one (a daemon with no tokens needs no login).
  const stored = sessionStorage.getItem(TOKEN_KEY);
  try {
    if (stored !== null && (await tryToken(stored))) return startDashboard();
    if (await tryToken("")) return startDashboard();
  } catch (err) {
    showLogin("cannot reach the daemon: " + err.message);
    return;
  }
  showLogin("");
}

// For tests and debugging: the seqs the tail holds, in order.
window.tooldDashboard = { seqs: () => state.events.map((e) => e.seq) };

boot();
