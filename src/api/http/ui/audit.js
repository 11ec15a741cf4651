// toold dashboard: the audit view (src/api/http/ui.rs says why it is built this way). The
// audit log across sessions from GET /v1/calls, newest first, a page at a time ("More"),
// with its filters kept in the page's URL (`?audit.tool=bash&audit.decision=deny`, beside
// the tail's own filters) so a view can be shared or reloaded. A row links to its session's
// and its trace's calls (the same view, filtered). Text only: every value goes through
// textContent.

const FILTERS = ["session", "principal", "tool", "decision", "decided_by", "error_kind", "since", "trace_id"];
const PREFIX = "audit.";
const PAGE = 50;

export class AuditView {
  /// `api(path)` fetches JSON with the token; `el(tag, text, className)` makes a node.
  constructor({ api, el }) {
    this.api = api;
    this.el = el;
    this.next = null;
    this.form = document.getElementById("audit-filters");
    this.rows = document.querySelector("#audit tbody");
    this.note = document.getElementById("audit-note");
    this.more = document.getElementById("audit-more");
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.writeUrl();
      this.load().catch((err) => this.fail(err));
    });
    this.more.addEventListener("click", () => this.page().catch((err) => this.fail(err)));
    window.addEventListener("popstate", () => this.start());
  }

  field(name) {
    return this.form.elements.namedItem(name);
  }

  /// The filters from the URL into the form, then the first page.
  start() {
    const params = new URLSearchParams(location.search);
    for (const name of FILTERS) this.field(name).value = params.get(PREFIX + name) || "";
    this.load().catch((err) => this.fail(err));
  }

  /// The form into the URL, keeping every parameter that is not the audit view's.
  writeUrl() {
    const params = new URLSearchParams(location.search);
    for (const name of FILTERS) {
      const value = this.field(name).value.trim();
      if (value) params.set(PREFIX + name, value);
      else params.delete(PREFIX + name);
    }
    const query = params.toString();
    history.pushState(null, "", location.pathname + (query ? "?" + query : ""));
  }

  query() {
    const params = new URLSearchParams();
    for (const name of FILTERS) {
      let value = this.field(name).value.trim();
      if (!value) continue;
      // `since` as the page offers it: hours back from now, or a time as the API takes it.
      if (name === "since" && /^\d+(\.\d+)?$/.test(value)) {
        value = new Date(Date.now() - Number(value) * 3600 * 1000).toISOString();
      }
      params.set(name, value);
    }
    return params;
  }

  async load() {
    this.rows.replaceChildren();
    this.next = null;
    this.note.textContent = "";
    await this.page();
  }

  async page() {
    const params = this.query();
    params.set("limit", String(PAGE));
    if (this.next !== null) params.set("cursor", String(this.next));
    const { calls, next_cursor } = await this.api("/v1/calls?" + params.toString());
    for (const call of calls) this.rows.append(this.row(call));
    this.next = next_cursor;
    this.more.hidden = next_cursor === null || next_cursor === undefined;
    if (!this.rows.children.length) this.note.textContent = "no calls match";
  }

  fail(err) {
    this.note.textContent = err.message;
    this.note.className = "error";
  }

  /// A link to this view filtered by `name` = `value`.
  link(name, value, text) {
    const params = new URLSearchParams(location.search);
    for (const filter of FILTERS) params.delete(PREFIX + filter);
    params.set(PREFIX + name, value);
    const a = this.el("a", text);
    a.href = location.pathname + "?" + params.toString();
    a.className = "audit-" + name;
    a.addEventListener("click", (event) => {
      event.preventDefault();
      history.pushState(null, "", a.href);
      this.start();
    });
    return a;
  }

  row(call) {
    const el = this.el;
    const tr = el("tr");
    tr.dataset.callId = call.call_id;
    const decision = call.decision ? call.decision.decision : "";
    const decidedBy = call.decision ? call.decision.decided_by.by : "";
    const tool = call.tool || call.requested_name;
    const texts = [call.started_at, call.principal || "—", tool, decision || "—", decidedBy || "—", call.error_kind || "—"];
    for (const text of texts) {
      const td = el("td", text);
      td.title = String(text);
      tr.append(td);
    }
    if (decision === "deny") tr.className = "warn";
    else if (call.is_error) tr.className = "bad";
    const session = el("td");
    session.append(this.link("session", call.session_id, "…" + String(call.session_id).slice(-10)));
    session.title = call.session_id;
    const trace = el("td");
    if (call.trace_id) trace.append(this.link("trace_id", call.trace_id, "…" + call.trace_id.slice(-8)));
    else trace.textContent = "—";
    tr.append(session, trace, el("td", call.call_id));
    return tr;
  }
}
