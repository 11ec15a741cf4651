// toold dashboard: the event stream and the virtualised tail (src/api/http/ui.rs).
//
// EventFeed reads `GET /v1/events` with fetch() and a ReadableStream (an EventSource cannot
// send the Authorization header), parses the SSE frames itself, and resumes after a dropped
// connection from the last seq it delivered (Last-Event-ID), dropping any seq it has already
// delivered: nothing is missed or shown twice. VirtualList renders only the rows in view, so
// a tail of 10 000 events costs what a screenful does. Nothing here builds HTML from data:
// rows are filled with textContent.

const RETRY_FIRST_MS = 200;
const RETRY_MAX_MS = 3000;
/// Seqs of history the first connection replays (the tail holds at most 10 000 events).
const RECENT_EVENTS = 10000;

/// A refusal the feed cannot retry past (a token the daemon no longer accepts).
export class AuthError extends Error {}

/// Splits an SSE byte stream into frames {id, event, data}; comments (keep-alives) are skipped.
export async function* sseFrames(body) {
  const reader = body.getReader();
  const decoder = new TextDecoder();
  let buffer = "";
  try {
    for (;;) {
      const { value, done } = await reader.read();
      if (done) return;
      buffer += decoder.decode(value, { stream: true }).replace(/\r\n?/g, "\n");
      let end;
      while ((end = buffer.indexOf("\n\n")) >= 0) {
        const block = buffer.slice(0, end);
        buffer = buffer.slice(end + 2);
        const frame = parseFrame(block);
        if (frame) yield frame;
      }
    }
  } finally {
    reader.releaseLock();
  }
}

function parseFrame(block) {
  const frame = { id: null, event: "message", data: [] };
  for (const line of block.split("\n")) {
    if (line === "" || line.startsWith(":")) continue;
    const colon = line.indexOf(":");
    const field = colon < 0 ? line : line.slice(0, colon);
    let value = colon < 0 ? "" : line.slice(colon + 1);
    if (value.startsWith(" ")) value = value.slice(1);
    if (field === "id") frame.id = value;
    else if (field === "event") frame.event = value;
    else if (field === "data") frame.data.push(value);
  }
  if (frame.data.length === 0) return null;
  return { id: frame.id, event: frame.event, data: frame.data.join("\n") };
}

/// The daemon's whole event stream, delivered once per seq, across reconnects.
/// `onEvent(event)` gets each parsed event; `onState("connecting" | "live" |
/// "reconnecting")` follows the connection; `onAuthError()` ends the feed.
export class EventFeed {
  constructor({ token, onEvent, onState, onAuthError }) {
    this.token = token;
    this.onEvent = onEvent;
    this.onState = onState;
    this.onAuthError = onAuthError;
    this.lastSeq = null;
    this.stopped = false;
    this.controller = null;
  }

  start() {
    this.run();
  }

  stop() {
    this.stopped = true;
    if (this.controller) this.controller.abort();
  }

  async run() {
    let delay = RETRY_FIRST_MS;
    let first = true;
    while (!this.stopped) {
      this.onState(first ? "connecting" : "reconnecting");
      first = false;
      try {
        await this.readOnce();
        delay = RETRY_FIRST_MS;
      } catch (err) {
        if (err instanceof AuthError) {
          this.stopped = true;
          this.onAuthError();
          return;
        }
      }
      if (this.stopped) return;
      this.onState("reconnecting");
      await new Promise((resolve) => setTimeout(resolve, delay));
      delay = Math.min(delay * 2, RETRY_MAX_MS);
    }
  }

  /// One connection: resolves when the stream ends (or the daemon says this reader lagged).
  async readOnce() {
    this.controller = new AbortController();
    const headers = { Accept: "text/event-stream" };
    if (this.token) headers.Authorization = "Bearer " + this.token;
    // The first connection opens with the recent history; a reconnection resumes after the
    // last seq delivered.
    let url = "/v1/events?recent=" + RECENT_EVENTS;
    if (this.lastSeq !== null) {
      headers["Last-Event-ID"] = String(this.lastSeq);
      url = "/v1/events";
    }
    const response = await fetch(url, { headers, signal: this.controller.signal, cache: "no-store" });
    if (response.status === 401) throw new AuthError("token rejected");
    if (!response.ok || !response.body) throw new Error("events: HTTP " + response.status);
    this.onState("live");
    for await (const frame of sseFrames(response.body)) {
      // `lagged`: this reader fell behind; reconnecting resumes from the last seq delivered.
      if (frame.event === "lagged") return;
      let event;
      try {
        event = JSON.parse(frame.data);
      } catch {
        continue;
      }
      if (typeof event.seq !== "number") continue;
      if (this.lastSeq !== null && event.seq <= this.lastSeq) continue;
      this.lastSeq = event.seq;
      this.onEvent(event);
    }
  }
}

/// A scrolling list of `count` rows of equal height, of which only those in view (plus a few)
/// exist in the DOM. `fill(row, index)` fills a row element; `onSelect(index)` on a click.
export class VirtualList {
  constructor({ viewport, rowHeight, fill, onSelect }) {
    this.viewport = viewport;
    this.rowHeight = rowHeight;
    this.fill = fill;
    this.onSelect = onSelect;
    this.count = 0;
    this.scheduled = false;
    this.spacer = document.createElement("div");
    this.spacer.className = "vlist-spacer";
    this.rows = document.createElement("div");
    this.rows.className = "vlist-rows";
    viewport.replaceChildren(this.spacer, this.rows);
    viewport.addEventListener("scroll", () => this.schedule());
    window.addEventListener("resize", () => this.schedule());
    this.rows.addEventListener("click", (event) => {
      const row = event.target.closest(".vlist-row");
      if (row) this.onSelect(Number(row.dataset.index));
    });
  }

  /// Shows `count` rows from the next frame on (a burst of events costs one layout a
  /// frame, not one each); follows the end when the view was at the end before.
  setCount(count) {
    this.count = count;
    this.schedule();
  }

  isAtEnd() {
    const v = this.viewport;
    return v.scrollTop + v.clientHeight >= v.scrollHeight - this.rowHeight;
  }

  schedule() {
    if (this.scheduled) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      this.render();
    });
  }

  render() {
    const height = this.count * this.rowHeight;
    if (this.spacer.offsetHeight !== height) {
      const atEnd = this.isAtEnd();
      this.spacer.style.height = height + "px";
      if (atEnd) this.viewport.scrollTop = height;
    }
    const overscan = 10;
    const top = this.viewport.scrollTop;
    const first = Math.max(0, Math.floor(top / this.rowHeight) - overscan);
    const visible = Math.ceil(this.viewport.clientHeight / this.rowHeight) + 2 * overscan;
    const last = Math.min(this.count, first + visible);
    const rows = [];
    for (let index = first; index < last; index++) {
      const row = document.createElement("div");
      row.className = "vlist-row";
      row.dataset.index = String(index);
      row.style.top = index * this.rowHeight + "px";
      this.fill(row, index);
      rows.push(row);
    }
    this.rows.replaceChildren(...rows);
  }
}
